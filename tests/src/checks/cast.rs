//! Casts between every pair of dtypes.

use super::{build, elementwise_cases, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::elementwise;
use crate::runner::check_property_systematic;
use crate::strategies::{shape, tensor_case_from, value, Pattern, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// One cast.
#[derive(Clone, Debug)]
pub struct CastCase {
    /// The source tensor.
    pub input: TensorCase,
    /// The target dtype.
    pub to: DType,
}

/// Source values for casts: the default profile with specials, plus values that exercise
/// truncation (`±2.5`, `-2.7`), saturation (`±1e20`, `±1e300`) and rounding to f32
/// (`16777217`, `2^53 - 1`), each rounded to the source dtype.
pub fn cast_value(from: DType) -> BoxedStrategy<f64> {
    let edge = prop::sample::select(vec![
        0.5,
        -0.5,
        2.5,
        -2.7,
        1e10,
        -3e9,
        1e20,
        -1e20,
        1e300,
        -1e300,
        16_777_217.0,
        9_007_199_254_740_991.0,
    ])
    .prop_map(move |v| match from {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => elementwise::round_to(from, v),
        // Integers keep |v| <= 2^53 - 1, where i64 -> f64 is exact (and `+ 0.0` turns -0 into 0).
        DType::I64 => {
            v.clamp(-9_007_199_254_740_991.0, 9_007_199_254_740_991.0)
                .trunc()
                + 0.0
        }
        DType::Bool => f64::from(v != 0.0),
        other => panic!("no cast values for {other}"),
    });
    prop_oneof![3 => value(from, ValueProfile::DEFAULT.with_specials(15)), 1 => edge].boxed()
}

/// Cases casting `from` to `to`.
pub fn cases(from: DType, to: DType) -> BoxedStrategy<CastCase> {
    shape()
        .prop_flat_map(move |s| tensor_case_from(from, s, cast_value(from)))
        .prop_map(move |input| CastCase { input, to })
        .boxed()
}

/// The systematic cases of `from -> to`: every layout kind and the value regimes.
pub fn patterns(from: DType, to: DType) -> Vec<Pattern<CastCase>> {
    elementwise_cases(&["input"], vec![from], move |mut v| CastCase {
        input: v.remove(0),
        to,
    })
}

/// Compares `x.to_dtype(to)` with the reference conversion (exact: every cast is a
/// single correctly defined rounding).
pub fn check<B: Backend>(dev: &B, case: &CastCase) -> Result<(), String> {
    let x = build(dev, &case.input, "input")?;
    let got = x.to_dtype(case.to).map_err(op_failed("to_dtype", &[&x]))?;
    let expected = elementwise::cast(&case.input.reference(), case.to);
    assert_close(&got, case.to, &expected, Tolerance::EXACT).map_err(with_inputs(&[&x]))
}

/// Checks the cast `from -> to` over 256 random cases.
pub fn run<B: Backend>(dev: &B, from: DType, to: DType) {
    check_property_systematic(
        &format!("cast {from} -> {to}"),
        patterns(from, to),
        cases(from, to),
        |c| check(dev, c),
    );
}
