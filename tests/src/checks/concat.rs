//! Concatenation and stacking of 1..=4 tensors of any layouts.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::{indexing, RefArray};
use crate::runner::check_property;
use crate::strategies::{shape_with, special_rate, tensor_case, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, DType, Tensor};

/// `cat` or `stack`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinOp {
    /// `Tensor::cat(parts, axis)`.
    Cat,
    /// `Tensor::stack(parts, axis)`.
    Stack,
}

/// One join.
#[derive(Clone, Debug)]
pub struct ConcatCase {
    /// cat or stack.
    pub op: JoinOp,
    /// The axis as passed to `tensor-core` (may be negative).
    pub axis: isize,
    /// The resolved axis (of the output).
    pub resolved_axis: usize,
    /// The inputs.
    pub parts: Vec<TensorCase>,
}

/// Cases of `op` on `dtype`: for `Cat` the parts differ along the axis (lengths `0..=4`).
pub fn cases(op: JoinOp, dtype: DType) -> BoxedStrategy<ConcatCase> {
    let min_rank = if op == JoinOp::Cat { 1 } else { 0 };
    (
        shape_with(min_rank..=3, 0..=4),
        1usize..=4,
        special_rate(),
        any::<bool>(),
    )
        .prop_flat_map(move |(s, count, special, from_end)| {
            let out_rank = s.len() + usize::from(op == JoinOp::Stack);
            (
                Just(s),
                prop::collection::vec(0usize..=4, count),
                0..out_rank,
                Just(special),
                Just(from_end),
            )
        })
        .prop_flat_map(move |(s, lens, axis, special, from_end)| {
            let profile = ValueProfile::DEFAULT.with_specials(special);
            let parts: Vec<BoxedStrategy<TensorCase>> = lens
                .iter()
                .map(|&len| {
                    let mut shape = s.clone();
                    if op == JoinOp::Cat {
                        shape[axis] = len;
                    }
                    tensor_case(dtype, shape, profile)
                })
                .collect();
            let out_rank = s.len() + usize::from(op == JoinOp::Stack);
            let signed = if from_end {
                axis as isize - out_rank as isize
            } else {
                axis as isize
            };
            parts.prop_map(move |parts| ConcatCase {
                op,
                axis: signed,
                resolved_axis: axis,
                parts,
            })
        })
        .boxed()
}

/// Compares the join with the reference (exact: values are only moved).
pub fn check<B: Backend>(dev: &B, case: &ConcatCase) -> Result<(), String> {
    let dtype = case.parts[0].dtype;
    let tensors = case
        .parts
        .iter()
        .map(|p| build(dev, p, "part"))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Tensor<B>> = tensors.iter().collect();
    let got = match case.op {
        JoinOp::Cat => Tensor::cat(&refs, case.axis),
        JoinOp::Stack => Tensor::stack(&refs, case.axis),
    }
    .map_err(op_failed(&format!("{:?}", case.op), &refs))?;
    let arrays: Vec<RefArray> = case.parts.iter().map(|p| p.reference()).collect();
    let arrays: Vec<&RefArray> = arrays.iter().collect();
    let expected = match case.op {
        JoinOp::Cat => indexing::concat(&arrays, case.resolved_axis),
        JoinOp::Stack => indexing::stack(&arrays, case.resolved_axis),
    };
    assert_close(&got, dtype, &expected, Tolerance::EXACT).map_err(with_inputs(&refs))
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: JoinOp, dtype: DType) {
    check_property(&format!("{op:?} {dtype}"), cases(op, dtype), |c| {
        check(dev, c)
    });
}
