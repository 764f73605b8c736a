//! Index of the maximum or minimum along one axis.
//!
//! Ties go to the first index; a NaN beats every number, so the first NaN wins (PyTorch's rule).

use super::num::Num;
use super::reduce::ReducePlan;
use crate::alloc::try_collect;
use crate::checks::unsupported;
use crate::parallel::split_reduction;
use crate::CpuStorage;
use std::ops::Range;
use tessera_core::{ArgReduceOp, BackendStorage, Layout, Result};

/// Marks a partial result that has seen no element yet.
const NONE: usize = usize::MAX;

/// The `I64` index of the extremum along `axis`; the output has the input shape with `axis`
/// set to 1. An empty axis has no extremum: an error (`tensor-core` rejects it beforehand too).
pub(crate) fn arg_reduce(
    op: ArgReduceOp,
    x: &CpuStorage,
    layout: &Layout,
    axis: usize,
) -> Result<CpuStorage> {
    layout.check_axis(op.name(), axis)?;
    if layout.dims()[axis] == 0 {
        return Err(tessera_core::Error::InvalidArgument {
            op: op.name(),
            msg: format!("axis {axis} of shape {} is empty", layout.shape()),
        });
    }
    let plan = ReducePlan::new(layout, &[axis], op.name())?;
    Ok(CpuStorage::I64(match x {
        CpuStorage::F32(v) => arg_typed(op, v, &plan)?,
        CpuStorage::F64(v) => arg_typed(op, v, &plan)?,
        CpuStorage::I64(v) => arg_typed(op, v, &plan)?,
        // The 16-bit floats are widened to f32 (exactly) before they get here.
        other => return Err(unsupported(op.name(), other.dtype())),
    }))
}

/// Dispatches on the operator, once.
fn arg_typed<T: Num>(op: ArgReduceOp, x: &[T], plan: &ReducePlan) -> Result<Vec<i64>> {
    match op {
        ArgReduceOp::ArgMax => run::<T, true>(x, plan),
        ArgReduceOp::ArgMin => run::<T, false>(x, plan),
    }
}

/// The arg-reduction over every output; `MAX` selects argmax.
fn run<T: Num, const MAX: bool>(x: &[T], plan: &ReducePlan) -> Result<Vec<i64>> {
    let [ks] = plan.kept().inner_strides();
    let [rs] = plan.reduced().inner_strides();
    let block = |outputs: Range<usize>, reduced: Range<usize>, dst: &mut [(T, usize)]| {
        plan.kept()
            .for_each_run(outputs.start, outputs.len(), |pos, [base], len| {
                for (j, d) in dst[pos..pos + len].iter_mut().enumerate() {
                    *d = scan::<T, MAX>(x, base + j * ks, rs, reduced.clone());
                }
            });
    };
    let merge = |acc: &mut (T, usize), part: (T, usize)| {
        if acc.1 == NONE
            || (part.1 != NONE && !acc.0.num_is_nan() && beats::<T, MAX>(part.0, acc.0))
        {
            *acc = part;
        }
    };
    let best = split_reduction(
        plan.out_len(),
        plan.reduced_len(),
        (T::ZERO, NONE),
        1,
        block,
        merge,
    )?;
    try_collect(
        best.len(),
        best.into_iter()
            .map(|(_, at)| if at == NONE { 0 } else { at as i64 }),
    )
}

/// True when `candidate` should replace the current best `best` (which is not NaN).
#[inline(always)]
fn beats<T: Num, const MAX: bool>(candidate: T, best: T) -> bool {
    candidate.num_is_nan()
        || if MAX {
            candidate > best
        } else {
            candidate < best
        }
}

/// The best value and its index among positions `range` of the run at `base` with `stride`.
fn scan<T: Num, const MAX: bool>(
    x: &[T],
    base: usize,
    stride: usize,
    range: Range<usize>,
) -> (T, usize) {
    if range.is_empty() {
        return (T::ZERO, NONE);
    }
    let mut best = x[base + range.start * stride];
    let mut at = range.start;
    if best.num_is_nan() {
        return (best, at);
    }
    for r in range.start + 1..range.end {
        let v = x[base + r * stride];
        if beats::<T, MAX>(v, best) {
            best = v;
            at = r;
            if v.num_is_nan() {
                break;
            }
        }
    }
    (best, at)
}
