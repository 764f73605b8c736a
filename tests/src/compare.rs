//! Comparing a backend's tensor with a reference [`RefArray`], with per-dtype tolerances.
//!
//! The [`Tolerance`] type and [`check_value`] live in `tessera_checked::tolerance`, shared with
//! the `Checked<B, R>` backend, and are re-exported here.
//!
//! Every function returns `Err(description)` instead of panicking, so that proptest can shrink a
//! failing case; the description names the flat and multi-index, the value got and expected,
//! the tolerance and the layout of the tensor.

use crate::reference::{unravel, RefArray};
use tessera_core::{Backend, DType, Tensor};

pub use tessera_checked::tolerance::{check_value, Tolerance, F32_EPS, F64_EPS};

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
