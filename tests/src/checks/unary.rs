//! Unary maps: every `UnaryOp` on every dtype it supports, on any layout.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::elementwise;
use crate::runner::check_property;
use crate::strategies::{shape, special_rate, tensor_case, TensorCase, ValueProfile};
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

/// Cases of `op` on `dtype`: any shape and layout; values up to 10 (sometimes 100, to reach
/// overflow) with a random rate of specials.
pub fn cases(op: UnaryOp, dtype: DType) -> BoxedStrategy<UnaryCase> {
    (
        shape(),
        special_rate(),
        prop_oneof![3 => Just(10.0), 1 => Just(100.0)],
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
    let expected = elementwise::unary(case.op, dtype, &case.input.reference());
    assert_close(&got, dtype, &expected, tolerance(case.op, dtype)).map_err(with_inputs(&[&x]))
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: UnaryOp, dtype: DType) {
    check_property(
        &format!("unary {} {dtype}", op.name()),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
