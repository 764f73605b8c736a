//! Negative log-likelihood of class indices.

use super::check_class_targets;
use tessera_autograd::Var;
use tessera_core::{Backend, Result, Tensor};

/// `-mean_i log_probs[i, targets[i]]` (PyTorch's `nll_loss`, reduction `"mean"`, no class
/// weights). `log_probs: [n, c]` holds log-probabilities, `targets: [n]` `i64` class indices in
/// `0..c` (out of range is an error).
pub fn nll_loss<B: Backend>(log_probs: &Var<B>, targets: &Tensor<B>) -> Result<Var<B>> {
    check_class_targets("nll_loss", log_probs.shape(), targets)?;
    let picked = log_probs.gather(1, &targets.unsqueeze(1)?)?;
    picked.mean_all()?.neg()
}
