//! Layer normalisation over the last axis: what a backend receives and returns for
//! [`crate::Backend::layer_norm`] and [`crate::Backend::layer_norm_backward`]. The definition,
//! the default every backend may override with a fused kernel, is
//! [`crate::composite::layer_norm`].
//!
//! # Definition
//! For `x: [..rows, n]`, each row `r` of `n` values, and an `eps > 0`:
//!
//! ```text
//! mean[r] = Σ_i x[r][i] / n
//! var[r]  = Σ_i (x[r][i] - mean[r])² / n        (the biased variance, as PyTorch's)
//! rstd[r] = 1 / √(var[r] + eps)
//! y[r][i] = (x[r][i] - mean[r]) · rstd[r] · weight[i] + bias[i]
//! ```
//!
//! and, for the upstream gradient `g` and `x̂ = (x - mean) · rstd`, `ĝ = g · weight`:
//!
//! ```text
//! dx[r][i]    = rstd[r] · (ĝ[r][i] - mean_i(ĝ[r]) - x̂[r][i] · mean_i(ĝ[r] · x̂[r]))
//! dweight[i]  = Σ_r g[r][i] · x̂[r][i]
//! dbias[i]    = Σ_r g[r][i]
//! ```
//!
//! PyTorch's `torch.nn.functional.layer_norm(x, [n], weight, bias, eps)` gives the same values.

use crate::{Backend, Error, Result, Tensor};

/// What [`crate::Backend::layer_norm`] returns: the output and the per-row statistics the
/// backward pass reuses.
#[derive(Clone, Debug)]
pub struct LayerNormOutput<B: Backend> {
    /// The normalised output, of `x`'s shape and dtype.
    pub y: Tensor<B>,
    /// The mean of each row, shaped `[..rows, 1]`, in the compute dtype (f32 when a 16-bit
    /// input was widened).
    pub mean: Tensor<B>,
    /// `1 / √(var + eps)` of each row, shaped and typed like `mean`.
    pub rstd: Tensor<B>,
}

/// What [`crate::Backend::layer_norm_backward`] returns.
#[derive(Clone, Debug)]
pub struct LayerNormGrads<B: Backend> {
    /// The gradient of `x`.
    pub x: Tensor<B>,
    /// The gradient of `weight`, when a weight was given.
    pub weight: Option<Tensor<B>>,
    /// The gradient of the bias, when asked for.
    pub bias: Option<Tensor<B>>,
}

/// The shape of the per-row statistics of an input of shape `dims` (rank >= 1): `dims` with a
/// last axis of 1.
pub fn stats_dims(dims: &[usize]) -> Vec<usize> {
    let mut out = dims.to_vec();
    if let Some(last) = out.last_mut() {
        *last = 1;
    }
    out
}

/// The checks every implementation of the forward pass makes first: `x` float of rank >= 1
/// with a non-empty last axis, `weight` and `bias` of shape `[n]` with `x`'s dtype and device,
/// and `eps` finite and positive. Returns `n`.
pub fn check_layer_norm<B: Backend>(
    x: &Tensor<B>,
    weight: Option<&Tensor<B>>,
    bias: Option<&Tensor<B>>,
    eps: f64,
) -> Result<usize> {
    const OP: &str = "layer_norm";
    x.check_float(OP)?;
    let n = match x.dims().last() {
        Some(&n) if n > 0 => n,
        _ => {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "the input must have a non-empty last axis, got shape {}",
                    x.shape()
                ),
            })
        }
    };
    if !(eps.is_finite() && eps > 0.0) {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!("eps must be finite and positive, got {eps}"),
        });
    }
    for (what, t) in [("weight", weight), ("bias", bias)] {
        if let Some(t) = t {
            x.check_same_device(OP, t)?;
            x.check_same_dtype(OP, t)?;
            if t.dims() != [n] {
                return Err(Error::InvalidArgument {
                    op: OP,
                    msg: format!("{what} must have shape [{n}], got {}", t.shape()),
                });
            }
        }
    }
    Ok(n)
}

/// The checks of the backward pass: the forward checks, `grad` of `x`'s shape, dtype and
/// device, and `mean`, `rstd` of shape `[..rows, 1]`, float, on `x`'s device.
pub fn check_layer_norm_backward<B: Backend>(
    grad: &Tensor<B>,
    x: &Tensor<B>,
    weight: Option<&Tensor<B>>,
    (mean, rstd): (&Tensor<B>, &Tensor<B>),
) -> Result<usize> {
    const OP: &str = "layer_norm_backward";
    let n = check_layer_norm(x, weight, None, 1.0)?;
    x.check_same_device(OP, grad)?;
    x.check_same_dtype(OP, grad)?;
    if grad.shape() != x.shape() {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: x.shape().clone(),
            rhs: grad.shape().clone(),
        });
    }
    let stats_dims = stats_dims(x.dims());
    for (what, t) in [("mean", mean), ("rstd", rstd)] {
        x.check_same_device(OP, t)?;
        t.check_float(OP)?;
        if t.dims() != stats_dims.as_slice() {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "{what} must have shape {stats_dims:?} (x's with a last axis of 1), got {}",
                    t.shape()
                ),
            });
        }
    }
    Ok(n)
}
