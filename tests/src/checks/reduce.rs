//! Sum, product, max and min over random axis subsets, with and without kept dimensions.

use super::{build, op_failed, signed_axis, with_inputs};
use crate::compare::{assert_close, assert_close_scaled, Tolerance};
use crate::reference::{reduce, views, RefArray};
use crate::runner::check_property;
use crate::strategies::{axis_subset, shape, special_rate, tensor_case, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, DType, ReduceOp};

/// One reduction.
#[derive(Clone, Debug)]
pub struct ReduceCase {
    /// The reduction.
    pub op: ReduceOp,
    /// The axes passed to `tensor-core` (possibly negative; empty means every axis).
    pub axes: Vec<isize>,
    /// Whether reduced axes are kept as size 1.
    pub keepdim: bool,
    /// The input.
    pub input: TensorCase,
}

impl ReduceCase {
    /// The resolved, sorted axes the reference reduces over.
    pub fn resolved_axes(&self) -> Vec<usize> {
        let rank = self.input.shape().len();
        if self.axes.is_empty() {
            return (0..rank).collect();
        }
        let mut a: Vec<usize> = self
            .axes
            .iter()
            .map(|&x| {
                if x < 0 {
                    (x + rank as isize) as usize
                } else {
                    x as usize
                }
            })
            .collect();
        a.sort_unstable();
        a
    }
}

/// Cases of `op` on `dtype`. Max and min never reduce an empty axis (an error, checked in
/// `errors.rs`); products use values in `[-2, 2]` so that they stay finite.
pub fn cases(op: ReduceOp, dtype: DType) -> BoxedStrategy<ReduceCase> {
    (shape(), special_rate(), any::<bool>())
        .prop_flat_map(move |(s, special, keepdim)| {
            let rank = s.len();
            (
                Just(s),
                axis_subset(rank),
                prop::collection::vec(any::<bool>(), rank),
                Just(special),
                Just(keepdim),
            )
        })
        .prop_flat_map(move |(mut s, axes, from_end, special, keepdim)| {
            let reduced: Vec<usize> = if axes.is_empty() {
                (0..s.len()).collect()
            } else {
                axes.clone()
            };
            if matches!(op, ReduceOp::Max | ReduceOp::Min) {
                for &a in &reduced {
                    s[a] = s[a].max(1);
                }
            }
            let rank = s.len();
            let signed: Vec<isize> = axes
                .iter()
                .map(|&a| signed_axis(a, rank, from_end[a]))
                .collect();
            let mut profile = ValueProfile::DEFAULT.with_specials(special);
            if op == ReduceOp::Prod {
                profile.magnitude = 2.0;
                profile.int_range = 2;
            }
            tensor_case(dtype, s, profile).prop_map(move |input| ReduceCase {
                op,
                axes: signed.clone(),
                keepdim,
                input,
            })
        })
        .boxed()
}

/// The expected result of `case` with the requested `keepdim`.
fn reshape_for_keepdim(
    kept: RefArray,
    input_shape: &[usize],
    axes: &[usize],
    keepdim: bool,
) -> RefArray {
    views::reshape(&kept, &reduce::reduced_shape(input_shape, axes, keepdim))
}

/// Compares `x.reduce(op, axes, keepdim)` with the reference. Bool inputs reduce as i64.
pub fn check<B: Backend>(dev: &B, case: &ReduceCase) -> Result<(), String> {
    let x = build(dev, &case.input, "input")?;
    let got = x
        .reduce(case.op, &case.axes, case.keepdim)
        .map_err(op_failed(case.op.name(), &[&x]))?;
    let input = case.input.reference();
    let axes = case.resolved_axes();
    let dtype = match case.input.dtype {
        DType::Bool => DType::I64,
        d => d,
    };
    let kept = reduce::reduce(case.op, dtype, &input, &axes);
    let expected = reshape_for_keepdim(kept, &input.shape, &axes, case.keepdim);
    let terms = reduce::group_len(&input.shape, &axes);
    let tol = Tolerance::accumulation(dtype, terms);
    let result = match case.op {
        ReduceOp::Sum => {
            let magnitude = reduce::reduce(ReduceOp::Sum, DType::F64, &input.abs(), &axes);
            let magnitude = reshape_for_keepdim(magnitude, &input.shape, &axes, case.keepdim);
            assert_close_scaled(&got, dtype, &expected, &magnitude, tol)
        }
        ReduceOp::Prod => assert_close(&got, dtype, &expected, tol),
        // A max or min is one of the inputs: exact (the sign of a zero result is unspecified).
        ReduceOp::Max | ReduceOp::Min => {
            assert_close(&got, dtype, &expected, Tolerance::loose(0.0, 0.0))
        }
    };
    result.map_err(with_inputs(&[&x]))
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: ReduceOp, dtype: DType) {
    check_property(
        &format!("reduce {} {dtype}", op.name()),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
