//! softmax, log_softmax and logsumexp along one axis.

use super::{build, op_failed, signed_axis, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::{reduce::reduced_shape, softmax, views};
use crate::runner::check_property;
use crate::strategies::{
    shape_with, special_rate, tensor_case, TensorCase, ValueProfile, SPECIALS_NO_POS_INF,
};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// Which member of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftmaxOp {
    /// `softmax(axis)`.
    Softmax,
    /// `log_softmax(axis)`.
    LogSoftmax,
    /// `logsumexp(axis, keepdim)`.
    LogSumExp {
        /// Keep the axis as size 1.
        keepdim: bool,
    },
}

/// One softmax-family op.
#[derive(Clone, Debug)]
pub struct SoftmaxCase {
    /// The op.
    pub op: SoftmaxOp,
    /// Resolved axis (may be empty: softmax is then empty and logsumexp `-inf`).
    pub axis: usize,
    /// Whether the axis is passed counted from the end.
    pub axis_from_end: bool,
    /// The input.
    pub input: TensorCase,
}

/// Cases on `dtype`, empty axes included. Specials are NaN, `-inf` (masking) and `-0`; `+inf` is left out because
/// its result is a convention (NaN here, 1 in the mathematical limit).
pub fn cases(dtype: DType) -> BoxedStrategy<SoftmaxCase> {
    let op = prop_oneof![
        Just(SoftmaxOp::Softmax),
        Just(SoftmaxOp::LogSoftmax),
        any::<bool>().prop_map(|keepdim| SoftmaxOp::LogSumExp { keepdim }),
    ];
    (shape_with(1..=4, 0..=5), special_rate(), op, any::<bool>())
        .prop_flat_map(|(s, special, op, from_end)| {
            let rank = s.len();
            (Just(s), 0..rank, Just(special), Just(op), Just(from_end))
        })
        .prop_flat_map(move |(s, axis, special, op, axis_from_end)| {
            let profile = ValueProfile {
                specials: SPECIALS_NO_POS_INF,
                ..ValueProfile::DEFAULT.with_specials(special)
            };
            tensor_case(dtype, s, profile).prop_map(move |input| SoftmaxCase {
                op,
                axis,
                axis_from_end,
                input,
            })
        })
        .boxed()
}

/// Compares the op with the reference (transcendental tolerance, widened by the row length).
pub fn check<B: Backend>(dev: &B, case: &SoftmaxCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let x = build(dev, &case.input, "input")?;
    let axis = signed_axis(case.axis, x.rank(), case.axis_from_end);
    let input = case.input.reference();
    let (got, expected) = match case.op {
        SoftmaxOp::Softmax => (x.softmax(axis), softmax::softmax(dtype, &input, case.axis)),
        SoftmaxOp::LogSoftmax => (
            x.log_softmax(axis),
            softmax::log_softmax(dtype, &input, case.axis),
        ),
        SoftmaxOp::LogSumExp { keepdim } => {
            let kept = softmax::logsumexp(dtype, &input, case.axis);
            let shape = reduced_shape(&input.shape, &[case.axis], keepdim);
            (x.logsumexp(axis, keepdim), views::reshape(&kept, &shape))
        }
    };
    let got = got.map_err(op_failed(&format!("{:?}", case.op), &[&x]))?;
    let t = Tolerance::transcendental(dtype);
    let row = Tolerance::accumulation(dtype, input.shape[case.axis]);
    let tol = Tolerance::loose(2.0 * t.abs, t.rel + row.rel);
    assert_close(&got, dtype, &expected, tol).map_err(with_inputs(&[&x]))
}

/// Checks the family on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    check_property(&format!("softmax family {dtype}"), cases(dtype), |c| {
        check(dev, c)
    });
}
