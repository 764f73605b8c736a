//! Binary cross-entropy on logits.

use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result};

/// `mean(max(x, 0) - x·y + log(1 + e^-|x|))` for logits `x` and targets `y` in `[0, 1]`
/// (PyTorch's `binary_cross_entropy_with_logits`, reduction `"mean"`, no weights). This form
/// never overflows: `e^-|x| <= 1`. Both operands must have the same shape and dtype; both may
/// be differentiated.
///
/// The op carries its exact gradient, `(σ(x) - y) / n` for the logits and `-x / n` for the
/// targets, rather than differentiating the stable form piece by piece (whose kinks at
/// `x = 0` would give a wrong subgradient there).
pub fn bce_with_logits<B: Backend>(logits: &Var<B>, targets: &Var<B>) -> Result<Var<B>> {
    if logits.shape() != targets.shape() {
        return Err(Error::ShapeMismatch {
            op: "bce_with_logits",
            lhs: logits.shape().clone(),
            rhs: targets.shape().clone(),
        });
    }
    let (x, y) = (logits.value(), targets.value());
    let softplus_tail = x.abs()?.neg()?.exp()?.add_scalar(1.0)?.log()?;
    let value = x
        .relu()?
        .sub(&x.mul(&y)?)?
        .add(&softplus_tail)?
        .mean_all()?;
    let count = x.numel() as f64;
    let (want_logits, want_targets) = (logits.requires_grad(), targets.requires_grad());
    let parents = vec![logits.clone(), targets.clone()];
    Ok(Var::from_op(value, parents, move |grad_out| {
        let scale = grad_out.div_scalar(count)?;
        let d_logits = if want_logits {
            Some(x.sigmoid()?.sub(&y)?.mul(&scale)?)
        } else {
            None
        };
        let d_targets = if want_targets {
            Some(x.neg()?.mul(&scale)?)
        } else {
            None
        };
        Ok(vec![d_logits, d_targets])
    }))
}
