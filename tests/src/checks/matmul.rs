//! Matrix products: rank-1 promotion, batch broadcasting and operands of any layout
//! (a transposed operand comes from the layout recipes).

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close_scaled, Tolerance};
use crate::reference::linalg;
use crate::runner::check_property;
use crate::strategies::{
    broadcastable_to, shape_with, special_rate, tensor_case, TensorCase, ValueProfile,
};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// One matrix product.
#[derive(Clone, Debug)]
pub struct MatmulCase {
    /// Left operand: `[k]` or `[..batch, m, k]`.
    pub lhs: TensorCase,
    /// Right operand: `[k]` or `[..batch, k, n]`.
    pub rhs: TensorCase,
}

/// The operand shapes: `m, k, n` in `0..=5`, a batch of rank `0..=2` (dims `0..=3`) that each
/// side may broadcast, and each side rank-1 with probability 1/5.
pub fn shapes() -> BoxedStrategy<(Vec<usize>, Vec<usize>)> {
    (
        0usize..=5,
        0usize..=5,
        0usize..=5,
        shape_with(0..=2, 0..=3),
        0u8..5,
        0u8..5,
    )
        .prop_flat_map(|(m, k, n, batch, l1, r1)| {
            (
                Just((m, k, n)),
                broadcastable_to(batch.clone()),
                broadcastable_to(batch),
                Just((l1 == 0, r1 == 0)),
            )
        })
        .prop_map(|((m, k, n), lb, rb, (l_vec, r_vec))| {
            let lhs = if l_vec {
                vec![k]
            } else {
                [lb, vec![m, k]].concat()
            };
            let rhs = if r_vec {
                vec![k]
            } else {
                [rb, vec![k, n]].concat()
            };
            (lhs, rhs)
        })
        .boxed()
}

/// Cases on `dtype` (f32 or f64).
pub fn cases(dtype: DType) -> BoxedStrategy<MatmulCase> {
    (shapes(), special_rate())
        .prop_flat_map(move |((l, r), special)| {
            let profile = ValueProfile::DEFAULT.with_specials(special / 3);
            (
                tensor_case(dtype, l, profile),
                tensor_case(dtype, r, profile),
            )
        })
        .prop_map(|(lhs, rhs)| MatmulCase { lhs, rhs })
        .boxed()
}

/// Compares `lhs.matmul(rhs)` with the triple loop; the error scale is `|lhs| @ |rhs|`.
pub fn check<B: Backend>(dev: &B, case: &MatmulCase) -> Result<(), String> {
    let dtype = case.lhs.dtype;
    let a = build(dev, &case.lhs, "lhs")?;
    let b = build(dev, &case.rhs, "rhs")?;
    let got = a.matmul(&b).map_err(op_failed("matmul", &[&a, &b]))?;
    let (ra, rb) = (case.lhs.reference(), case.rhs.reference());
    let expected = linalg::matmul(dtype, &ra, &rb);
    let magnitude = linalg::matmul(DType::F64, &ra.abs(), &rb.abs());
    let k = *ra.shape.last().expect("rank >= 1");
    assert_close_scaled(
        &got,
        dtype,
        &expected,
        &magnitude,
        Tolerance::accumulation(dtype, k),
    )
    .map_err(with_inputs(&[&a, &b]))
}

/// Checks matmul on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    check_property(&format!("matmul {dtype}"), cases(dtype), |c| check(dev, c));
}
