//! Layer normalisation over the last axis as one differentiable op: the forward pass keeps the
//! input and the per-row mean and `rstd`, and the backward pass hands them to the backend's
//! fused gradient ([`tessera_core::Backend::layer_norm_backward`]), instead of recording the
//! eight element-wise ops and reductions of the definition.

use crate::Var;
use tessera_core::{dispatch, Backend, Result};

impl<B: Backend> Var<B> {
    /// Layer normalisation of `self: [..rows, n]` over its last axis with an optional
    /// `weight` and `bias` of shape `[n]` and `eps` (see [`tessera_core::layer_norm`]);
    /// gradients flow to `self`, `weight` and `bias`.
    pub fn layer_norm(
        &self,
        weight: Option<&Var<B>>,
        bias: Option<&Var<B>>,
        eps: f64,
    ) -> Result<Var<B>> {
        let x = self.value();
        let (w, b) = (weight.map(Var::value), bias.map(Var::value));
        let out = dispatch::layer_norm(&x, w.as_ref(), b.as_ref(), eps)?;
        let need_x = self.requires_grad();
        let need_w = weight.is_some_and(Var::requires_grad);
        let need_b = bias.is_some_and(Var::requires_grad);
        let mut parents = vec![self.clone()];
        parents.extend(weight.cloned());
        parents.extend(bias.cloned());
        let (mean, rstd) = (out.mean, out.rstd);
        let has_bias = bias.is_some();
        Ok(Var::from_op(out.y, parents, move |g| {
            let grads = dispatch::layer_norm_backward(g, &x, w.as_ref(), (&mean, &rstd), need_b)?;
            let mut out = vec![need_x.then_some(grads.x)];
            if w.is_some() {
                out.push(if need_w { grads.weight } else { None });
            }
            if has_bias {
                out.push(grads.bias);
            }
            Ok(out)
        }))
    }
}
