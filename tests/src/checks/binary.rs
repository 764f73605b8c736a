//! Binary ops with broadcasting between two independently laid-out operands.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::elementwise;
use crate::runner::check_property;
use crate::strategies::{broadcast_pair, special_rate, tensor_case, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, BinaryOp, DType};

/// One application of a binary op.
#[derive(Clone, Debug)]
pub struct BinaryCase {
    /// The op.
    pub op: BinaryOp,
    /// Left operand.
    pub lhs: TensorCase,
    /// Right operand.
    pub rhs: TensorCase,
}

/// The dtypes `op` is defined for.
pub fn supported_dtypes(op: BinaryOp) -> Vec<DType> {
    DType::ALL.into_iter().filter(|&d| op.supports(d)).collect()
}

/// Two operands of `dtype` whose shapes broadcast together, each with its own layout and a
/// shared random rate of specials.
pub fn operand_pair(dtype: DType) -> BoxedStrategy<(TensorCase, TensorCase)> {
    (broadcast_pair(), special_rate())
        .prop_flat_map(move |((_, l, r), special)| {
            let profile = ValueProfile::DEFAULT.with_specials(special);
            (
                tensor_case(dtype, l, profile),
                tensor_case(dtype, r, profile),
            )
        })
        .boxed()
}

/// Cases of `op` on `dtype`.
pub fn cases(op: BinaryOp, dtype: DType) -> BoxedStrategy<BinaryCase> {
    operand_pair(dtype)
        .prop_map(move |(lhs, rhs)| BinaryCase { op, lhs, rhs })
        .boxed()
}

/// Compares `lhs.binary(op, rhs)` with the reference.
pub fn check<B: Backend>(dev: &B, case: &BinaryCase) -> Result<(), String> {
    let dtype = case.lhs.dtype;
    let a = build(dev, &case.lhs, "lhs")?;
    let b = build(dev, &case.rhs, "rhs")?;
    let got = a
        .binary(case.op, &b)
        .map_err(op_failed(case.op.name(), &[&a, &b]))?;
    let expected =
        elementwise::binary(case.op, dtype, &case.lhs.reference(), &case.rhs.reference());
    let tol = match case.op {
        BinaryOp::Pow => Tolerance::transcendental(dtype),
        _ => Tolerance::simple(dtype),
    };
    assert_close(&got, dtype, &expected, tol).map_err(with_inputs(&[&a, &b]))
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: BinaryOp, dtype: DType) {
    check_property(
        &format!("binary {} {dtype}", op.name()),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
