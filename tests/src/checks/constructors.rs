//! Constructors: arange, linspace, eye and full, against their definitions.

use super::op_failed;
use crate::compare::{assert_close, assert_close_scaled, Tolerance};
use crate::reference::{elementwise::cast_value, numel, RefArray};
use crate::runner::check_property;
use crate::strategies::shape;
use proptest::prelude::*;
use tessera_core::{Backend, DType, Tensor};

/// One constructor call.
#[derive(Clone, Debug, PartialEq)]
pub enum ConstructorCase {
    /// `Tensor::arange(start, end, step, dtype)`.
    Arange {
        /// First value.
        start: f64,
        /// Exclusive bound.
        end: f64,
        /// Non-zero step.
        step: f64,
        /// Element type.
        dtype: DType,
    },
    /// `Tensor::linspace(start, end, steps, dtype)`.
    Linspace {
        /// First value.
        start: f64,
        /// Last value.
        end: f64,
        /// Number of values.
        steps: usize,
        /// Element type.
        dtype: DType,
    },
    /// `Tensor::eye(n, dtype)`.
    Eye {
        /// Size.
        n: usize,
        /// Element type.
        dtype: DType,
    },
    /// `Tensor::full(shape, value, dtype)`.
    Full {
        /// Shape.
        shape: Vec<usize>,
        /// Fill value (converted to the dtype).
        value: f64,
        /// Element type.
        dtype: DType,
    },
}

/// Any dtype.
fn dtype() -> BoxedStrategy<DType> {
    prop::sample::select(DType::ALL.to_vec()).boxed()
}

/// Cases of every constructor. arange uses multiples of 1/2 (exact in binary) so that the
/// element count has no rounding ambiguity.
pub fn cases() -> BoxedStrategy<ConstructorCase> {
    let half = |lo: i32, hi: i32| (lo..hi).prop_map(|v| v as f64 / 2.0);
    let arange_dtype = prop::sample::select(vec![DType::F32, DType::F64, DType::I64]);
    prop_oneof![
        (
            half(-20, 20),
            half(-24, 24),
            prop::sample::select(vec![0.5, 1.0, 1.5, 2.0, -0.5, -1.0, -3.0]),
            arange_dtype
        )
            .prop_map(|(start, end, step, dtype)| ConstructorCase::Arange {
                start,
                end,
                step,
                dtype
            }),
        (
            -10.0f64..10.0,
            -10.0f64..10.0,
            0usize..=12,
            prop::sample::select(vec![DType::F32, DType::F64])
        )
            .prop_map(|(start, end, steps, dtype)| ConstructorCase::Linspace {
                start,
                end,
                steps,
                dtype
            }),
        (0usize..=6, dtype()).prop_map(|(n, dtype)| ConstructorCase::Eye { n, dtype }),
        (
            shape(),
            prop_oneof![
                half(-10, 10),
                Just(f64::NAN),
                Just(-0.0),
                Just(f64::INFINITY)
            ],
            dtype()
        )
            .prop_map(|(shape, value, dtype)| ConstructorCase::Full {
                shape,
                value,
                dtype
            }),
    ]
    .boxed()
}

/// Cases of every constructor that produce `dtype`.
pub fn cases_of(dtype: DType) -> BoxedStrategy<ConstructorCase> {
    cases()
        .prop_filter("another dtype", move |c| c.dtype() == dtype)
        .boxed()
}

impl ConstructorCase {
    /// The dtype the constructor produces.
    pub fn dtype(&self) -> DType {
        match self {
            ConstructorCase::Arange { dtype, .. }
            | ConstructorCase::Linspace { dtype, .. }
            | ConstructorCase::Eye { dtype, .. }
            | ConstructorCase::Full { dtype, .. } => *dtype,
        }
    }
}

/// The values of `start, start + step, ...` strictly before `end`, by stepping.
fn arange_values(start: f64, end: f64, step: f64) -> Vec<f64> {
    let mut out = Vec::new();
    let mut i = 0.0;
    loop {
        let v = start + i * step;
        let inside = if step > 0.0 { v < end } else { v > end };
        if !inside {
            return out;
        }
        out.push(v);
        i += 1.0;
    }
}

/// Compares the constructor's result with its definition.
pub fn check<B: Backend>(dev: &B, case: &ConstructorCase) -> Result<(), String> {
    // The error scale besides `|expected|`: linspace's `start + i * step` rounds relative to
    // its terms, which may cancel.
    let mut magnitude = None;
    let (got, dtype, expected, tol) = match case {
        ConstructorCase::Arange {
            start,
            end,
            step,
            dtype,
        } => {
            let v = arange_values(*start, *end, *step);
            let t = Tensor::arange(*start, *end, *step, *dtype, dev);
            (t, *dtype, RefArray::new(vec![v.len()], v), Tolerance::EXACT)
        }
        ConstructorCase::Linspace {
            start,
            end,
            steps,
            dtype,
        } => {
            let v: Vec<f64> = (0..*steps)
                .map(|i| {
                    if i + 1 == *steps && *steps > 1 {
                        *end
                    } else if *steps == 1 {
                        *start
                    } else {
                        start + (end - start) * i as f64 / (*steps - 1) as f64
                    }
                })
                .collect();
            let terms: Vec<f64> = (0..*steps)
                .map(|i| start.abs() + (end - start).abs() * i as f64 / (*steps - 1).max(1) as f64)
                .collect();
            magnitude = Some(RefArray::new(vec![*steps], terms));
            let t = Tensor::linspace(*start, *end, *steps, *dtype, dev);
            (
                t,
                *dtype,
                RefArray::new(vec![*steps], v),
                Tolerance::simple(*dtype),
            )
        }
        ConstructorCase::Eye { n, dtype } => {
            let e = RefArray::from_fn(vec![*n, *n], |i| if i[0] == i[1] { 1.0 } else { 0.0 });
            (Tensor::eye(*n, *dtype, dev), *dtype, e, Tolerance::EXACT)
        }
        ConstructorCase::Full {
            shape,
            value,
            dtype,
        } => {
            let e = RefArray::full(shape.clone(), *value);
            (
                Tensor::full(shape.clone(), *value, *dtype, dev),
                *dtype,
                e,
                Tolerance::EXACT,
            )
        }
    };
    let got = got.map_err(op_failed::<B, _>(&format!("{case:?}"), &[]))?;
    let expected = expected.map(|v| cast_value(dtype, v));
    debug_assert_eq!(expected.numel(), numel(&expected.shape));
    match magnitude {
        Some(m) => assert_close_scaled(&got, dtype, &expected, &m, tol),
        None => assert_close(&got, dtype, &expected, tol),
    }
}

/// Checks the constructors over 256 random cases.
pub fn run<B: Backend>(dev: &B) {
    // Cases of a dtype the device lacks are skipped (the device family checks that they are
    // refused).
    check_property("constructors", cases(), |c| {
        if dev.supports_dtype(c.dtype()) {
            check(dev, c)
        } else {
            Ok(())
        }
    });
}
