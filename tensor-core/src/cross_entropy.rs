//! Softmax cross-entropy over class logits: what a backend receives for
//! [`crate::Backend::cross_entropy`] and [`crate::Backend::cross_entropy_backward`], and the
//! checks both run. The definition, the default every backend may override with a fused
//! kernel, is [`crate::composite::cross_entropy`].
//!
//! # Definition
//! For `logits: [n, c]`, class indices `targets: [n]` (`i64`, each in `0..c`) and a label
//! smoothing `s` in `[0, 1]`, with `log_p[i] = log_softmax(logits[i])`:
//!
//! ```text
//! loss[i]    = -(1 - s) · log_p[i][t_i] - (s / c) · Σ_j log_p[i][j]
//!            = lse[i] - (1 - s) · logits[i][t_i] - (s / c) · Σ_j logits[i][j]
//! dlogits[i][j] = grad[i] · (softmax(logits[i])[j] - (1 - s) · [j = t_i] - s / c)
//! ```
//!
//! where `lse[i]` is the row's log-sum-exp and `grad: [n]` the upstream gradient of the
//! per-row losses. A row holding `+inf` or NaN, or only `-inf`, has a NaN loss and gradient
//! (its log-softmax is NaN, as PyTorch's). PyTorch's
//! `torch.nn.functional.cross_entropy(logits, targets, reduction="none", label_smoothing=s)`
//! gives the same losses.
//!
//! A fused kernel reads each row once or twice and writes the gradient once, where the
//! composite materialises the log-probabilities, a one-hot matrix and several temporaries of
//! the logits' size (a language model's `[tokens, vocabulary]`, the largest activation of its
//! step).

use crate::{Backend, DType, Error, Result, Tensor};

/// Checks the operands of [`crate::Backend::cross_entropy`] and returns `(n, c)`: `logits`
/// is a float `[n, c]`, `targets` an `i64` `[n]` on the same device, and `label_smoothing` is
/// in `[0, 1]`. The targets' values are not read here (a backend reports one outside `0..c`
/// as [`Error::IndexOutOfRange`]).
pub fn check_cross_entropy<B: Backend>(
    logits: &Tensor<B>,
    targets: &Tensor<B>,
    label_smoothing: f64,
) -> Result<(usize, usize)> {
    const OP: &str = "cross_entropy";
    logits.check_float(OP)?;
    let &[n, c] = logits.dims() else {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!(
                "logits must be [rows, classes], got shape {}",
                logits.shape()
            ),
        });
    };
    logits.check_same_device(OP, targets)?;
    if targets.dtype() != DType::I64 {
        return Err(Error::DTypeMismatch {
            op: OP,
            lhs: targets.dtype(),
            rhs: DType::I64,
        });
    }
    if targets.dims() != [n] {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!(
                "targets must have shape [{n}] (one class per row of the logits), got {}",
                targets.shape()
            ),
        });
    }
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!("label smoothing must be in [0, 1], got {label_smoothing}"),
        });
    }
    Ok((n, c))
}

/// Checks the operands of [`crate::Backend::cross_entropy_backward`] and returns `(n, c)`: those
/// of [`check_cross_entropy`], and `grad` of the logits' dtype, shape `[n]`.
pub fn check_cross_entropy_backward<B: Backend>(
    logits: &Tensor<B>,
    targets: &Tensor<B>,
    grad: &Tensor<B>,
    label_smoothing: f64,
) -> Result<(usize, usize)> {
    const OP: &str = "cross_entropy_backward";
    let (n, c) = check_cross_entropy(logits, targets, label_smoothing)?;
    logits.check_same_device(OP, grad)?;
    logits.check_same_dtype(OP, grad)?;
    if grad.dims() != [n] {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!(
                "the upstream gradient must have shape [{n}] (one per row), got {}",
                grad.shape()
            ),
        });
    }
    Ok((n, c))
}
