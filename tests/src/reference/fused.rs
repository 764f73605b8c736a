//! Reference fused element-wise composites: the ReLU gradient and one Adam/AdamW step, written
//! from their definitions (PyTorch's `threshold_backward` and `torch.optim.Adam(W)`).

use super::{elementwise::round_to, RefArray};
use tessera_core::backend::AdamUpdate;
use tessera_core::DType;

/// The gradient of `relu` at `x` given `grad`: 0 where `x <= 0` (0 at `x == 0` and `-0`),
/// `grad` elsewhere, NaN `x` included (PyTorch's `threshold_backward(grad, x, 0)`).
pub fn relu_backward(x: &RefArray, grad: &RefArray) -> RefArray {
    RefArray::new(
        x.shape.clone(),
        x.data
            .iter()
            .zip(&grad.data)
            .map(|(&v, &g)| if v <= 0.0 { 0.0 } else { g })
            .collect(),
    )
}

/// The inputs of one Adam step, element by element (all of one shape).
pub struct AdamInputs<'a> {
    /// The parameter.
    pub param: &'a RefArray,
    /// Its gradient.
    pub grad: &'a RefArray,
    /// The first moment.
    pub exp_avg: &'a RefArray,
    /// The second moment.
    pub exp_avg_sq: &'a RefArray,
    /// The AMSGrad running maximum, when used.
    pub max_exp_avg_sq: Option<&'a RefArray>,
}

/// The outputs of one Adam step and, for each, the error scale of its terms (what rounding in
/// a correct implementation is relative to: the same formulas on absolute values).
pub struct AdamOutputs {
    /// The new parameter, first and second moment, and AMSGrad maximum.
    pub values: [RefArray; 4],
    /// Their error scales.
    pub magnitudes: [RefArray; 4],
}

/// One Adam/AdamW step from the definitions of [`AdamUpdate`], in f64, each result rounded once
/// to `dtype`:
///
/// ```text
/// g' = g + λ p                      (Adam's coupled decay λ)
/// p' = p · f                        (AdamW's decoupled factor f = 1 - lr λ)
/// m  = β1 m0 + (1 - β1) g'
/// v  = β2 v0 + (1 - β2) g'²
/// v̂  = max(v̂0, v)                   (AMSGrad, NaN-propagating)
/// p  = p' - step_size · m / (√(v̂ or v) / √(1 - β2ᵗ) + eps),   step_size = lr / (1 - β1ᵗ)
/// ```
pub fn adam(dtype: DType, x: &AdamInputs<'_>, u: AdamUpdate) -> AdamOutputs {
    let shape = x.param.shape.clone();
    let n = x.param.numel();
    let mut out: [Vec<f64>; 4] = Default::default();
    let mut mag: [Vec<f64>; 4] = Default::default();
    for i in 0..n {
        let (p, g) = (x.param.data[i], x.grad.data[i]);
        let (m0, v0) = (x.exp_avg.data[i], x.exp_avg_sq.data[i]);
        let g1 = g + u.coupled_decay * p;
        let g_mag = g.abs() + (u.coupled_decay * p).abs();
        let p1 = p * u.decoupled_factor;
        let m = u.beta1 * m0 + (1.0 - u.beta1) * g1;
        let m_mag = (u.beta1 * m0).abs() + ((1.0 - u.beta1) * g_mag).abs();
        let v = u.beta2 * v0 + (1.0 - u.beta2) * g1 * g1;
        let v_mag = (u.beta2 * v0).abs() + ((1.0 - u.beta2) * g_mag * g_mag).abs();
        let vmax = x.max_exp_avg_sq.map(|mx| {
            let prev = mx.data[i];
            if prev.is_nan() || v.is_nan() {
                f64::NAN
            } else {
                prev.max(v)
            }
        });
        let second = vmax.unwrap_or(v);
        let denom = second.sqrt() / u.bias_correction2_sqrt + u.eps;
        let step = u.step_size * m / denom;
        let new_p = p1 - step;
        // The step's rounding follows m's (its only term that may cancel) and the division.
        let step_mag = (u.step_size * m_mag / denom).abs() + step.abs();
        let p_mag = p1.abs() + step_mag;
        out[0].push(round_to(dtype, new_p));
        out[1].push(round_to(dtype, m));
        out[2].push(round_to(dtype, v));
        out[3].push(round_to(dtype, vmax.unwrap_or(0.0)));
        mag[0].push(p_mag);
        mag[1].push(m_mag);
        mag[2].push(v_mag);
        mag[3].push(vmax.map_or(0.0, f64::abs));
    }
    let arrays = |v: [Vec<f64>; 4]| v.map(|d| RefArray::new(shape.clone(), d));
    AdamOutputs {
        values: arrays(out),
        magnitudes: arrays(mag),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let x = RefArray::new(vec![4], vec![-1.0, -0.0, 0.0, f64::NAN]);
        let g = RefArray::new(vec![4], vec![5.0; 4]);
        assert_eq!(relu_backward(&x, &g).data, vec![0.0, 0.0, 0.0, 5.0]);

        // The first step of Adam(lr = 0.1) moves every parameter by lr against the sign of its
        // gradient (m̂ / √v̂ = ±1), up to eps.
        let (b1, b2, lr) = (0.9, 0.999, 0.1);
        let u = AdamUpdate {
            beta1: b1,
            beta2: b2,
            step_size: lr / (1.0 - b1),
            bias_correction2_sqrt: (1.0f64 - b2).sqrt(),
            eps: 1e-12,
            coupled_decay: 0.0,
            decoupled_factor: 1.0,
        };
        let p = RefArray::new(vec![2], vec![1.0, 2.0]);
        let g = RefArray::new(vec![2], vec![3.0, -0.5]);
        let zero = RefArray::full(vec![2], 0.0);
        let inputs = AdamInputs {
            param: &p,
            grad: &g,
            exp_avg: &zero,
            exp_avg_sq: &zero,
            max_exp_avg_sq: None,
        };
        let out = adam(DType::F64, &inputs, u);
        assert!((out.values[0].data[0] - 0.9).abs() < 1e-9);
        assert!((out.values[0].data[1] - 2.1).abs() < 1e-9);
        assert!((out.values[1].data[0] - 0.3).abs() < 1e-15);
    }
}
