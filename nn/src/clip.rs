//! Gradient clipping by global norm.

use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result};

/// Scales the gradients of `params` so that their global L2 norm is at most `max_norm`
/// (PyTorch's `clip_grad_norm_`): with `norm = √(Σ ‖g‖²)` over every gradient, each gradient
/// is multiplied by `max_norm / (norm + 1e-6)` when that factor is below 1. Parameters without
/// a gradient are ignored. Returns the norm before clipping (accumulated in f64).
///
/// As in PyTorch, a non-finite norm is returned as is and the gradients are scaled by the
/// resulting NaN factor; check the result to skip such steps.
pub fn clip_grad_norm<'a, B: Backend>(
    params: impl IntoIterator<Item = &'a Var<B>>,
    max_norm: f64,
) -> Result<f64> {
    if !(max_norm.is_finite() && max_norm >= 0.0) {
        return Err(Error::InvalidArgument {
            op: "clip_grad_norm",
            msg: format!("max_norm must be finite and non-negative, got {max_norm}"),
        });
    }
    let with_grads: Vec<(&Var<B>, _)> = params
        .into_iter()
        .filter_map(|var| var.grad().map(|grad| (var, grad)))
        .collect();
    // Sum the squares on the device, in f64, and read back a single number.
    let mut total = None;
    for (_, grad) in &with_grads {
        let squares = grad.to_dtype(DType::F64)?.square()?.sum_all()?;
        total = Some(match total {
            None => squares,
            Some(acc) => squares.add(&acc)?,
        });
    }
    let Some(total) = total else {
        return Ok(0.0);
    };
    let norm = total.to_scalar_f64()?.sqrt();
    let coefficient = max_norm / (norm + 1e-6);
    if coefficient < 1.0 || coefficient.is_nan() {
        for (var, grad) in with_grads {
            var.set_grad(Some(grad.mul_scalar(coefficient)?));
        }
    }
    Ok(norm)
}
