//! The composites of [`Checked`]: each runs the composite of the backend under test (its fused
//! override, or the default) and the reference's, and compares the two results.

use crate::settle::OpSpec;
use crate::storage::CheckedStorage;
use crate::tolerance::Tolerance;
use crate::Checked;
use std::sync::Arc;
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::dispatch::{self, RowOp as DispatchRow};
use tessera_core::{
    Backend, BackendStorage, Conv2dParams, DType, Error, Layout, Pool2dParams, Result, Tensor,
};

/// The three row-wise ops of the softmax family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowOp {
    Softmax,
    LogSoftmax,
    LogSumExp,
}

/// The number of terms summed into one output element of a composite (for its tolerance).
fn product(dims: &[usize]) -> usize {
    dims.iter().product()
}

/// The largest `|x|` over the finite elements of `x` (0 when none is finite): the error scale
/// of results that subtract a row's log-sum-exp.
pub(crate) fn largest_finite_magnitude<R: Backend>(x: &Tensor<R>) -> Result<f64> {
    Ok(x.to_vec_f64()?
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs())))
}

impl<B: Backend, R: Backend> Checked<B, R> {
    /// The tensor as seen by each backend: same layout over each side's buffer.
    pub(crate) fn split(&self, t: &Tensor<Self>) -> Result<(Tensor<B>, Tensor<R>)> {
        let s = t.storage();
        Ok((
            Tensor::from_shared(self.under_test(), s.under_test.clone(), t.layout().clone())?,
            Tensor::from_shared(self.reference(), s.reference.clone(), t.layout().clone())?,
        ))
    }

    /// Compares the two results of a composite and pairs them into one checked tensor.
    pub(crate) fn settle_tensors(
        &self,
        op: &'static str,
        inputs: &[&Tensor<Self>],
        tolerance: Tolerance,
        b: Tensor<B>,
        r: Tensor<R>,
        magnitude: Option<Tensor<R>>,
    ) -> Result<Tensor<Self>> {
        let layouts: Vec<&Layout> = inputs.iter().map(|t| t.layout()).collect();
        let spec = OpSpec::new(op, &layouts, r.dims(), tolerance);
        if b.dims() != r.dims() {
            return Err(Error::Divergence {
                op,
                under_test: self.under_test().name(),
                reference: self.reference().name(),
                inputs: spec.inputs,
                max_error: f64::INFINITY,
                detail: format!("output shape {} vs {}", b.shape(), r.shape()),
            });
        }
        let got = b.to_host()?;
        let expected = r.to_host()?;
        let magnitude = magnitude.map(|m| m.to_vec_f64()).transpose()?;
        self.compare(&spec, &got, &expected, magnitude.as_deref())?;
        let whole = b.layout().is_contiguous()
            && b.layout().offset() == 0
            && b.storage().len() == b.numel();
        let under_test = if whole {
            b.storage_arc().clone()
        } else {
            Arc::new(self.under_test().copy_strided(b.operand("settle")?)?)
        };
        let storage = CheckedStorage {
            under_test,
            reference: Arc::new(self.reference().upload(got)?),
        };
        Tensor::from_parts(self, storage, Layout::contiguous(b.shape().clone()))
    }

    pub(crate) fn checked_concat(
        &self,
        tensors: &[&Tensor<Self>],
        axis: usize,
    ) -> Result<Tensor<Self>> {
        let (bs, rs): (Vec<Tensor<B>>, Vec<Tensor<R>>) = tensors
            .iter()
            .map(|t| self.split(t))
            .collect::<Result<Vec<_>>>()?
            .into_iter()
            .unzip();
        let b = self
            .under_test()
            .concat(&bs.iter().collect::<Vec<_>>(), axis)?;
        let r = self
            .reference()
            .concat(&rs.iter().collect::<Vec<_>>(), axis)?;
        self.settle_tensors("concat", tensors, Tolerance::SAME_VALUE, b, r, None)
    }

    pub(crate) fn checked_softmax_family(
        &self,
        op: RowOp,
        x: &Tensor<Self>,
        axis: usize,
    ) -> Result<Tensor<Self>> {
        let (xb, xr) = self.split(x)?;
        let (name, b, r) = match op {
            RowOp::Softmax => (
                "softmax",
                dispatch::softmax_family(DispatchRow::Softmax, &xb, axis)?,
                dispatch::softmax_family(DispatchRow::Softmax, &xr, axis)?,
            ),
            RowOp::LogSoftmax => (
                "log_softmax",
                dispatch::softmax_family(DispatchRow::LogSoftmax, &xb, axis)?,
                dispatch::softmax_family(DispatchRow::LogSoftmax, &xr, axis)?,
            ),
            RowOp::LogSumExp => (
                "logsumexp",
                dispatch::softmax_family(DispatchRow::LogSumExp, &xb, axis)?,
                dispatch::softmax_family(DispatchRow::LogSumExp, &xr, axis)?,
            ),
        };
        // x - logsumexp(x) cancels: its error scales with the largest finite |x|.
        let magnitude = if op == RowOp::Softmax || !x.dtype().is_float() {
            None
        } else {
            let largest = largest_finite_magnitude(&xr)?;
            Some(Tensor::full(
                r.shape().clone(),
                largest,
                DType::F64,
                self.reference(),
            )?)
        };
        let tolerance = Tolerance::transcendental(x.dtype());
        self.settle_tensors(name, &[x], tolerance, b, r, magnitude)
    }

    pub(crate) fn checked_conv2d(
        &self,
        x: &Tensor<Self>,
        weight: &Tensor<Self>,
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        let ((xb, xr), (wb, wr)) = (self.split(x)?, self.split(weight)?);
        let b = dispatch::conv2d(&xb, &wb, params)?;
        let r = dispatch::conv2d(&xr, &wr, params)?;
        let magnitude = dispatch::conv2d(&xr.abs()?, &wr.abs()?, params)?;
        let terms = product(&weight.dims()[1..]);
        let tolerance = Tolerance::accumulation(x.dtype(), terms);
        self.settle_tensors("conv2d", &[x, weight], tolerance, b, r, Some(magnitude))
    }

    pub(crate) fn checked_conv2d_backward_input(
        &self,
        grad_out: &Tensor<Self>,
        weight: &Tensor<Self>,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        let ((gb, gr), (wb, wr)) = (self.split(grad_out)?, self.split(weight)?);
        let b = dispatch::conv2d_backward_input(&gb, &wb, input_dims, params)?;
        let r = dispatch::conv2d_backward_input(&gr, &wr, input_dims, params)?;
        let magnitude =
            dispatch::conv2d_backward_input(&gr.abs()?, &wr.abs()?, input_dims, params)?;
        let dims = weight.dims();
        let terms = dims[0] * product(&dims[2..]);
        let tolerance = Tolerance::accumulation(grad_out.dtype(), terms);
        let inputs = [grad_out, weight];
        self.settle_tensors(
            "conv2d_backward_input",
            &inputs,
            tolerance,
            b,
            r,
            Some(magnitude),
        )
    }

    pub(crate) fn checked_conv2d_backward_weight(
        &self,
        x: &Tensor<Self>,
        grad_out: &Tensor<Self>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        let ((xb, xr), (gb, gr)) = (self.split(x)?, self.split(grad_out)?);
        let b = dispatch::conv2d_backward_weight(&xb, &gb, weight_dims, params)?;
        let r = dispatch::conv2d_backward_weight(&xr, &gr, weight_dims, params)?;
        let magnitude =
            dispatch::conv2d_backward_weight(&xr.abs()?, &gr.abs()?, weight_dims, params)?;
        let dims = grad_out.dims();
        let terms = dims[0] * product(&dims[2..]);
        let tolerance = Tolerance::accumulation(x.dtype(), terms);
        let inputs = [x, grad_out];
        self.settle_tensors(
            "conv2d_backward_weight",
            &inputs,
            tolerance,
            b,
            r,
            Some(magnitude),
        )
    }

    pub(crate) fn checked_max_pool2d(
        &self,
        x: &Tensor<Self>,
        params: Pool2dParams,
    ) -> Result<(Tensor<Self>, Tensor<Self>)> {
        let (xb, xr) = self.split(x)?;
        let (vb, ib) = dispatch::max_pool2d(&xb, params)?;
        let (vr, ir) = dispatch::max_pool2d(&xr, params)?;
        let exact = Tolerance::SAME_VALUE;
        let values = self.settle_tensors("max_pool2d", &[x], exact, vb, vr, None)?;
        let argmax = self.settle_tensors("max_pool2d (argmax)", &[x], exact, ib, ir, None)?;
        Ok((values, argmax))
    }

    pub(crate) fn checked_max_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        window_argmax: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        let ((gb, gr), (ib, ir)) = (self.split(grad_out)?, self.split(window_argmax)?);
        let b = dispatch::max_pool2d_backward(&gb, &ib, input_dims, params)?;
        let r = dispatch::max_pool2d_backward(&gr, &ir, input_dims, params)?;
        let magnitude = dispatch::max_pool2d_backward(&gr.abs()?, &ir, input_dims, params)?;
        let terms = params.kernel.0 * params.kernel.1;
        let tolerance = Tolerance::accumulation(grad_out.dtype(), terms);
        let inputs = [grad_out, window_argmax];
        self.settle_tensors(
            "max_pool2d_backward",
            &inputs,
            tolerance,
            b,
            r,
            Some(magnitude),
        )
    }

    pub(crate) fn checked_avg_pool2d(
        &self,
        x: &Tensor<Self>,
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        let (xb, xr) = self.split(x)?;
        let b = dispatch::avg_pool2d(&xb, params)?;
        let r = dispatch::avg_pool2d(&xr, params)?;
        let magnitude = dispatch::avg_pool2d(&xr.abs()?, params)?;
        let terms = params.kernel.0 * params.kernel.1;
        let tolerance = Tolerance::accumulation(x.dtype(), terms);
        self.settle_tensors("avg_pool2d", &[x], tolerance, b, r, Some(magnitude))
    }

    pub(crate) fn checked_avg_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        let (gb, gr) = self.split(grad_out)?;
        let b = dispatch::avg_pool2d_backward(&gb, input_dims, params)?;
        let r = dispatch::avg_pool2d_backward(&gr, input_dims, params)?;
        let magnitude = dispatch::avg_pool2d_backward(&gr.abs()?, input_dims, params)?;
        let terms = params.kernel.0 * params.kernel.1;
        let tolerance = Tolerance::accumulation(grad_out.dtype(), terms);
        self.settle_tensors(
            "avg_pool2d_backward",
            &[grad_out],
            tolerance,
            b,
            r,
            Some(magnitude),
        )
    }

    pub(crate) fn checked_relu_backward(
        &self,
        x: &Tensor<Self>,
        grad: &Tensor<Self>,
    ) -> Result<Tensor<Self>> {
        let ((xb, xr), (gb, gr)) = (self.split(x)?, self.split(grad)?);
        let b = dispatch::relu_backward(&xb, &gb)?;
        let r = dispatch::relu_backward(&xr, &gr)?;
        self.settle_tensors(
            "relu_backward",
            &[x, grad],
            Tolerance::SAME_VALUE,
            b,
            r,
            None,
        )
    }

    /// One Adam step on both sides; each output is compared with the simple tolerance scaled
    /// by the magnitudes of the terms that produce it.
    pub(crate) fn checked_adam_update(
        &self,
        param: &Tensor<Self>,
        grad: &Tensor<Self>,
        exp_avg: &Tensor<Self>,
        exp_avg_sq: &Tensor<Self>,
        max_exp_avg_sq: Option<&Tensor<Self>>,
        update: AdamUpdate,
    ) -> Result<AdamTensors<Self>> {
        let (pb, pr) = self.split(param)?;
        let (gb, gr) = self.split(grad)?;
        let (mb, mr) = self.split(exp_avg)?;
        let (vb, vr) = self.split(exp_avg_sq)?;
        let (hb, hr) = match max_exp_avg_sq {
            Some(h) => {
                let (hb, hr) = self.split(h)?;
                (Some(hb), Some(hr))
            }
            None => (None, None),
        };
        let b = dispatch::adam_update(&pb, &gb, (&mb, &vb), hb.as_ref(), update)?;
        let r = dispatch::adam_update(&pr, &gr, (&mr, &vr), hr.as_ref(), update)?;
        let dtype = param.dtype();
        let tolerance = Tolerance::accumulation(dtype, 16);
        let mut inputs = vec![param, grad, exp_avg, exp_avg_sq];
        inputs.extend(max_exp_avg_sq);
        let sum_abs = |a: &Tensor<R>, b: &Tensor<R>| a.abs()?.add(&b.abs()?);
        // Error scales are the terms of each formula on absolute values: the gradient Adam
        // uses is `g + λp` (coupled decay), whose terms are `|g| + |λ||p|`, so that `g + λp`
        // cancelling does not shrink the bound (issue 28's false positive in the harness).
        let g_terms = gr
            .abs()?
            .add(&pr.abs()?.mul_scalar(update.coupled_decay.abs())?)?;
        let p_scale = sum_abs(&pr, &r.param)?.add(&mr.abs()?.add(&g_terms)?)?;
        let m_scale = mr.abs()?.add(&g_terms)?;
        let v_scale = vr.abs()?.add(&g_terms.square()?)?;
        let name = "adam_update";
        let new_param =
            self.settle_tensors(name, &inputs, tolerance, b.param, r.param, Some(p_scale))?;
        let new_avg = self.settle_tensors(
            name,
            &inputs,
            tolerance,
            b.exp_avg,
            r.exp_avg,
            Some(m_scale),
        )?;
        let new_avg_sq = self.settle_tensors(
            name,
            &inputs,
            tolerance,
            b.exp_avg_sq,
            r.exp_avg_sq,
            Some(v_scale.clone()),
        )?;
        let new_max = match (b.max_exp_avg_sq, r.max_exp_avg_sq) {
            (Some(hb), Some(h_ref)) => {
                // max(h, v'): the larger of the old maximum and the new second moment, whose
                // error scale is v's.
                let h_scale = match &hr {
                    Some(h) => h.abs()?.add(&v_scale)?,
                    None => v_scale.clone(),
                };
                Some(self.settle_tensors(name, &inputs, tolerance, hb, h_ref, Some(h_scale))?)
            }
            _ => None,
        };
        Ok(AdamTensors {
            param: new_param,
            exp_avg: new_avg,
            exp_avg_sq: new_avg_sq,
            max_exp_avg_sq: new_max,
        })
    }
}
