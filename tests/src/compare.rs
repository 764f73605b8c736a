//! Comparing a backend's tensor with a reference [`RefArray`], with per-dtype tolerances.
//!
//! Every function returns `Err(description)` instead of panicking, so that proptest can shrink a
//! failing case; the description names the flat and multi-index, the value got and expected,
//! the tolerance and the layout of the tensor.

use crate::reference::{unravel, RefArray};
use tensor_core::{Backend, DType, Tensor};

/// How far a float result may be from the reference: `|got - expected| <= abs + rel * scale`,
/// where `scale` is `|expected|`, or for accumulating ops a per-element magnitude (e.g. the sum
/// of `|a_ik * b_kj|` for matmul), which bounds rounding error even under cancellation.
///
/// NaN must match NaN, an infinity must match the same infinity, and a finite expected value
/// needs a finite result. Integer and bool dtypes are always compared exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute slack.
    pub abs: f64,
    /// Relative slack, multiplied by the scale of the element.
    pub rel: f64,
    /// When true, `+0` and `-0` are told apart (for ops documented to keep the sign of zero).
    pub signed_zero: bool,
}

/// Unit roundoff of f32 (2^-24).
pub const F32_EPS: f64 = 5.960_464_477_539_063e-8;
/// Unit roundoff of f64 (2^-53).
pub const F64_EPS: f64 = 1.110_223_024_625_156_5e-16;

impl Tolerance {
    /// Bit-exact (up to NaN payloads), with the sign of zero checked.
    pub const EXACT: Tolerance = Tolerance {
        abs: 0.0,
        rel: 0.0,
        signed_zero: true,
    };

    /// Simple correctly-rounded maps and arithmetic (neg, add, div, sqrt, floor, ...):
    /// f32 `abs 1e-5 + rel 1e-4`, f64 `abs 1e-12 + rel 1e-10`.
    pub fn simple(dtype: DType) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance::loose(1e-5, 1e-4),
            DType::F64 => Tolerance::loose(1e-12, 1e-10),
            DType::I64 | DType::Bool => Tolerance::EXACT,
        }
    }

    /// Transcendental maps (exp, log, sin, tanh, sigmoid, gelu, erf, pow), whose device versions
    /// are accurate to a few ulps but not correctly rounded: f32 `abs 1e-5 + rel 5e-4`,
    /// f64 `abs 1e-12 + rel 1e-9`.
    pub fn transcendental(dtype: DType) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance::loose(1e-5, 5e-4),
            DType::F64 => Tolerance::loose(1e-12, 1e-9),
            DType::I64 | DType::Bool => Tolerance::EXACT,
        }
    }

    /// Ops that accumulate `terms` products or sums (reductions, matmul, convolution, pooling):
    /// the classic bound `terms * eps * sum|term|`, with a factor 4 of headroom, on top of the
    /// simple tolerance. Use with a magnitude in [`assert_close_scaled`].
    pub fn accumulation(dtype: DType, terms: usize) -> Tolerance {
        let base = Tolerance::simple(dtype);
        let eps = match dtype {
            DType::F32 => F32_EPS,
            DType::F64 => F64_EPS,
            DType::I64 | DType::Bool => return Tolerance::EXACT,
        };
        Tolerance::loose(base.abs, base.rel + 4.0 * (terms.max(1) as f64) * eps)
    }

    /// A float tolerance that does not check the sign of zero.
    pub fn loose(abs: f64, rel: f64) -> Tolerance {
        Tolerance {
            abs,
            rel,
            signed_zero: false,
        }
    }

    /// The same tolerance with the sign of zero checked.
    pub fn with_signed_zero(self) -> Tolerance {
        Tolerance {
            signed_zero: true,
            ..self
        }
    }
}

/// Checks one element; `Err` holds a short reason.
pub fn check_value(got: f64, expected: f64, scale: f64, tol: Tolerance) -> Result<(), String> {
    if expected.is_nan() {
        return if got.is_nan() {
            Ok(())
        } else {
            Err("expected NaN".into())
        };
    }
    if expected.is_infinite() {
        return if got == expected {
            Ok(())
        } else {
            Err("expected an infinity of that sign".into())
        };
    }
    if !got.is_finite() {
        return Err("expected a finite value".into());
    }
    if tol.signed_zero
        && got == 0.0
        && expected == 0.0
        && got.is_sign_negative() != expected.is_sign_negative()
    {
        return Err("sign of zero differs".into());
    }
    let allowed = tol.abs + tol.rel * scale.abs().max(expected.abs());
    if (got - expected).abs() > allowed {
        return Err(format!(
            "difference {:e} exceeds {:e}",
            (got - expected).abs(),
            allowed
        ));
    }
    Ok(())
}

/// Compares `got` (row-major values of a tensor of `shape`) with `expected` element by element.
/// `magnitude`, when given, has the shape of `expected` and replaces `|expected|` as the scale
/// of the relative tolerance.
pub fn compare_values(
    got: &[f64],
    shape: &[usize],
    expected: &RefArray,
    magnitude: Option<&RefArray>,
    tol: Tolerance,
) -> Result<(), String> {
    if shape != expected.shape.as_slice() {
        return Err(format!(
            "shape mismatch: got {shape:?}, expected {:?}",
            expected.shape
        ));
    }
    if got.len() != expected.numel() {
        return Err(format!(
            "got {} values for shape {shape:?}, expected {}",
            got.len(),
            expected.numel()
        ));
    }
    for (i, (&g, &e)) in got.iter().zip(&expected.data).enumerate() {
        let scale = magnitude.map_or(0.0, |m| m.data[i]);
        if let Err(why) = check_value(g, e, scale, tol) {
            return Err(format!(
                "mismatch at index {:?} (flat {i}): got {g:?}, expected {e:?} ({why}; tolerance {tol:?}, scale {scale:e})",
                unravel(i, shape)
            ));
        }
    }
    Ok(())
}

/// Downloads `got` and compares it with `expected` (dtype, shape, then every element).
pub fn assert_close<B: Backend>(
    got: &Tensor<B>,
    dtype: DType,
    expected: &RefArray,
    tol: Tolerance,
) -> Result<(), String> {
    compare_tensor(got, dtype, expected, None, tol)
}

/// Like [`assert_close`], with a per-element error magnitude for accumulating ops.
pub fn assert_close_scaled<B: Backend>(
    got: &Tensor<B>,
    dtype: DType,
    expected: &RefArray,
    magnitude: &RefArray,
    tol: Tolerance,
) -> Result<(), String> {
    compare_tensor(got, dtype, expected, Some(magnitude), tol)
}

fn compare_tensor<B: Backend>(
    got: &Tensor<B>,
    dtype: DType,
    expected: &RefArray,
    magnitude: Option<&RefArray>,
    tol: Tolerance,
) -> Result<(), String> {
    if got.dtype() != dtype {
        return Err(format!(
            "dtype mismatch: got {}, expected {dtype}",
            got.dtype()
        ));
    }
    // Integers and bools are exact; zero has one sign there.
    let tol = if dtype.is_float() {
        tol
    } else {
        Tolerance::loose(0.0, 0.0)
    };
    let values = got
        .to_vec_f64()
        .map_err(|e| format!("download failed: {e}"))?;
    compare_values(&values, got.dims(), expected, magnitude, tol)
        .map_err(|e| format!("{e}\n  result layout: {:?}", got.layout()))
}

/// Describes the layouts of input tensors for a failure message (shape, strides, offset).
pub fn describe_inputs<B: Backend>(inputs: &[&Tensor<B>]) -> String {
    inputs
        .iter()
        .enumerate()
        .map(|(i, t)| {
            format!(
                "\n  input {i}: {} shape {:?} strides {:?} offset {}",
                t.dtype(),
                t.dims(),
                t.layout().strides(),
                t.layout().offset()
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values_and_tolerances() {
        let t = Tolerance::simple(DType::F32);
        assert!(check_value(f64::NAN, f64::NAN, 0.0, t).is_ok());
        assert!(check_value(1.0, f64::NAN, 0.0, t).is_err());
        assert!(check_value(f64::INFINITY, f64::INFINITY, 0.0, t).is_ok());
        assert!(check_value(f64::NEG_INFINITY, f64::INFINITY, 0.0, t).is_err());
        assert!(check_value(f64::NAN, 1.0, 0.0, t).is_err());
        assert!(check_value(1.00005, 1.0, 0.0, t).is_ok());
        assert!(check_value(1.001, 1.0, 0.0, t).is_err());
        assert!(check_value(-0.0, 0.0, 0.0, t).is_ok());
        assert!(check_value(-0.0, 0.0, 0.0, Tolerance::EXACT).is_err());
        // A magnitude widens the relative slack under cancellation.
        assert!(check_value(1e-3, 0.0, 100.0, Tolerance::accumulation(DType::F32, 100)).is_ok());
        let e = RefArray::new(vec![2], vec![1.0, 2.0]);
        let err = compare_values(&[1.0, 3.0], &[2], &e, None, t).unwrap_err();
        assert!(
            err.contains("index [1]") && err.contains("got 3.0") && err.contains("expected 2.0"),
            "{err}"
        );
    }
}
