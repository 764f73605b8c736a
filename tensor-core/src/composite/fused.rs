//! The unfused definitions of the fused element-wise composites: the ReLU and GELU gradients
//! and one Adam step. A backend's single-pass override must give the same values: bit for bit
//! for the ReLU gradient and Adam (the same f32/f64 operations in the same order), to rounding
//! for the GELU gradient (whose `erf` and `exp` a kernel may evaluate its own way).

use crate::backend::{AdamTensors, AdamUpdate};
use crate::{Backend, Error, Result, Tensor};

/// Errors unless every tensor has the shape and dtype of the first (what the fused
/// composites document), so that nothing is broadcast silently.
fn check_same_shapes<B: Backend>(op: &'static str, tensors: &[&Tensor<B>]) -> Result<()> {
    let first = tensors[0];
    first.check_float(op)?;
    for t in &tensors[1..] {
        first.check_same_device(op, t)?;
        first.check_same_dtype(op, t)?;
        if t.shape() != first.shape() {
            return Err(Error::ShapeMismatch {
                op,
                lhs: first.shape().clone(),
                rhs: t.shape().clone(),
            });
        }
    }
    Ok(())
}

/// The gradient of `relu(x)` given the upstream `grad`: 0 where `x <= 0` (so 0 at `x == 0`),
/// `grad` elsewhere, NaN included: PyTorch's `threshold_backward`, which passes the gradient
/// where `x` is NaN.
pub fn relu_backward<B: Backend>(x: &Tensor<B>, grad: &Tensor<B>) -> Result<Tensor<B>> {
    check_same_shapes("relu_backward", &[x, grad])?;
    x.le_scalar(0.0)?.where_select(&grad.zeros_like()?, grad)
}

/// The gradient of the exact GELU `x Φ(x)` given the upstream `grad`:
/// `grad · (Φ(x) + x φ(x))`, with `Φ(x) = (1 + erf(x/√2)) / 2` and
/// `φ(x) = exp(-x²/2) / √(2π)` (PyTorch's `gelu_backward` with `approximate="none"`).
pub fn gelu_backward<B: Backend>(x: &Tensor<B>, grad: &Tensor<B>) -> Result<Tensor<B>> {
    check_same_shapes("gelu_backward", &[x, grad])?;
    let cdf = x
        .mul_scalar(std::f64::consts::FRAC_1_SQRT_2)?
        .erf()?
        .add_scalar(1.0)?
        .mul_scalar(0.5)?;
    let pdf = x
        .square()?
        .mul_scalar(-0.5)?
        .exp()?
        .mul_scalar(1.0 / (2.0 * std::f64::consts::PI).sqrt())?;
    grad.mul(&cdf.add(&x.mul(&pdf)?)?)
}

/// One Adam/AdamW step of one parameter, as a chain of tensor ops (see [`AdamUpdate`]):
///
/// ```text
/// g ← g + λ·p  (coupled_decay λ ≠ 0)        p ← p·f  (decoupled_factor f ≠ 1)
/// m ← m·β1 + g·(1 - β1)
/// v ← v·β2 + g²·(1 - β2)
/// v̂ ← max(v̂, v) when v̂ is given
/// p ← p - (m / (√(v̂ or v) / bias_correction2_sqrt + eps))·step_size
/// ```
pub fn adam_update<B: Backend>(
    param: &Tensor<B>,
    grad: &Tensor<B>,
    exp_avg: &Tensor<B>,
    exp_avg_sq: &Tensor<B>,
    max_exp_avg_sq: Option<&Tensor<B>>,
    u: AdamUpdate,
) -> Result<AdamTensors<B>> {
    let mut operands = vec![param, grad, exp_avg, exp_avg_sq];
    operands.extend(max_exp_avg_sq);
    check_same_shapes("adam_update", &operands)?;
    let mut p = param.clone();
    let mut g = grad.clone();
    if u.coupled_decay != 0.0 {
        g = g.add(&p.mul_scalar(u.coupled_decay)?)?;
    }
    if u.decoupled_factor != 1.0 {
        p = p.mul_scalar(u.decoupled_factor)?;
    }
    let exp_avg = exp_avg
        .mul_scalar(u.beta1)?
        .add(&g.mul_scalar(1.0 - u.beta1)?)?;
    let exp_avg_sq = exp_avg_sq
        .mul_scalar(u.beta2)?
        .add(&g.square()?.mul_scalar(1.0 - u.beta2)?)?;
    let max_exp_avg_sq = match max_exp_avg_sq {
        Some(max) => Some(max.maximum(&exp_avg_sq)?),
        None => None,
    };
    let second = max_exp_avg_sq.as_ref().unwrap_or(&exp_avg_sq);
    let denom = second
        .sqrt()?
        .div_scalar(u.bias_correction2_sqrt)?
        .add_scalar(u.eps)?;
    let param = p.sub(&exp_avg.div(&denom)?.mul_scalar(u.step_size)?)?;
    Ok(AdamTensors {
        param,
        exp_avg,
        exp_avg_sq,
        max_exp_avg_sq,
    })
}
