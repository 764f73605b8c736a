//! Comparisons with broadcasting; the result is a bool tensor.

use super::{binary::operand_pair, build, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::elementwise;
use crate::runner::check_property;
use crate::strategies::TensorCase;
use proptest::prelude::*;
use tessera_core::{Backend, CmpOp, DType};

/// One comparison.
#[derive(Clone, Debug)]
pub struct CompareCase {
    /// The comparison.
    pub op: CmpOp,
    /// Left operand.
    pub lhs: TensorCase,
    /// Right operand.
    pub rhs: TensorCase,
}

/// Cases of `op` on operands of `dtype`.
pub fn cases(op: CmpOp, dtype: DType) -> BoxedStrategy<CompareCase> {
    operand_pair(dtype)
        .prop_map(move |(lhs, rhs)| CompareCase { op, lhs, rhs })
        .boxed()
}

/// Compares `lhs.compare(op, rhs)` with IEEE comparisons in the reference.
pub fn check<B: Backend>(dev: &B, case: &CompareCase) -> Result<(), String> {
    let a = build(dev, &case.lhs, "lhs")?;
    let b = build(dev, &case.rhs, "rhs")?;
    let got = a
        .compare(case.op, &b)
        .map_err(op_failed(case.op.name(), &[&a, &b]))?;
    let expected = elementwise::compare(case.op, &case.lhs.reference(), &case.rhs.reference());
    assert_close(&got, DType::Bool, &expected, Tolerance::EXACT).map_err(with_inputs(&[&a, &b]))
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: CmpOp, dtype: DType) {
    check_property(
        &format!("compare {} {dtype}", op.name()),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
