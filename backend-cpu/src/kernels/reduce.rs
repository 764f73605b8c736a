//! Reductions over any set of axes of an arbitrary strided layout.
//!
//! The axes are split into *kept* axes (in order: they index the output) and *reduced* axes
//! (sorted by decreasing stride, so the fastest-moving memory direction is innermost); each
//! group is simplified into its own [`StridedPlan`]. Each output element is then a reduction
//! over the reduced plan, starting at the kept plan's offset for that output. Three loop shapes
//! cover the cases, chosen per run of outputs:
//! * reduced elements contiguous (e.g. the last axis): pairwise slice reduction per output;
//! * outputs contiguous (e.g. the first axis of a row-major matrix): whole rows folded into a
//!   tile of accumulators, see [`reduce_rows`];
//! * anything else: a strided reduction per output.
//!
//! Work is split across threads by [`split_reduction`]: over outputs when there are many, over
//! the reduced range (with ordered merging of partials) for full reductions of large tensors.

use super::num::Num;
use super::reducer::{
    reduce_rows, reduce_slice, reduce_strided, MaxOp, MinOp, ProdOp, Reducer, SumOp,
};
use crate::checks::unsupported;
use crate::parallel::split_reduction;
use crate::strided::StridedPlan;
use crate::CpuStorage;
use std::ops::Range;
use tessera_core::{BackendStorage, Error, Layout, ReduceOp, Result};

/// Shortest run of contiguous outputs worth row-wise accumulation.
const MIN_ROW_RUN: usize = 8;
/// Smallest number of outputs per parallel chunk, so that row-wise accumulation keeps whole
/// tiles of contiguous outputs.
const ROW_TILE_OUTPUTS: usize = 64;

/// Reduces `x` over `axes`; the output has the input shape with the reduced axes set to 1.
pub(crate) fn reduce(
    op: ReduceOp,
    x: &CpuStorage,
    layout: &Layout,
    axes: &[usize],
) -> Result<CpuStorage> {
    let plan = ReducePlan::new(layout, axes, op.name())?;
    Ok(match x {
        CpuStorage::F32(v) => CpuStorage::F32(reduce_typed(op, v, &plan)?),
        CpuStorage::F64(v) => CpuStorage::F64(reduce_typed(op, v, &plan)?),
        CpuStorage::I64(v) => CpuStorage::I64(reduce_typed(op, v, &plan)?),
        // Bool is summed as i64 by the tensor layer; the 16-bit floats are widened to f32
        // before they get here (`tessera_core::dispatch`).
        other => return Err(unsupported(op.name(), other.dtype())),
    })
}

/// Dispatches on the operator, once, to a monomorphised kernel.
fn reduce_typed<T: Num>(op: ReduceOp, x: &[T], plan: &ReducePlan) -> Result<Vec<T>> {
    match op {
        ReduceOp::Sum => plan.run::<T, SumOp>(x),
        ReduceOp::Prod => plan.run::<T, ProdOp>(x),
        ReduceOp::Max => plan.run::<T, MaxOp>(x),
        ReduceOp::Min => plan.run::<T, MinOp>(x),
    }
}

/// The kept and reduced iteration spaces of one reduction.
pub(crate) struct ReducePlan {
    /// Walks the outputs; its offsets are where each output's reduced block starts.
    kept: StridedPlan<1>,
    /// Walks one reduced block, relative to the output's offset.
    reduced: StridedPlan<1>,
}

impl ReducePlan {
    /// Splits `layout` into kept and reduced axes. `axes` must be distinct and in range.
    pub(crate) fn new(layout: &Layout, axes: &[usize], op: &'static str) -> Result<Self> {
        let rank = layout.rank();
        let mut is_reduced = vec![false; rank];
        for &a in axes {
            if a >= rank || std::mem::replace(&mut is_reduced[a], true) {
                return Err(Error::InvalidArgument {
                    op,
                    msg: format!("axes {axes:?} are not distinct axes of a rank-{rank} tensor"),
                });
            }
        }
        let (dims, strides) = (layout.dims(), layout.strides());
        let kept_axes: Vec<usize> = (0..rank).filter(|&a| !is_reduced[a]).collect();
        let mut red_axes: Vec<usize> = (0..rank).filter(|&a| is_reduced[a]).collect();
        red_axes.sort_by_key(|&a| std::cmp::Reverse(strides[a]));
        let pick = |axes: &[usize]| -> (Vec<usize>, Vec<isize>) {
            (
                axes.iter().map(|&a| dims[a]).collect(),
                axes.iter().map(|&a| strides[a]).collect(),
            )
        };
        let (kd, ks) = pick(&kept_axes);
        let (rd, rs) = pick(&red_axes);
        Ok(ReducePlan {
            kept: StridedPlan::new(&kd, [&ks], [layout.offset()]),
            reduced: StridedPlan::new(&rd, [&rs], [0]),
        })
    }

    /// Number of outputs.
    pub(crate) fn out_len(&self) -> usize {
        self.kept.numel()
    }

    /// Number of elements reduced into each output.
    pub(crate) fn reduced_len(&self) -> usize {
        self.reduced.numel()
    }

    /// Runs the reduction `R` over all outputs.
    fn run<T: Num, R: Reducer<T>>(&self, x: &[T]) -> Result<Vec<T>> {
        split_reduction(
            self.out_len(),
            self.reduced_len(),
            R::IDENTITY,
            ROW_TILE_OUTPUTS,
            |outputs, reduced, dst| self.block::<T, R>(x, outputs, reduced, dst),
            |acc, part| *acc = R::combine(*acc, part),
        )
    }

    /// Writes into `dst` the reduction of each output in `outputs` over the positions
    /// `reduced` of its block.
    fn block<T: Num, R: Reducer<T>>(
        &self,
        x: &[T],
        outputs: Range<usize>,
        reduced: Range<usize>,
        dst: &mut [T],
    ) {
        let [ks] = self.kept.inner_strides();
        let [rs] = self.reduced.inner_strides();
        let reduced_contiguous = self.reduced.dims().len() == 1 && rs == 1;
        self.kept
            .for_each_run(outputs.start, outputs.len(), |pos, [base], len| {
                let out = &mut dst[pos..pos + len];
                if reduced_contiguous {
                    for (j, o) in out.iter_mut().enumerate() {
                        let b = base + j * ks;
                        *o = reduce_slice::<T, R>(&x[b + reduced.start..b + reduced.end]);
                    }
                } else if ks == 1 && len >= MIN_ROW_RUN {
                    reduce_rows::<T, R>(x, base, &self.reduced, reduced.clone(), out);
                } else {
                    for (j, o) in out.iter_mut().enumerate() {
                        let b = base + j * ks;
                        let mut acc = R::IDENTITY;
                        self.reduced
                            .for_each_run(reduced.start, reduced.len(), |_, [ro], rlen| {
                                acc = R::combine(acc, reduce_strided::<T, R>(x, b + ro, rs, rlen));
                            });
                        *o = acc;
                    }
                }
            });
    }

    /// The kept plan (walks outputs).
    pub(crate) fn kept(&self) -> &StridedPlan<1> {
        &self.kept
    }

    /// The reduced plan (walks one output's inputs).
    pub(crate) fn reduced(&self) -> &StridedPlan<1> {
        &self.reduced
    }
}
