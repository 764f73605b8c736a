//! Unary maps: every `UnaryOp` on every dtype it supports, on any layout, with values up to
//! `1e4` (where `exp`-based formulas overflow) and the special values.

use super::{build, elementwise_cases, op_failed, with_inputs};
use crate::compare::{assert_close_scaled, Tolerance};
use crate::reference::elementwise;
use crate::runner::check_property_systematic;
use crate::strategies::{shape, special_rate, tensor_case, Pattern, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, DType, UnaryOp};

/// One application of a unary op.
#[derive(Clone, Debug)]
pub struct UnaryCase {
    /// The op.
    pub op: UnaryOp,
    /// The operand.
    pub input: TensorCase,
}

/// The dtypes `op` is defined for.
pub fn supported_dtypes(op: UnaryOp) -> Vec<DType> {
    DType::ALL.into_iter().filter(|&d| op.supports(d)).collect()
}

/// Cases of `op` on `dtype`: any shape and layout; values up to 10 (sometimes 100 or `1e4`,
/// to reach overflow) with a random rate of specials.
pub fn cases(op: UnaryOp, dtype: DType) -> BoxedStrategy<UnaryCase> {
    (
        shape(),
        special_rate(),
        prop_oneof![4 => Just(10.0), 1 => Just(100.0), 1 => Just(1e4)],
    )
        .prop_flat_map(move |(s, special, magnitude)| {
            let profile = ValueProfile {
                magnitude,
                ..ValueProfile::DEFAULT.with_specials(special)
            };
            tensor_case(dtype, s, profile).prop_map(move |input| UnaryCase { op, input })
        })
        .boxed()
}

/// The systematic cases of `op` on `dtype`: every layout kind, then every value regime
/// (`|x|` up to `1e4`, kinks and ties, NaN/inf/-0) on a contiguous tensor.
pub fn patterns(op: UnaryOp, dtype: DType) -> Vec<Pattern<UnaryCase>> {
    elementwise_cases(&["input"], vec![dtype], move |mut v| UnaryCase {
        op,
        input: v.remove(0),
    })
}

/// The error scale of `op` at `x` besides `|op(x)|`: gelu's `x/2 * (1 + erf(x/√2))` cancels for
/// negative `x`, so its rounding is relative to `|x| / 2`.
pub fn magnitude(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Gelu => 0.5 * x.abs(),
        _ => 0.0,
    }
}

/// The tolerance for `op`: simple (and sign-of-zero exact for neg and sign) or transcendental.
pub fn tolerance(op: UnaryOp, dtype: DType) -> Tolerance {
    match op {
        UnaryOp::Neg | UnaryOp::Sign => Tolerance::simple(dtype).with_signed_zero(),
        UnaryOp::Exp
        | UnaryOp::Log
        | UnaryOp::Sin
        | UnaryOp::Cos
        | UnaryOp::Tanh
        | UnaryOp::Sigmoid
        | UnaryOp::Gelu
        | UnaryOp::Erf => Tolerance::transcendental(dtype),
        _ => Tolerance::simple(dtype),
    }
}

/// Compares `x.unary(op)` with the reference.
pub fn check<B: Backend>(dev: &B, case: &UnaryCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let x = build(dev, &case.input, "input")?;
    let got = x.unary(case.op).map_err(op_failed(case.op.name(), &[&x]))?;
    let input = case.input.reference();
    let expected = elementwise::unary(case.op, dtype, &input);
    let scale = input.map(|v| magnitude(case.op, v));
    assert_close_scaled(&got, dtype, &expected, &scale, tolerance(case.op, dtype))
        .map_err(with_inputs(&[&x]))
}

/// Checks `op` on `dtype`: the systematic patterns, then 256 random cases.
pub fn run<B: Backend>(dev: &B, op: UnaryOp, dtype: DType) {
    check_property_systematic(
        &format!("unary {} {dtype}", op.name()),
        patterns(op, dtype),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
