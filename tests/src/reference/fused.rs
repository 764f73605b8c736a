//! Reference fused composites: the ReLU and GELU gradients, one Adam/AdamW step, layer norm,
//! and softmax cross-entropy with its gradient, written from their definitions (PyTorch's
//! `threshold_backward`, `torch.optim.Adam(W)`, `layer_norm`, `cross_entropy`).

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

/// The outputs of one Adam step and, for each, the error scale of its terms: a correct
/// implementation (any order of operations, each rounded once in its compute precision) is
/// within `rel * max(|value|, scale)` of the value, `rel` the relative tolerance [`adam`] was
/// given.
pub struct AdamOutputs {
    /// The new parameter, first and second moment, and AMSGrad maximum.
    pub values: [RefArray; 4],
    /// Their error scales.
    pub magnitudes: [RefArray; 4],
}

/// The error bound of `sqrt(x)` when `x` is known within `e` (absolute): `|sqrt(x') - sqrt(x)|
/// = |x' - x| / (sqrt(x') + sqrt(x))`, at most `e / sqrt(x)` and at most `sqrt(e)` (the second
/// is the one that holds when `x` is within its own error of zero).
fn sqrt_error(x: f64, e: f64) -> f64 {
    let root = x.max(0.0).sqrt();
    if root > 0.0 {
        (e / root).min(e.sqrt())
    } else {
        e.sqrt()
    }
}

/// The error bound of `a / b` when `a` and `b` are known within `ea` and `eb` (absolute):
/// `|a'/b' - a/b| <= (ea + |a/b| eb) / (|b| - eb)`, infinite when `b` is within its own error of
/// zero (any result is then as right as the reference).
fn quotient_error(a: f64, ea: f64, b: f64, eb: f64) -> f64 {
    let room = b.abs() - eb;
    if room > 0.0 {
        (ea + (a / b).abs() * eb) / room
    } else {
        f64::INFINITY
    }
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
///
/// With each value, its error scale: the bound on what rounding in a correct implementation
/// can do, divided by `rel` (the relative tolerance of the comparison, so that the check is
/// `|got - value| <= rel * max(|value|, scale)`). For the sums and products it is the same
/// formula evaluated on absolute values (`|g| + λ|p|`, `β1|m0| + (1 - β1)(|g| + λ|p|)`, ...),
/// so that cancellation (`1.0 + 0.1 · -9.83`) does not shrink the bound; `max` keeps the
/// larger of its operands' scales; the square root and the division propagate the absolute
/// error bounds `rel · scale` of their operands exactly (their first-order forms are wrong
/// where an operand is within its error of zero), plus one rounding of their own.
pub fn adam(dtype: DType, x: &AdamInputs<'_>, u: AdamUpdate, rel: f64) -> AdamOutputs {
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
        // max(v̂0, v) is v̂0 (exact) or v (within v's error): the formula on absolute values.
        let vmax_mag = x.max_exp_avg_sq.map(|mx| mx.data[i].abs().max(v_mag));
        let second = vmax.unwrap_or(v);
        // The absolute error bounds of the denominator and the step, from v's (or v̂'s, which
        // is at most v's: max is 1-Lipschitz).
        let root = second.sqrt();
        let e_root = sqrt_error(second, rel * v_mag) + rel * root;
        let denom = root / u.bias_correction2_sqrt + u.eps;
        let e_denom = e_root / u.bias_correction2_sqrt + rel * denom;
        let ratio = m / denom;
        let e_ratio = quotient_error(m, rel * m_mag, denom, e_denom) + rel * ratio.abs();
        let step = u.step_size * ratio;
        let new_p = p1 - step;
        let e_new_p = rel * p1.abs() + u.step_size * e_ratio + rel * (step.abs() + new_p.abs());
        let p_mag = if rel > 0.0 {
            e_new_p / rel
        } else {
            p1.abs() + step.abs()
        };
        out[0].push(round_to(dtype, new_p));
        out[1].push(round_to(dtype, m));
        out[2].push(round_to(dtype, v));
        out[3].push(round_to(dtype, vmax.unwrap_or(0.0)));
        mag[0].push(p_mag);
        mag[1].push(m_mag);
        mag[2].push(v_mag);
        mag[3].push(vmax_mag.unwrap_or(0.0));
    }
    let arrays = |v: [Vec<f64>; 4]| v.map(|d| RefArray::new(shape.clone(), d));
    AdamOutputs {
        values: arrays(out),
        magnitudes: arrays(mag),
    }
}

/// The gradient of the exact GELU at `x` given `grad`, `grad · (Φ(x) + x φ(x))` in f64, and
/// its error scale `|grad|`: `Φ(x) = (1 + erf(x/√2)) / 2` is rounded in absolute terms (half an
/// ulp of 1) by the definition's own formula, which cancels in the lower tail.
pub fn gelu_backward(x: &RefArray, grad: &RefArray) -> (RefArray, RefArray) {
    let values = x
        .data
        .iter()
        .zip(&grad.data)
        .map(|(&v, &g)| {
            let cdf = 0.5 * (1.0 + libm::erf(v / std::f64::consts::SQRT_2));
            let pdf = (-0.5 * v * v).exp() / (2.0 * std::f64::consts::PI).sqrt();
            g * (cdf + v * pdf)
        })
        .collect();
    (RefArray::new(x.shape.clone(), values), grad.map(f64::abs))
}

/// Per-row statistics of a `[..rows, n]` array: mean, `rstd = 1 / √(var + eps)` (biased
/// variance) and the mean of `|x|` (the error scale of anything computed from the mean).
struct RowStats {
    mean: f64,
    rstd: f64,
    mean_abs: f64,
}

fn row_stats(row: &[f64], eps: f64) -> RowStats {
    let n = row.len() as f64;
    let mean = row.iter().sum::<f64>() / n;
    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
    RowStats {
        mean,
        rstd: 1.0 / (var + eps).sqrt(),
        mean_abs: row.iter().map(|v| v.abs()).sum::<f64>() / n,
    }
}

/// Values and error scales of one output.
pub struct Scaled {
    /// The exact values.
    pub values: RefArray,
    /// The per-element scale of a correct implementation's rounding error.
    pub magnitudes: RefArray,
}

/// `lhs·rhs + bias` for `lhs: [..batch, m, k]`, `rhs: [..batch, k, n]` (equal batch
/// dimensions) and `bias: [n]`, rounded to `dtype` (a sum beyond its range is infinite there),
/// with the error scale `Σ|lhs·rhs| + |bias|` of each output.
pub fn matmul_bias(dtype: DType, lhs: &RefArray, rhs: &RefArray, bias: &RefArray) -> Scaled {
    let rank = lhs.shape.len();
    let (m, k, n) = (
        lhs.shape[rank - 2],
        lhs.shape[rank - 1],
        rhs.shape[rank - 1],
    );
    let batch: usize = lhs.shape[..rank - 2].iter().product();
    let (mut values, mut scales) = (Vec::new(), Vec::new());
    for p in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let terms =
                    (0..k).map(|q| lhs.data[(p * m + i) * k + q] * rhs.data[(p * k + q) * n + j]);
                let (sum, scale) = terms.fold((0.0, 0.0), |(s, a), t: f64| (s + t, a + t.abs()));
                values.push(round_to(dtype, sum + bias.data[j]));
                scales.push(scale + bias.data[j].abs());
            }
        }
    }
    let mut shape = lhs.shape[..rank - 1].to_vec();
    shape.push(n);
    Scaled::new(shape, values, scales)
}

impl Scaled {
    fn new(shape: Vec<usize>, values: Vec<f64>, magnitudes: Vec<f64>) -> Self {
        Scaled {
            values: RefArray::new(shape.clone(), values),
            magnitudes: RefArray::new(shape, magnitudes),
        }
    }
}

/// The shape of the per-row statistics: `shape` with a last axis of 1.
fn stats_shape(shape: &[usize]) -> Vec<usize> {
    let mut s = shape.to_vec();
    *s.last_mut().expect("rank >= 1") = 1;
    s
}

/// Layer normalisation over the last axis from its definition ([`tessera_core::layer_norm`]):
/// `y`, `mean` and `rstd`, with error scales. A correct implementation's mean is off by about
/// `n ε · mean|x|`, which moves `x - mean` by as much: `y`'s scale is
/// `(|x̂| + mean|x| · rstd) · |w| + |b|`, `rstd`'s is `rstd · (1 + mean|x| · rstd)` (the
/// variance of the centred values loses `ε · mean|x| / σ` relative).
pub fn layer_norm(
    x: &RefArray,
    weight: Option<&RefArray>,
    bias: Option<&RefArray>,
    eps: f64,
) -> [Scaled; 3] {
    let n = *x.shape.last().expect("rank >= 1");
    let (mut y, mut y_mag) = (Vec::new(), Vec::new());
    let (mut mean, mut mean_mag, mut rstd, mut rstd_mag) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for row in x.data.chunks(n) {
        let s = row_stats(row, eps);
        for (i, &v) in row.iter().enumerate() {
            let w = weight.map_or(1.0, |w| w.data[i]);
            let b = bias.map_or(0.0, |b| b.data[i]);
            let x_hat = (v - s.mean) * s.rstd;
            y.push(x_hat * w + b);
            y_mag.push((x_hat.abs() + s.mean_abs * s.rstd) * w.abs() + b.abs());
        }
        mean.push(s.mean);
        mean_mag.push(s.mean_abs);
        rstd.push(s.rstd);
        rstd_mag.push(s.rstd * (1.0 + s.mean_abs * s.rstd));
    }
    let stats = stats_shape(&x.shape);
    [
        Scaled::new(x.shape.clone(), y, y_mag),
        Scaled::new(stats.clone(), mean, mean_mag),
        Scaled::new(stats, rstd, rstd_mag),
    ]
}

/// The gradients of layer normalisation from the formulas of [`tessera_core::layer_norm`]
/// (statistics recomputed here in f64), with error scales: `dx`'s is
/// `rstd · (|ĝ| + mean|ĝ| + |x̂| · mean|ĝ x̂|) · (1 + mean|x| · rstd)`, `dweight`'s
/// `Σ_r |g| (|x̂| + mean|x| · rstd)`, `dbias`'s `Σ_r |g|`.
pub fn layer_norm_backward(
    grad: &RefArray,
    x: &RefArray,
    weight: Option<&RefArray>,
    eps: f64,
) -> [Scaled; 3] {
    let n = *x.shape.last().expect("rank >= 1");
    let (mut dx, mut dx_mag) = (Vec::new(), Vec::new());
    let (mut dw, mut dw_mag) = (vec![0.0; n], vec![0.0; n]);
    let (mut db, mut db_mag) = (vec![0.0; n], vec![0.0; n]);
    for (row, g) in x.data.chunks(n).zip(grad.data.chunks(n)) {
        let s = row_stats(row, eps);
        let x_hat: Vec<f64> = row.iter().map(|v| (v - s.mean) * s.rstd).collect();
        let g_hat: Vec<f64> = (0..n)
            .map(|i| g[i] * weight.map_or(1.0, |w| w.data[i]))
            .collect();
        let mean_g = g_hat.iter().sum::<f64>() / n as f64;
        let mean_gx = (0..n).map(|i| g_hat[i] * x_hat[i]).sum::<f64>() / n as f64;
        let mean_abs_g = g_hat.iter().map(|v| v.abs()).sum::<f64>() / n as f64;
        let mean_abs_gx = (0..n).map(|i| (g_hat[i] * x_hat[i]).abs()).sum::<f64>() / n as f64;
        let spread = 1.0 + s.mean_abs * s.rstd;
        for i in 0..n {
            dx.push((g_hat[i] - mean_g - x_hat[i] * mean_gx) * s.rstd);
            dx_mag.push(
                s.rstd * (g_hat[i].abs() + mean_abs_g + x_hat[i].abs() * mean_abs_gx) * spread,
            );
            dw[i] += g[i] * x_hat[i];
            dw_mag[i] += g[i].abs() * (x_hat[i].abs() + s.mean_abs * s.rstd);
            db[i] += g[i];
            db_mag[i] += g[i].abs();
        }
    }
    [
        Scaled::new(x.shape.clone(), dx, dx_mag),
        Scaled::new(vec![n], dw, dw_mag),
        Scaled::new(vec![n], db, db_mag),
    ]
}

/// Softmax cross-entropy of each row of `logits: [n, c]` against `targets` with label
/// smoothing `s` (the definition in `tessera_core::cross_entropy`), in f64 by the shifted
/// formula `ln Σ e^(x_j - m) + (1 - s)(m - x_t) - (s / c) Σ_j (x_j - m)`: the per-row losses
/// and their error scales (the sizes of those terms, plus 1). A row holding NaN or `+inf`, or
/// only `-inf`, gives NaN.
pub fn cross_entropy(logits: &RefArray, targets: &[usize], s: f64) -> Scaled {
    let c = logits.shape[1];
    let (mut values, mut scales) = (Vec::new(), Vec::new());
    for (row, &t) in logits.data.chunks(c.max(1)).zip(targets) {
        let shift = ShiftedRow::of(row);
        let spread: f64 = row.iter().map(|v| v - shift.max).sum();
        let spread_abs: f64 = row.iter().map(|v| (v - shift.max).abs()).sum();
        let keep = (1.0 - s) * (shift.max - row[t]);
        // Without smoothing there is no spread term (`0 · -inf` would make a NaN of a row with
        // a `-inf` logit, whose loss is `+inf` at its target and finite elsewhere).
        let (spread, spread_abs) = if s == 0.0 {
            (0.0, 0.0)
        } else {
            (s / c as f64 * spread, s / c as f64 * spread_abs)
        };
        values.push(shift.ln_sum + keep - spread);
        scales.push(shift.ln_sum.abs() + keep.abs() + spread_abs + 1.0);
    }
    Scaled::new(vec![targets.len()], values, scales)
}

/// The gradient of [`cross_entropy`]'s losses with respect to the logits given the upstream
/// `grad: [n]`: `grad_i · ((p_j - (1 - s)[j = t]) - s / c)`, `p` the row's softmax; error
/// scales `|grad_i| · (p_j (1 + |x_j - m| + |ln S|) + (1 - s)[j = t] + s / c)` (the exponent
/// `x_j - m - ln S` is rounded relative to its size before `exp`).
pub fn cross_entropy_backward(
    logits: &RefArray,
    targets: &[usize],
    grad: &RefArray,
    s: f64,
) -> Scaled {
    let c = logits.shape[1];
    let (mut values, mut scales) = (Vec::new(), Vec::new());
    for ((row, &t), &g) in logits.data.chunks(c.max(1)).zip(targets).zip(&grad.data) {
        let shift = ShiftedRow::of(row);
        for (j, &x) in row.iter().enumerate() {
            let p = (x - shift.max - shift.ln_sum).exp();
            let hot = if j == t { 1.0 - s } else { 0.0 };
            values.push(g * ((p - hot) - s / c as f64));
            let exponent = 1.0 + (x - shift.max).abs() + shift.ln_sum.abs();
            scales.push(g.abs() * (p * exponent + hot + s / c as f64));
        }
    }
    Scaled::new(logits.shape.clone(), values, scales)
}

/// A row's maximum `m` (NaN when the row holds NaN) and `ln Σ e^(x_j - m)` (NaN when `m` is
/// infinite: `inf - inf`).
struct ShiftedRow {
    max: f64,
    ln_sum: f64,
}

impl ShiftedRow {
    fn of(row: &[f64]) -> Self {
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| {
            if v.is_nan() || m.is_nan() {
                f64::NAN
            } else {
                m.max(v)
            }
        });
        let ln_sum = row.iter().map(|v| (v - max).exp()).sum::<f64>().ln();
        ShiftedRow { max, ln_sum }
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
        let out = adam(DType::F64, &inputs, u, 1e-15);
        assert!((out.values[0].data[0] - 0.9).abs() < 1e-9);
        assert!((out.values[0].data[1] - 2.1).abs() < 1e-9);
        assert!((out.values[1].data[0] - 0.3).abs() < 1e-15);
    }
}
