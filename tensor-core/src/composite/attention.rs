//! Scaled dot-product attention and its gradient written with tensor ops: two batched matrix
//! products around a masked softmax (see [`crate::attention`] for the definition). It
//! materialises the `[..b, L, S]` scores, which a fused kernel avoids; it is the reference such
//! kernels are checked against.

use crate::attention::{
    check_attention_backward_operands, check_attention_operands, AttentionGrads, AttentionInputs,
    AttentionOutput, AttentionParams,
};
use crate::{Backend, DType, Distribution, Result, Tensor};

/// The scaled scores `q·kᵀ·scale` with the mask and causality applied: `[..b, L, S]`.
fn masked_scores<B: Backend>(
    q: &Tensor<B>,
    k: &Tensor<B>,
    mask: Option<&Tensor<B>>,
    params: &AttentionParams,
) -> Result<Tensor<B>> {
    let mut s = q.matmul(&k.transpose(-2, -1)?)?.mul_scalar(params.scale)?;
    let dims = s.dims().to_vec();
    let (l, len) = (dims[dims.len() - 2], dims[dims.len() - 1]);
    if params.causal {
        let rows = Tensor::arange(0.0, l as f64, 1.0, DType::I64, q.backend())?.reshape([l, 1])?;
        let cols =
            Tensor::arange(0.0, len as f64, 1.0, DType::I64, q.backend())?.reshape([1, len])?;
        s = cols
            .le(&rows)?
            .where_select(&s, &s.full_like(f64::NEG_INFINITY)?)?;
    }
    if let Some(m) = mask {
        s = if m.dtype() == DType::Bool {
            m.where_select(&s, &s.full_like(f64::NEG_INFINITY)?)?
        } else {
            s.add(m)?
        };
    }
    Ok(s)
}

/// `exp(s - lse)`, with rows whose log-sum-exp is `-inf` (every score masked) giving zeros.
fn probabilities<B: Backend>(s: &Tensor<B>, lse: &Tensor<B>) -> Result<Tensor<B>> {
    let empty = lse.eq_scalar(f64::NEG_INFINITY)?;
    let shift = empty.where_select(&lse.zeros_like()?, lse)?;
    s.sub(&shift)?.exp()
}

/// The dropout factors `keep / (1 - p)` of shape `dims`, or None without dropout.
fn dropout_factors<B: Backend>(
    like: &Tensor<B>,
    params: &AttentionParams,
) -> Result<Option<Tensor<B>>> {
    let Some(d) = params.dropout else {
        return Ok(None);
    };
    let uniform = Tensor::random(
        like.shape(),
        Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        },
        like.dtype(),
        d.seed,
        d.offset,
        like.backend(),
    )?;
    let keep = uniform.ge_scalar(d.p)?.to_dtype(like.dtype())?;
    keep.mul_scalar(1.0 / (1.0 - d.p)).map(Some)
}

/// The attention of `q: [..b, L, E]` over `k: [..b, S, E]`, `v: [..b, S, Ev]` (identical batch
/// dimensions; `mask`, if any, already broadcast to `[..b, L, S]`).
pub fn scaled_dot_product_attention<B: Backend>(
    inputs: AttentionInputs<'_, B>,
    params: &AttentionParams,
) -> Result<AttentionOutput<B>> {
    let AttentionInputs { q, k, v, mask } = inputs;
    check_attention_operands(q, k, v, mask, params)?;
    let s = masked_scores(q, k, mask, params)?;
    let lse = s.logsumexp(-1, true)?;
    let mut p = probabilities(&s, &lse)?;
    if let Some(factors) = dropout_factors(&p, params)? {
        p = p.mul(&factors)?;
    }
    Ok(AttentionOutput {
        out: p.matmul(v)?.contiguous()?,
        logsumexp: lse
            .squeeze(-1)?
            .to_dtype(q.dtype().compute_dtype())?
            .contiguous()?,
    })
}

/// The gradients of [`scaled_dot_product_attention`] given the upstream gradient `grad_out: [..b, L, Ev]` and the
/// forward pass's output and log-sum-exp:
///
/// ```text
/// P = exp(S - lse), P' = P ∘ dropout factors, dV = P'ᵀ·dO, dP = (dO·Vᵀ) ∘ dropout factors,
/// D = rowsum(dO ∘ O), dS = P ∘ (dP - D), dQ = scale·dS·K, dK = scale·dSᵀ·Q
/// ```
pub fn scaled_dot_product_attention_backward<B: Backend>(
    grad_out: &Tensor<B>,
    inputs: AttentionInputs<'_, B>,
    forward: &AttentionOutput<B>,
    params: &AttentionParams,
) -> Result<AttentionGrads<B>> {
    let AttentionInputs { q, k, v, mask } = inputs;
    check_attention_backward_operands(grad_out, (q, k, v), mask, forward, params)?;
    let s = masked_scores(q, k, mask, params)?;
    let lse = forward.logsumexp.to_dtype(q.dtype())?;
    let p = probabilities(&s, &lse.unsqueeze(-1)?)?;
    let factors = dropout_factors(&p, params)?;
    let (p_dropped, mut dp) = match &factors {
        Some(f) => (p.mul(f)?, grad_out.matmul(&v.transpose(-2, -1)?)?.mul(f)?),
        None => (p.clone(), grad_out.matmul(&v.transpose(-2, -1)?)?),
    };
    let dv = p_dropped.transpose(-2, -1)?.matmul(grad_out)?;
    let d = grad_out.mul(&forward.out)?.sum(&[-1], true)?;
    dp = dp.sub(&d)?;
    let ds = p.mul(&dp)?;
    let dq = ds.matmul(k)?.mul_scalar(params.scale)?;
    let dk = ds.transpose(-2, -1)?.matmul(q)?.mul_scalar(params.scale)?;
    Ok(AttentionGrads {
        q: dq.contiguous()?,
        k: dk.contiguous()?,
        v: dv.contiguous()?,
    })
}
