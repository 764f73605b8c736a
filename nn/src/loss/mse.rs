//! Mean squared error.

use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result};

/// `mean((pred - target)²)` over every element (PyTorch's `mse_loss`, reduction `"mean"`).
/// Both operands must have the same shape; both may be differentiated.
pub fn mse_loss<B: Backend>(pred: &Var<B>, target: &Var<B>) -> Result<Var<B>> {
    if pred.shape() != target.shape() {
        return Err(Error::ShapeMismatch {
            op: "mse_loss",
            lhs: pred.shape().clone(),
            rhs: target.shape().clone(),
        });
    }
    pred.sub(target)?.square()?.mean_all()
}
