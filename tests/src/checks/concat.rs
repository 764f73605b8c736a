//! Concatenation and stacking of 1..=4 tensors of any layouts.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::{indexing, RefArray};
use crate::runner::check_property_systematic;
use crate::strategies::{
    shape_with, special_rate, tensor_case, tensor_case_in_regime, LayoutKind, Pattern, TensorCase,
    ValueProfile, ValueRegime,
};
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

/// Three rank-3 parts (sizes `2..=4`, for `Cat` `1..=3` along the axis) joined along `axis`
/// (`None`: random), part `laid_out` laid out as `kind`, the others contiguous.
fn structured(
    op: JoinOp,
    dtype: DType,
    axis: Option<usize>,
    laid_out: usize,
    kind: LayoutKind,
    regime: ValueRegime,
) -> BoxedStrategy<ConcatCase> {
    let out_rank = 3 + usize::from(op == JoinOp::Stack);
    let axis = match axis {
        Some(a) => Just(a).boxed(),
        None => (0..out_rank).boxed(),
    };
    (
        prop::collection::vec(2usize..=4, 3),
        prop::collection::vec(1usize..=3, 3),
        axis,
    )
        .prop_flat_map(move |(s, lens, axis)| {
            let parts: Vec<BoxedStrategy<TensorCase>> = (0..3)
                .map(|i| {
                    let mut shape = s.clone();
                    if op == JoinOp::Cat {
                        shape[axis] = lens[i];
                    }
                    let k = if i == laid_out {
                        kind
                    } else {
                        LayoutKind::Contiguous
                    };
                    tensor_case_in_regime(dtype, shape, k, regime)
                })
                .collect();
            parts.prop_map(move |parts| ConcatCase {
                op,
                axis: axis as isize,
                resolved_axis: axis,
                parts,
            })
        })
        .boxed()
}

/// The systematic cases of `op` on `dtype`: every layout kind of the first and the last of
/// three parts, every axis, and the special values (copied bit for bit).
pub fn patterns(op: JoinOp, dtype: DType) -> Vec<Pattern<ConcatCase>> {
    let mut out = Vec::new();
    for kind in LayoutKind::ALL {
        for part in [0, 2] {
            out.push(Pattern::new(
                format!("part {part} {kind}"),
                structured(op, dtype, None, part, kind, ValueRegime::Ordinary),
            ));
        }
    }
    let out_rank = 3 + usize::from(op == JoinOp::Stack);
    for axis in 0..out_rank {
        out.push(Pattern::new(
            format!("axis {axis} of {out_rank}"),
            structured(
                op,
                dtype,
                Some(axis),
                0,
                LayoutKind::Contiguous,
                ValueRegime::Ordinary,
            ),
        ));
    }
    out.push(Pattern::new(
        ValueRegime::Specials.name(),
        structured(
            op,
            dtype,
            None,
            0,
            LayoutKind::Contiguous,
            ValueRegime::Specials,
        ),
    ));
    out
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
    check_property_systematic(
        &format!("{op:?} {dtype}"),
        patterns(op, dtype),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
