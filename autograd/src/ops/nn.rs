//! Neural-network ops: softmax family (cross-entropy included), 2-D convolution and pooling. Their gradients use the
//! backward pieces of the backend (`conv2d_backward_input`, `conv2d_backward_weight`,
//! `max_pool2d_backward`, `avg_pool2d_backward`), so a backend's fused kernels serve both ways.

use super::grad_if;
use crate::Var;
use tessera_core::{dispatch, Backend, Conv2dParams, Pool2dParams, Result, Tensor};

impl<B: Backend> Var<B> {
    /// Softmax along `axis`; gradient `y (g - sum(g y))` along `axis`.
    pub fn softmax(&self, axis: isize) -> Result<Var<B>> {
        let y = self.value().softmax(axis)?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| {
            let dot = g.mul(&saved)?.sum(&[axis], true)?;
            saved.mul(&g.sub(&dot)?)
        }))
    }

    /// Log-softmax along `axis`; gradient `g - softmax(x) sum(g)` along `axis`.
    pub fn log_softmax(&self, axis: isize) -> Result<Var<B>> {
        let y = self.value().log_softmax(axis)?;
        let saved = y.clone();
        Ok(self.unary_op(y, move |g| {
            let total = g.sum(&[axis], true)?;
            g.sub(&saved.exp()?.mul(&total)?)
        }))
    }

    /// Softmax cross-entropy of each row of `self: [n, c]` (logits) against the class indices
    /// `targets: [n]` (`i64`), with label smoothing in `[0, 1]`: the per-row losses `[n]`
    /// (see [`tessera_core::cross_entropy`]). Forward and gradient are the backend's
    /// [`Backend::cross_entropy`] and [`Backend::cross_entropy_backward`] (one pass over each
    /// row where the backend fuses them); only the logits and targets are kept for the
    /// backward pass, no log-probabilities.
    pub fn cross_entropy(&self, targets: &Tensor<B>, label_smoothing: f64) -> Result<Var<B>> {
        let logits = self.value();
        let losses = dispatch::cross_entropy(&logits, targets, label_smoothing)?;
        let targets = targets.clone();
        Ok(self.unary_op(losses, move |g| {
            dispatch::cross_entropy_backward(&logits, &targets, g, label_smoothing)
        }))
    }

    /// 2-D convolution: `self: [n, c, h, w]`, `weight: [o, c, kh, kw]`, optional `bias: [o]`.
    pub fn conv2d(
        &self,
        weight: &Var<B>,
        bias: Option<&Var<B>>,
        params: Conv2dParams,
    ) -> Result<Var<B>> {
        let (x, w) = (self.value(), weight.value());
        let b = bias.map(Var::value);
        let value = x.conv2d(&w, b.as_ref(), params)?;
        let need = [
            self.requires_grad(),
            weight.requires_grad(),
            bias.is_some_and(Var::requires_grad),
        ];
        let mut parents = vec![self.clone(), weight.clone()];
        parents.extend(bias.cloned());
        let has_bias = bias.is_some();
        Ok(Var::from_op(value, parents, move |g| {
            let gx = grad_if(need[0], || g.conv2d_backward_input(&w, x.dims(), params))?;
            let gw = grad_if(need[1], || g.conv2d_backward_weight(&x, w.dims(), params))?;
            let mut grads = vec![gx, gw];
            if has_bias {
                grads.push(grad_if(need[2], || g.sum(&[0, 2, 3], false))?);
            }
            Ok(grads)
        }))
    }

    /// Max pooling over `[n, c, h, w]`; each window's gradient goes to the position of its
    /// maximum (the first one when several tie, as the backend's argmax reports it).
    pub fn max_pool2d(&self, params: Pool2dParams) -> Result<Var<B>> {
        let x = self.value();
        let (value, window_argmax) = x.max_pool2d_with_indices(params)?;
        let dims = x.dims().to_vec();
        Ok(self.unary_op(value, move |g| {
            g.max_pool2d_backward(&window_argmax, &dims, params)
        }))
    }

    /// Average pooling over `[n, c, h, w]` (padding counts as zeros).
    pub fn avg_pool2d(&self, params: Pool2dParams) -> Result<Var<B>> {
        let x = self.value();
        let value = x.avg_pool2d(params)?;
        let dims = x.dims().to_vec();
        Ok(self.unary_op(value, move |g| g.avg_pool2d_backward(&dims, params)))
    }
}
