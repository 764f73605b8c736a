//! argmax / argmin along one axis: first index on ties, the first NaN wins.

use super::{build, op_failed, signed_axis, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::{reduce, views};
use crate::runner::check_property;
use crate::strategies::{shape_with, special_rate, tensor_case, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{ArgReduceOp, Backend, DType};

/// One arg-reduction.
#[derive(Clone, Debug)]
pub struct ArgReduceCase {
    /// argmax or argmin.
    pub op: ArgReduceOp,
    /// The resolved axis.
    pub axis: usize,
    /// Whether the axis is passed counted from the end.
    pub axis_from_end: bool,
    /// Whether the axis is kept as size 1.
    pub keepdim: bool,
    /// The input (non-empty along `axis`).
    pub input: TensorCase,
}

/// Cases of `op` on `dtype`, with many ties (small integers) and a random rate of specials.
pub fn cases(op: ArgReduceOp, dtype: DType) -> BoxedStrategy<ArgReduceCase> {
    (
        shape_with(1..=4, 0..=5),
        special_rate(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_flat_map(|(s, special, from_end, keepdim)| {
            let rank = s.len();
            (
                Just(s),
                0..rank,
                Just(special),
                Just(from_end),
                Just(keepdim),
            )
        })
        .prop_flat_map(move |(mut s, axis, special, axis_from_end, keepdim)| {
            s[axis] = s[axis].max(1);
            let profile = ValueProfile {
                int_range: 2,
                ..ValueProfile::DEFAULT.with_specials(special)
            };
            tensor_case(dtype, s, profile).prop_map(move |input| ArgReduceCase {
                op,
                axis,
                axis_from_end,
                keepdim,
                input,
            })
        })
        .boxed()
}

/// Compares `argmax`/`argmin` with the reference (exact `i64`).
pub fn check<B: Backend>(dev: &B, case: &ArgReduceCase) -> Result<(), String> {
    let x = build(dev, &case.input, "input")?;
    let axis = signed_axis(case.axis, x.rank(), case.axis_from_end);
    let got = match case.op {
        ArgReduceOp::ArgMax => x.argmax(axis, case.keepdim),
        ArgReduceOp::ArgMin => x.argmin(axis, case.keepdim),
    }
    .map_err(op_failed(case.op.name(), &[&x]))?;
    let input = case.input.reference();
    let kept = reduce::arg_reduce(case.op, &input, case.axis);
    let expected = views::reshape(
        &kept,
        &reduce::reduced_shape(&input.shape, &[case.axis], case.keepdim),
    );
    assert_close(&got, DType::I64, &expected, Tolerance::EXACT).map_err(with_inputs(&[&x]))
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: ArgReduceOp, dtype: DType) {
    check_property(&format!("{} {dtype}", op.name()), cases(op, dtype), |c| {
        check(dev, c)
    });
}
