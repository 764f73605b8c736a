//! Scaled dot-product attention: validated here, computed by the backend (its fused kernel or
//! the composite default of [`crate::composite::attention`]).

use super::Tensor;
use crate::attention::{
    AttentionGrads, AttentionInputs, AttentionOptions, AttentionOutput, AttentionParams,
};
use crate::dispatch;
use crate::{Backend, DType, Error, Result, Shape};

const OP: &str = "scaled_dot_product_attention";

fn invalid(msg: String) -> Error {
    Error::InvalidArgument { op: OP, msg }
}

impl<B: Backend> Tensor<B> {
    /// Scaled dot-product attention of the queries `self: [..b, L, E]` over keys `k: [..b, S, E]`
    /// and values `v: [..b, S, Ev]` (PyTorch's `scaled_dot_product_attention`; the definition,
    /// masks and dropout are described in [`crate::attention`]). The batch dimensions `..b`
    /// (any number, e.g. `[batch, heads]`) must be equal; the inputs may be any strided views
    /// (a head split of a fused projection is read in place by fused kernels). Returns
    /// `[..b, L, Ev]`.
    pub fn scaled_dot_product_attention(
        &self,
        k: &Self,
        v: &Self,
        options: &AttentionOptions<'_, B>,
    ) -> Result<Self> {
        Ok(self
            .scaled_dot_product_attention_with_lse(k, v, options)?
            .out)
    }

    /// [`Tensor::scaled_dot_product_attention`] also returning the per-row log-sum-exp of the
    /// scores, which is what [`Tensor::scaled_dot_product_attention_backward`] needs.
    pub fn scaled_dot_product_attention_with_lse(
        &self,
        k: &Self,
        v: &Self,
        options: &AttentionOptions<'_, B>,
    ) -> Result<AttentionOutput<B>> {
        let (params, mask) = self.attention_params(k, v, options)?;
        let inputs = AttentionInputs {
            q: self,
            k,
            v,
            mask: mask.as_ref(),
        };
        dispatch::attention(inputs, &params)
    }

    /// The gradients of the attention of `q`, `k`, `v` with `options` (the same as in the
    /// forward pass, dropout stream included) given `self`, the gradient of its output, and
    /// the forward pass's result.
    pub fn scaled_dot_product_attention_backward(
        &self,
        q: &Self,
        k: &Self,
        v: &Self,
        options: &AttentionOptions<'_, B>,
        forward: &AttentionOutput<B>,
    ) -> Result<AttentionGrads<B>> {
        let (params, mask) = q.attention_params(k, v, options)?;
        check_attention_backward_operands(self, (q, k, v), mask.as_ref(), forward, &params)?;
        let inputs = AttentionInputs {
            q,
            k,
            v,
            mask: mask.as_ref(),
        };
        dispatch::attention_backward(self, inputs, forward, &params)
    }

    /// Checks the operands and resolves the options: the parameters a backend receives and
    /// the mask broadcast to `[..b, L, S]`.
    fn attention_params(
        &self,
        k: &Self,
        v: &Self,
        options: &AttentionOptions<'_, B>,
    ) -> Result<(AttentionParams, Option<Self>)> {
        let q = self;
        let e = q.dims().last().copied().unwrap_or(1);
        let params = AttentionParams {
            scale: options.scale.unwrap_or(1.0 / (e.max(1) as f64).sqrt()),
            causal: options.causal,
            dropout: options.dropout,
        };
        let (l, s, _, _) = check_attention_operands(q, k, v, None, &params)?;
        let batch = &q.dims()[..q.rank() - 2];
        let mask = match options.mask {
            None => None,
            Some(m) => {
                q.check_same_device(OP, m)?;
                if m.dtype() != DType::Bool && m.dtype() != q.dtype() {
                    return Err(invalid(format!(
                        "the mask must be bool or {} (the dtype of q), got {}",
                        q.dtype(),
                        m.dtype()
                    )));
                }
                let mut dims = batch.to_vec();
                dims.extend([l, s]);
                let target = Shape::new(dims);
                if m.shape().broadcast_with(OP, &target)? != target {
                    return Err(invalid(format!(
                        "mask {} does not broadcast to the scores {target}",
                        m.shape()
                    )));
                }
                Some(m.broadcast_to(&target)?)
            }
        };
        let params = AttentionParams {
            dropout: params.dropout.filter(|d| d.p > 0.0),
            ..params
        };
        Ok((params, mask))
    }
}

/// Checks the operands of [`Backend::scaled_dot_product_attention`] as a backend receives
/// them, for backends and composites whose public methods are called without
/// [`Tensor::scaled_dot_product_attention`]'s checks in front: `q`, `k`, `v` float tensors of
/// one dtype and device, `[..b, L, E]`, `[..b, S, E]`, `[..b, S, Ev]`; the mask, if any, bool
/// or `q`'s dtype and exactly `[..b, L, S]`; a finite scale and a dropout probability in
/// `[0, 1)`. Returns `(L, S, E, Ev)`.
pub fn check_attention_operands<B: Backend>(
    q: &Tensor<B>,
    k: &Tensor<B>,
    v: &Tensor<B>,
    mask: Option<&Tensor<B>>,
    params: &AttentionParams,
) -> Result<(usize, usize, usize, usize)> {
    q.check_float(OP)?;
    for t in [k, v] {
        q.check_same_device(OP, t)?;
        q.check_same_dtype(OP, t)?;
    }
    let rank = q.rank();
    if rank < 2 || k.rank() != rank || v.rank() != rank {
        return Err(invalid(format!(
            "q, k and v must have one rank >= 2, got {}, {} and {}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    let batch = &q.dims()[..rank - 2];
    let (l, e) = (q.dims()[rank - 2], q.dims()[rank - 1]);
    let (s, ek) = (k.dims()[rank - 2], k.dims()[rank - 1]);
    let (sv, ev) = (v.dims()[rank - 2], v.dims()[rank - 1]);
    if &k.dims()[..rank - 2] != batch || &v.dims()[..rank - 2] != batch || ek != e || sv != s {
        return Err(invalid(format!(
            "expected q [..b, L, E], k [..b, S, E] and v [..b, S, Ev], got {}, {} and {}",
            q.shape(),
            k.shape(),
            v.shape()
        )));
    }
    if !params.scale.is_finite() {
        return Err(invalid(format!(
            "scale must be finite, got {}",
            params.scale
        )));
    }
    if let Some(d) = params.dropout {
        if !(0.0..1.0).contains(&d.p) {
            return Err(invalid(format!(
                "dropout probability must be in [0, 1), got {}",
                d.p
            )));
        }
    }
    if let Some(m) = mask {
        q.check_same_device(OP, m)?;
        let mut scores = batch.to_vec();
        scores.extend([l, s]);
        if m.dims() != scores || (m.dtype() != DType::Bool && m.dtype() != q.dtype()) {
            return Err(invalid(format!(
                "a backend's mask must be bool or {} of the scores' shape {}, got {} {}",
                q.dtype(),
                Shape::new(scores),
                m.dtype(),
                m.shape()
            )));
        }
    }
    Ok((l, s, e, ev))
}

/// [`check_attention_operands`] for the backward pass, plus the upstream gradient
/// `[..b, L, Ev]` and the saved output `[..b, L, Ev]` of `q`'s dtype and the log-sum-exp
/// `[..b, L]` of its compute dtype (f32 for 16-bit queries), all on `q`'s device.
pub fn check_attention_backward_operands<B: Backend>(
    grad_out: &Tensor<B>,
    (q, k, v): (&Tensor<B>, &Tensor<B>, &Tensor<B>),
    mask: Option<&Tensor<B>>,
    forward: &AttentionOutput<B>,
    params: &AttentionParams,
) -> Result<()> {
    let (_, _, _, ev) = check_attention_operands(q, k, v, mask, params)?;
    let mut out_dims = q.dims().to_vec();
    *out_dims.last_mut().expect("rank >= 2, checked") = ev;
    let lse_dims = &q.dims()[..q.rank() - 1];
    if grad_out.dims() != out_dims
        || forward.out.dims() != out_dims
        || forward.logsumexp.dims() != lse_dims
    {
        return Err(invalid(format!(
            "gradient {}, saved output {} and log-sum-exp {} do not fit queries {} and values {}",
            grad_out.shape(),
            forward.out.shape(),
            forward.logsumexp.shape(),
            q.shape(),
            v.shape()
        )));
    }
    for t in [grad_out, &forward.out, &forward.logsumexp] {
        q.check_same_device(OP, t)?;
    }
    for t in [grad_out, &forward.out] {
        q.check_same_dtype(OP, t)?;
    }
    let lse_dtype = q.dtype().compute_dtype();
    if forward.logsumexp.dtype() != lse_dtype {
        return Err(crate::Error::DTypeMismatch {
            op: OP,
            lhs: lse_dtype,
            rhs: forward.logsumexp.dtype(),
        });
    }
    Ok(())
}
