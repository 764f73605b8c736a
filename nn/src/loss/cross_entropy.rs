//! Cross-entropy of logits against class indices, with optional label smoothing.

use super::check_class_targets;
use tessera_autograd::Var;
use tessera_core::{Backend, Result, Tensor};

/// `nll_loss(log_softmax(logits), targets)` (PyTorch's `cross_entropy`, reduction `"mean"`):
/// `logits: [n, c]`, `targets: [n]` `i64` class indices. Stable for any finite logits (the
/// log-softmax subtracts the log-sum-exp). Computed by the backend's fused
/// [`Backend::cross_entropy`] and its gradient ([`Var::cross_entropy`]): no log-probabilities
/// or one-hot matrix of the logits' size are made or kept.
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
    // The label smoothing's range is checked by the op (`check_cross_entropy`), with this
    // op name and message.
    check_class_targets("cross_entropy", logits.shape(), targets)?;
    logits.cross_entropy(targets, label_smoothing)?.mean_all()
}
