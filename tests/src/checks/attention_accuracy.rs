//! How close 16-bit attention gradients come to the exact ones, in ulps of the 16-bit format.
//!
//! The 16-bit contract is "compute in f32, round once": a gradient within one ulp of the
//! exact (f64) value is what that gives. A backend that rounds an intermediate to 16 bits
//! (the forward output `O` read back by `D = rowsum(dO ∘ O)`, whose difference with `dP`
//! cancels) lands further off. [`gradient_accuracy`] measures one problem against the f64
//! reference of [`crate::reference::attention`]; [`systematic_cases`] is the set of problems
//! the backends' tests measure.

use crate::reference::attention::{RefAttention, RefMask};
use crate::reference::RefArray;
use tessera_core::random::sample_f64;
use tessera_core::{AttentionOptions, Backend, DType, Distribution, Tensor};

/// One attention problem: q `[batch.., L, E]`, k `[batch.., S, E]`, v `[batch.., S, Ev]`, inputs
/// uniform in `[-range, range]`, the upstream gradient standard normal, all drawn from `seed`
/// and rounded to the dtype under test.
#[derive(Clone, Debug, PartialEq)]
pub struct AccuracyCase {
    /// Batch dimensions.
    pub batch: Vec<usize>,
    /// Queries, keys, query/key features, value features.
    pub sizes: (usize, usize, usize, usize),
    /// Causal masking.
    pub causal: bool,
    /// Half-width of the uniform input range.
    pub range: f64,
    /// The random stream of the inputs.
    pub seed: u64,
}

/// The problem of issue 22 (`[2, 3, 5, 8]`, uniform in `[-1.5, 1.5]`, causal), then a grid of
/// shapes (one key block and several, `L < S`, `L > S`), both causalities, wider input ranges
/// (sharper softmaxes) and several seeds.
pub fn systematic_cases() -> Vec<AccuracyCase> {
    let mut cases = vec![AccuracyCase {
        batch: vec![2, 3],
        sizes: (5, 5, 8, 8),
        causal: true,
        range: 1.5,
        seed: 0,
    }];
    let shapes = [(5, 5, 8, 8), (7, 3, 4, 6), (3, 9, 16, 8), (17, 33, 8, 4)];
    for (n, &sizes) in shapes.iter().enumerate() {
        for causal in [false, true] {
            for (r, range) in [0.5, 1.5, 3.0].into_iter().enumerate() {
                cases.push(AccuracyCase {
                    batch: vec![2],
                    sizes,
                    causal,
                    range,
                    seed: 1 + (n * 6 + r * 2 + usize::from(causal)) as u64,
                });
            }
        }
    }
    cases
}

/// The distance of `got` from `exact` in ulps of `dtype` at `exact`'s magnitude (the spacing
/// of the format between `|exact|` and the next power of two up; subnormal spacing below the
/// smallest normal).
pub fn ulps(dtype: DType, got: f64, exact: f64) -> f64 {
    let (mantissa_bits, min_exponent) = match dtype {
        DType::F16 => (10, -14),
        DType::BF16 => (7, -126),
        DType::F32 => (23, -126),
        _ => (52, -1022),
    };
    let exponent = if exact == 0.0 {
        min_exponent
    } else {
        (exact.abs().log2().floor() as i32).max(min_exponent)
    };
    (got - exact).abs() / 2f64.powi(exponent - mantissa_bits)
}

/// `n` values of `dist` from `seed` (f64 draws; the backend rounds them to the dtype).
fn draws(dist: Distribution, seed: u64, n: usize) -> Vec<f64> {
    (0..n).map(|i| sample_f64(dist, seed, i as u64)).collect()
}

/// A tensor of `dims` with `values` rounded to `dtype` on `dev`, and the rounded values.
fn rounded<B: Backend>(
    dev: &B,
    dims: &[usize],
    values: Vec<f64>,
    dtype: DType,
) -> Result<(Tensor<B>, Vec<f64>), String> {
    let t = Tensor::from_vec(values, dims.to_vec(), dev)
        .and_then(|t| t.to_dtype(dtype))
        .map_err(|e| e.to_string())?;
    let back = t
        .to_dtype(DType::F64)
        .and_then(|t| t.to_vec::<f64>())
        .map_err(|e| e.to_string())?;
    Ok((t, back))
}

/// How close one problem's gradients came to the exact ones.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GradientAccuracy {
    /// The worst distance, in ulps of the dtype, of dq, dk and dv over their well-conditioned
    /// elements: those where one f32 rounding of the terms is at most a quarter ulp, so that
    /// a result computed in f32 and rounded once is within one ulp.
    pub worst_ulps: [f64; 3],
    /// The same over every element, ill-conditioned ones included.
    pub worst_ulps_all: [f64; 3],
    /// Elements whose exact value is so much smaller than the terms it sums (cancellation)
    /// that f32 arithmetic cannot promise one ulp of it; they are held to
    /// `ulp + f32 error bound` instead.
    pub ill_conditioned: usize,
    /// The worst ill-conditioned element's error as a fraction of its bound (at most 1).
    pub ill_conditioned_worst: f64,
}

/// The spacing of `dtype` at `exact`'s magnitude (see [`ulps`]).
fn ulp(dtype: DType, exact: f64) -> f64 {
    ulps(dtype, exact + 1.0, exact).recip()
}

/// How close the gradients (dq, dk, dv) of `case` on `dev` come to the exact f64 gradients of
/// the same (rounded) inputs. An element is well-conditioned when one f32 rounding of its
/// terms, `2^-24 · scale` (`scale`: the reference's per-element magnitude, the sum of the
/// absolute values of the terms), is at most a quarter ulp of the exact value; its f32 error
/// bound is `terms · 2^-24 · scale`, with `terms = S + E + Ev + 4` (the products and sums one
/// gradient element goes through).
pub fn gradient_accuracy<B: Backend>(
    dev: &B,
    dtype: DType,
    case: &AccuracyCase,
) -> Result<GradientAccuracy, String> {
    let (l, s, e, ev) = case.sizes;
    let with = |rows: usize, cols: usize| [case.batch.clone(), vec![rows, cols]].concat();
    let nb: usize = case.batch.iter().product();
    let uniform = Distribution::Uniform {
        low: -case.range,
        high: case.range,
    };
    let normal = Distribution::Normal {
        mean: 0.0,
        std: 1.0,
    };
    let seed = case.seed.wrapping_mul(4);
    let (q, qr) = rounded(dev, &with(l, e), draws(uniform, seed, nb * l * e), dtype)?;
    let (k, kr) = rounded(
        dev,
        &with(s, e),
        draws(uniform, seed + 1, nb * s * e),
        dtype,
    )?;
    let (v, vr) = rounded(
        dev,
        &with(s, ev),
        draws(uniform, seed + 2, nb * s * ev),
        dtype,
    )?;
    let (g, gr) = rounded(
        dev,
        &with(l, ev),
        draws(normal, seed + 3, nb * l * ev),
        dtype,
    )?;
    let options = AttentionOptions::new().causal(case.causal);
    let forward = q
        .scaled_dot_product_attention_with_lse(&k, &v, &options)
        .map_err(|e| e.to_string())?;
    let grads = g
        .scaled_dot_product_attention_backward(&q, &k, &v, &options, &forward)
        .map_err(|e| e.to_string())?;
    let reference = RefAttention {
        dtype: DType::F64,
        nb,
        q: RefArray::new(vec![nb, l, e], qr),
        k: RefArray::new(vec![nb, s, e], kr),
        v: RefArray::new(vec![nb, s, ev], vr),
        mask: RefMask::None,
        causal: case.causal,
        scale: 1.0 / (e as f64).sqrt(),
        dropout: None,
    };
    let exact = reference.backward(&RefArray::new(vec![nb, l, ev], gr));
    let terms = (s + e + ev + 4) as f64;
    let mut acc = GradientAccuracy::default();
    for (n, got) in [&grads.q, &grads.k, &grads.v].into_iter().enumerate() {
        let got = got
            .to_dtype(DType::F64)
            .and_then(|t| t.to_vec::<f64>())
            .map_err(|e| e.to_string())?;
        let wanted = exact.grads[n].data.iter().zip(&exact.scales[n].data);
        for (x, (want, scale)) in got.iter().zip(wanted) {
            // One f32 rounding of the largest terms: below a quarter ulp, the element is
            // well-conditioned; above, cancellation leaves it to the accumulation bound.
            let f32_unit = 2f64.powi(-24) * scale;
            let f32_bound = terms * f32_unit;
            acc.worst_ulps_all[n] = acc.worst_ulps_all[n].max(ulps(dtype, *x, *want));
            if f32_unit <= 0.25 * ulp(dtype, *want) {
                acc.worst_ulps[n] = acc.worst_ulps[n].max(ulps(dtype, *x, *want));
            } else {
                acc.ill_conditioned += 1;
                let fraction = (x - want).abs() / (ulp(dtype, *want) + f32_bound);
                acc.ill_conditioned_worst = acc.ill_conditioned_worst.max(fraction);
            }
        }
    }
    Ok(acc)
}

/// What [`check_systematic_set`] measured over every problem of [`systematic_cases`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SetSummary {
    /// The worst well-conditioned distance of dq, dk, dv over the set, in ulps.
    pub worst_ulps: [f64; 3],
    /// Every element's worst distance (dq, dk, dv) on the first problem, the issue's.
    pub issue_case_ulps_all: [f64; 3],
    /// Ill-conditioned elements over the set.
    pub ill_conditioned: usize,
    /// Their worst error as a fraction of their bound.
    pub ill_conditioned_worst: f64,
}

/// Measures every problem of [`systematic_cases`] on `dev` in `dtype`: an error naming the
/// problem when a well-conditioned element is more than one ulp off or an ill-conditioned one
/// beyond its bound; the summary otherwise.
pub fn check_systematic_set<B: Backend>(dev: &B, dtype: DType) -> Result<SetSummary, String> {
    let mut summary = SetSummary::default();
    for (n, case) in systematic_cases().iter().enumerate() {
        let acc = gradient_accuracy(dev, dtype, case)?;
        if acc.worst_ulps.iter().any(|&u| u > 1.0) || acc.ill_conditioned_worst > 1.0 {
            return Err(format!("{dtype}: {acc:?} in {case:?}"));
        }
        if n == 0 {
            summary.issue_case_ulps_all = acc.worst_ulps_all;
        }
        for (w, u) in summary.worst_ulps.iter_mut().zip(acc.worst_ulps) {
            *w = w.max(u);
        }
        summary.ill_conditioned += acc.ill_conditioned;
        summary.ill_conditioned_worst =
            summary.ill_conditioned_worst.max(acc.ill_conditioned_worst);
    }
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ulps_count_the_format_spacing() {
        // f16: spacing 2^-10 in [1, 2), 2^-24 below 2^-14.
        assert_eq!(ulps(DType::F16, 1.0 + 2f64.powi(-10), 1.0), 1.0);
        assert_eq!(ulps(DType::F16, 1.5, 1.5 + 2f64.powi(-12)), 0.25);
        assert_eq!(ulps(DType::F16, 2f64.powi(-24), 0.0), 1.0);
        assert_eq!(ulps(DType::BF16, 1.0 + 2f64.powi(-7), 1.0), 1.0);
        assert_eq!(ulps(DType::F16, -3.0, -3.0), 0.0);
        assert_eq!(ulp(DType::F16, 1.5), 2f64.powi(-10));
        assert_eq!(ulp(DType::F16, 0.0), 2f64.powi(-24));
    }

    #[test]
    fn the_causal_2x3_batch_5x8_case_comes_first() {
        let first = &systematic_cases()[0];
        assert_eq!(first.batch, [2, 3]);
        assert_eq!(first.sizes, (5, 5, 8, 8));
        assert!(first.causal);
    }
}
