//! Cross-entropy of logits against class indices, with optional label smoothing.

use super::{check_class_targets, nll_loss};
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result, Tensor};

/// `nll_loss(log_softmax(logits), targets)` (PyTorch's `cross_entropy`, reduction `"mean"`):
/// `logits: [n, c]`, `targets: [n]` `i64` class indices. Stable for any finite logits (the
/// log-softmax subtracts the log-sum-exp).
pub fn cross_entropy<B: Backend>(logits: &Var<B>, targets: &Tensor<B>) -> Result<Var<B>> {
    cross_entropy_with_label_smoothing(logits, targets, 0.0)
}

/// Cross-entropy against targets smoothed towards the uniform distribution (PyTorch's
/// `label_smoothing = ε`, in `[0, 1]`):
/// `(1 - ε) · nll + ε · mean_i mean_c(-log_softmax(logits)[i, c])`.
pub fn cross_entropy_with_label_smoothing<B: Backend>(
    logits: &Var<B>,
    targets: &Tensor<B>,
    label_smoothing: f64,
) -> Result<Var<B>> {
    const OP: &str = "cross_entropy";
    if !(0.0..=1.0).contains(&label_smoothing) {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!("label smoothing must be in [0, 1], got {label_smoothing}"),
        });
    }
    check_class_targets(OP, logits.shape(), targets)?;
    let log_probs = logits.log_softmax(1)?;
    let nll = nll_loss(&log_probs, targets)?;
    if label_smoothing == 0.0 {
        return Ok(nll);
    }
    let uniform = log_probs.mean_all()?.mul_scalar(-label_smoothing)?;
    nll.mul_scalar(1.0 - label_smoothing)?.add(&uniform)
}
