//! Random tensors: element `i` of a draw `(seed, offset)` must be `sample(seed, offset + i)` of
//! `tessera_core::random` (bit-exact for uniform, to a few ulps for normal), and large draws must
//! have the right moments.

use super::{op_failed, FLOAT_DTYPES};
use crate::compare::{compare_values, Tolerance};
use crate::reference::{numel, RefArray};
use crate::runner::check_property;
use crate::strategies::shape;
use proptest::prelude::*;
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{Backend, DType, Distribution, Generator, Tensor};

/// One draw.
#[derive(Clone, Debug)]
pub struct RandomCase {
    /// Uniform or normal, with its parameters.
    pub dist: Distribution,
    /// f32 or f64.
    pub dtype: DType,
    /// Shape of the draw.
    pub shape: Vec<usize>,
    /// Stream.
    pub seed: u64,
    /// Counter of the first element.
    pub offset: u64,
}

/// A distribution with small parameters.
pub fn distribution() -> BoxedStrategy<Distribution> {
    prop_oneof![
        (-5i32..5, 1i32..4).prop_map(|(low, width)| Distribution::Uniform {
            low: low as f64,
            high: (low + width) as f64,
        }),
        (-3i32..3, 1i32..3).prop_map(|(mean, std)| Distribution::Normal {
            mean: mean as f64,
            std: std as f64,
        }),
    ]
    .boxed()
}

/// Cases on `dtype`: any shape, any seed, offsets including ones past 2^32 and ones so close
/// to `u64::MAX` that the draw's counters wrap around (modulo 2^64, the contract's rule).
pub fn cases(dtype: DType) -> BoxedStrategy<RandomCase> {
    (
        distribution(),
        shape(),
        any::<u64>(),
        prop_oneof![
            0u64..1000,
            any::<u64>().prop_map(|o| o >> 1),
            (u64::MAX - 200)..=u64::MAX,
        ],
    )
        .prop_map(move |(dist, shape, seed, offset)| RandomCase {
            dist,
            dtype,
            shape,
            seed,
            offset,
        })
        .boxed()
}

/// The expected sample `i` of a case.
fn expected_sample(case: &RandomCase, i: u64) -> f64 {
    let index = case.offset.wrapping_add(i);
    match case.dtype {
        DType::F32 => sample_f32(case.dist, case.seed, index) as f64,
        DType::F16 | DType::BF16 => {
            // The f32 sample rounded to nearest even, moved below a uniform's excluded bound
            // when the rounding reached it.
            let p = if case.dtype == DType::F16 { 11 } else { 8 };
            let v = crate::reference::elementwise::round_to(
                case.dtype,
                sample_f32(case.dist, case.seed, index) as f64,
            );
            match case.dist {
                Distribution::Uniform { low, high } if v >= high && high > low => {
                    next_below(v, p, if p == 11 { -14 } else { -126 })
                }
                _ => v,
            }
        }
        _ => sample_f64(case.dist, case.seed, index),
    }
}

/// The largest value below the finite `x` in a format of `p` significant bits whose smallest
/// normal exponent is `emin`.
fn next_below(x: f64, p: i32, emin: i32) -> f64 {
    let exponent = |a: f64| (((a.to_bits() >> 52) as i32) - 1023).max(emin);
    if x == 0.0 {
        return -(2f64.powi(emin - p + 1));
    }
    let a = x.abs();
    let e = exponent(a);
    if x < 0.0 {
        // Away from zero: one ulp of |x|.
        return -(a + 2f64.powi(e - p + 1));
    }
    // Toward zero: half an ulp at a normal power of two, one ulp otherwise.
    let step = if a == 2f64.powi(e) && e > emin {
        e - p
    } else {
        e - p + 1
    };
    a - 2f64.powi(step)
}

/// Compares a draw with the counter-based samples.
pub fn check<B: Backend>(dev: &B, case: &RandomCase) -> Result<(), String> {
    let t = Tensor::random(
        case.shape.clone(),
        case.dist,
        case.dtype,
        case.seed,
        case.offset,
        dev,
    )
    .map_err(op_failed::<B, _>("random", &[]))?;
    let n = numel(&case.shape) as u64;
    let expected = RefArray::new(
        case.shape.clone(),
        (0..n).map(|i| expected_sample(case, i)).collect(),
    );
    let tol = match case.dist {
        Distribution::Uniform { .. } => Tolerance::EXACT,
        Distribution::Normal { .. } => Tolerance::transcendental(case.dtype),
    };
    if t.dtype() != case.dtype {
        return Err(format!("dtype {} instead of {}", t.dtype(), case.dtype));
    }
    let got = t
        .to_vec_f64()
        .map_err(|e| format!("download failed: {e}"))?;
    // Box-Muller's `r * cos(2 pi u)` rounds relative to its factor `r <= 8.5` (the cosine is
    // computed to an absolute precision near its zeros), not to the sample: the error scale of
    // a normal draw is `|mean| + std * (|z| + 8.5)`.
    let magnitude = match case.dist {
        Distribution::Uniform { .. } => None,
        Distribution::Normal { mean, std } => {
            Some(expected.map(|v| mean.abs() + std.abs() * ((v - mean).abs() / std.abs() + 8.5)))
        }
    };
    compare_values(&got, t.dims(), &expected, magnitude.as_ref(), tol)
}

/// Checks draws on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    check_property(&format!("random {dtype}"), cases(dtype), |c| check(dev, c));
}

/// Mean and variance of `values`.
fn moments(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    (mean, var)
}

/// Draws 200 000 samples per float dtype: uniform on `[-1, 3)` must stay in range with mean 1
/// and variance 4/3; normal(2, 0.5) must have mean 2 and variance 0.25 (tolerances ~10 standard
/// errors). Two successive draws from one [`Generator`] must continue the stream.
pub fn check_moments<B: Backend>(dev: &B) {
    for dtype in FLOAT_DTYPES.into_iter().filter(|&d| dev.supports_dtype(d)) {
        check_moments_of(dev, dtype);
    }
}

/// [`check_moments`] for one float dtype; panics on the first failed assertion.
pub fn check_moments_of<B: Backend>(dev: &B, dtype: DType) {
    const N: usize = 200_000;
    let uniform = Distribution::Uniform {
        low: -1.0,
        high: 3.0,
    };
    let u = Tensor::random([N], uniform, dtype, 11, 0, dev)
        .and_then(|t| t.to_vec_f64())
        .expect("uniform draw");
    assert!(
        u.iter().all(|&x| (-1.0..3.0).contains(&x)),
        "{dtype}: uniform sample outside [-1, 3)"
    );
    let (m, v) = moments(&u);
    assert!((m - 1.0).abs() < 0.03, "{dtype}: uniform mean {m}");
    assert!(
        (v - 4.0 / 3.0).abs() < 0.03,
        "{dtype}: uniform variance {v}"
    );

    let normal = Distribution::Normal {
        mean: 2.0,
        std: 0.5,
    };
    let z = Tensor::random([N], normal, dtype, 12, 0, dev)
        .and_then(|t| t.to_vec_f64())
        .expect("normal draw");
    let (m, v) = moments(&z);
    assert!((m - 2.0).abs() < 0.01, "{dtype}: normal mean {m}");
    assert!((v - 0.25).abs() < 0.01, "{dtype}: normal variance {v}");
    let fourth = z.iter().map(|x| (x - m).powi(4)).sum::<f64>() / N as f64;
    assert!(
        (fourth / (v * v) - 3.0).abs() < 0.1,
        "{dtype}: normal kurtosis {}",
        fourth / (v * v)
    );

    let mut g = Generator::new(5);
    let a = Tensor::random_from([7], uniform, dtype, &mut g, dev)
        .and_then(|t| t.to_vec_f64())
        .expect("draw");
    let b = Tensor::random_from([3], uniform, dtype, &mut g, dev)
        .and_then(|t| t.to_vec_f64())
        .expect("draw");
    let whole = Tensor::random([10], uniform, dtype, 5, 0, dev)
        .and_then(|t| t.to_vec_f64())
        .expect("draw");
    assert_eq!(
        [a, b].concat(),
        whole,
        "{dtype}: a generator must continue its stream"
    );

    // A generator for loading draws zeros and still moves its counter.
    let mut g = Generator::for_loading();
    let zeros = Tensor::random_from([7], normal, dtype, &mut g, dev)
        .and_then(|t| t.to_vec_f64())
        .expect("draw for loading");
    assert_eq!(zeros, vec![0.0; 7], "{dtype}: Generator::for_loading");
    assert_eq!(
        g.advance(0).1,
        7,
        "{dtype}: Generator::for_loading's counter"
    );
}
