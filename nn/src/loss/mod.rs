//! Loss functions with PyTorch's formulas, all reduced by the mean over the batch, each
//! returning a differentiable scalar [`tessera_autograd::Var`].
//!
//! * [`mse_loss`]: `mean((pred - target)²)`;
//! * [`nll_loss`]: `-mean(log_probs[i, targets[i]])`;
//! * [`cross_entropy`] / [`cross_entropy_with_label_smoothing`]: `nll_loss(log_softmax(logits))`,
//!   optionally mixed with the uniform target;
//! * [`bce_with_logits`]: binary cross-entropy on logits, computed without overflow.

mod bce;
mod cross_entropy;
mod mse;
mod nll;

pub use bce::bce_with_logits;
pub use cross_entropy::{cross_entropy, cross_entropy_with_label_smoothing};
pub use mse::mse_loss;
pub use nll::nll_loss;

use tessera_core::{Backend, DType, Error, Result, Shape, Tensor};

/// Checks that `scores` is `[n, c]` and `targets` an `i64` vector `[n]` of class indices.
fn check_class_targets<B: Backend>(
    op: &'static str,
    scores: &Shape,
    targets: &Tensor<B>,
) -> Result<()> {
    if targets.dtype() != DType::I64 {
        return Err(Error::DTypeMismatch {
            op,
            lhs: targets.dtype(),
            rhs: DType::I64,
        });
    }
    if scores.rank() != 2 || targets.dims() != [scores.dims()[0]] {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "expected scores [n, c] and targets [n], got {} and {}",
                scores,
                targets.shape()
            ),
        });
    }
    Ok(())
}
