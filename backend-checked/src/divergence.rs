//! Comparing the two results of one op and describing the first divergence as a typed
//! [`tessera_core::Error::Divergence`].

use crate::tolerance::{check_value, Tolerance};
use tessera_core::{Error, HostData, Shape};

/// What the comparison of one op's outputs needs to know.
pub(crate) struct Comparison<'a> {
    /// The op's name.
    pub op: &'static str,
    /// Names of the backend under test and of the reference.
    pub backends: (&'static str, &'static str),
    /// Shapes of the op's inputs, for the error.
    pub inputs: Vec<Shape>,
    /// Shape of the output (row-major), to name the element that diverges.
    pub output: &'a [usize],
    /// The tolerance of the op (floats only; integers and bools are compared exactly).
    pub tolerance: Tolerance,
    /// Per-element error magnitude for accumulating ops, `|expected|` when `None`.
    pub magnitude: Option<&'a [f64]>,
}

/// The multi-index of row-major position `flat` in `dims` (flat when the shape does not match).
fn describe_position(flat: usize, dims: &[usize], len: usize) -> String {
    if dims.iter().product::<usize>() != len {
        return format!("flat {flat}");
    }
    let mut index = vec![0; dims.len()];
    let mut rest = flat;
    for (i, &d) in dims.iter().enumerate().rev() {
        index[i] = rest % d.max(1);
        rest /= d.max(1);
    }
    format!("{index:?}")
}

impl Comparison<'_> {
    fn divergence(&self, max_error: f64, detail: String) -> Error {
        Error::Divergence {
            op: self.op,
            under_test: self.backends.0,
            reference: self.backends.1,
            inputs: self.inputs.clone(),
            max_error,
            detail,
        }
    }

    /// `Ok` when `got` (from the backend under test) matches `expected` (from the reference)
    /// element by element, else the divergence: the largest error and the first element out of
    /// tolerance.
    pub(crate) fn check(&self, got: &HostData, expected: &HostData) -> Result<(), Error> {
        if got.dtype() != expected.dtype() {
            return Err(self.divergence(
                f64::INFINITY,
                format!("dtype {} vs {}", got.dtype(), expected.dtype()),
            ));
        }
        if got.len() != expected.len() {
            return Err(self.divergence(
                f64::INFINITY,
                format!("{} elements vs {}", got.len(), expected.len()),
            ));
        }
        let tolerance = if got.dtype().is_float() {
            self.tolerance
        } else {
            Tolerance::SAME_VALUE
        };
        let (got, expected) = (got.to_f64_vec(), expected.to_f64_vec());
        let mut max_error = 0.0f64;
        let mut first = None;
        for (i, (&g, &e)) in got.iter().zip(&expected).enumerate() {
            let scale = self.magnitude.map_or(0.0, |m| m[i]);
            let error = if g == e || (g.is_nan() && e.is_nan()) {
                0.0
            } else if (g - e).is_nan() {
                f64::INFINITY
            } else {
                (g - e).abs()
            };
            max_error = max_error.max(error);
            if first.is_none() {
                if let Err(why) = check_value(g, e, scale, tolerance) {
                    first = Some(format!(
                        "first at element {} of output {:?}: got {g:?}, reference {e:?} ({why}; \
                         allowed {:e})",
                        describe_position(i, self.output, got.len()),
                        self.output,
                        tolerance.allowed(e, scale)
                    ));
                }
            }
        }
        match first {
            None => Ok(()),
            Some(detail) => Err(self.divergence(max_error, detail)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::DType;

    fn comparison(tolerance: Tolerance) -> Comparison<'static> {
        Comparison {
            op: "add",
            backends: ("test", "cpu"),
            inputs: vec![Shape::new([2, 2]), Shape::new([2])],
            output: &[2, 2],
            tolerance,
            magnitude: None,
        }
    }

    #[test]
    fn equal_results_pass_and_nan_matches_nan() {
        let c = comparison(Tolerance::simple(DType::F32));
        let a = HostData::F32(vec![1.0, f32::NAN, f32::INFINITY, -0.0]);
        assert!(c.check(&a, &a.clone()).is_ok());
        let close = HostData::F32(vec![1.00001, f32::NAN, f32::INFINITY, 0.0]);
        assert!(c.check(&close, &a).is_ok());
    }

    #[test]
    fn a_divergence_names_op_shapes_max_error_and_element() {
        let c = comparison(Tolerance::simple(DType::F64));
        let got = HostData::F64(vec![1.0, 2.5, 3.0, 7.0]);
        let expected = HostData::F64(vec![1.0, 2.0, 3.0, 4.0]);
        let err = c.check(&got, &expected).unwrap_err();
        match &err {
            Error::Divergence {
                op,
                inputs,
                max_error,
                detail,
                ..
            } => {
                assert_eq!(*op, "add");
                assert_eq!(inputs, &vec![Shape::new([2, 2]), Shape::new([2])]);
                assert_eq!(*max_error, 3.0);
                assert!(
                    detail.contains("[0, 1]") && detail.contains("2.5"),
                    "{detail}"
                );
            }
            other => panic!("expected a divergence, got {other:?}"),
        }
        let text = err.to_string();
        assert!(
            text.starts_with("add: backend `test` diverges from `cpu` on inputs [2, 2], [2]"),
            "{text}"
        );
    }

    #[test]
    fn integers_are_exact_and_lengths_must_match() {
        let c = comparison(Tolerance::simple(DType::F32));
        let err = c
            .check(&HostData::I64(vec![1, 2]), &HostData::I64(vec![1, 3]))
            .unwrap_err();
        assert!(matches!(err, Error::Divergence { max_error, .. } if max_error == 1.0));
        let err = c
            .check(&HostData::I64(vec![1]), &HostData::I64(vec![1, 3]))
            .unwrap_err();
        assert!(err.to_string().contains("1 elements vs 2"), "{err}");
        assert!(c
            .check(&HostData::F32(vec![f32::NAN]), &HostData::F32(vec![1.0]))
            .is_err());
    }
}
