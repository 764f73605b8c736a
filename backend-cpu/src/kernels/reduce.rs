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

use super::cast::cast;
use super::lanes::Lane;
use super::num::Num;
use super::reducer::{
    reduce_rows, reduce_slice, reduce_strided, MaxOp, MinOp, ProdOp, Reducer, SumOp,
};
use super::wide::map_contiguous;
use crate::alloc::{assume_init, try_uninit};
use crate::checks::unsupported;
use crate::parallel::split_reduction;
use crate::strided::StridedPlan;
use crate::CpuStorage;
use std::mem::MaybeUninit;
use std::ops::Range;
use tessera_core::{bf16, BackendStorage, DType, Error, Layout, ReduceOp, Result};

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
        // Read as f32 and rounded once, in the order of the widening path: a contiguous view
        // in place, any other first widened into a contiguous f32 copy, as that path does.
        CpuStorage::BF16(v) if layout.contiguous_range().is_some() => {
            CpuStorage::BF16(rounded(&reduce_typed::<bf16, f32>(op, v, &plan)?)?)
        }
        CpuStorage::BF16(_) => {
            let CpuStorage::F32(wide) = cast(x, layout, DType::F32)? else {
                unreachable!("a cast to f32 gives f32")
            };
            let contiguous = Layout::contiguous(layout.dims().to_vec());
            let plan = ReducePlan::new(&contiguous, axes, op.name())?;
            CpuStorage::BF16(rounded(&reduce_typed::<f32, f32>(op, &wide, &plan)?)?)
        }
        // Bool is summed as i64 by the tensor layer; f16 is widened to f32 before it gets here
        // (`tessera_core::dispatch`).
        other => return Err(unsupported(op.name(), other.dtype())),
    })
}

/// f32 results rounded once to bf16.
fn rounded(values: &[f32]) -> Result<Vec<bf16>> {
    let mut out = try_uninit::<bf16>(values.len())?;
    map_contiguous(&mut out, values, &|v: f32| {
        MaybeUninit::new(<bf16 as Lane<f32>>::store(v))
    });
    // SAFETY: `map_contiguous` wrote every element: `out` has the length of `values`.
    Ok(unsafe { assume_init(out) })
}

/// Dispatches on the operator, once, to a monomorphised kernel reading `S` and accumulating
/// in `T`.
fn reduce_typed<S: Lane<T>, T: Num>(op: ReduceOp, x: &[S], plan: &ReducePlan) -> Result<Vec<T>> {
    match op {
        ReduceOp::Sum => plan.run::<S, T, SumOp>(x),
        ReduceOp::Prod => plan.run::<S, T, ProdOp>(x),
        ReduceOp::Max => plan.run::<S, T, MaxOp>(x),
        ReduceOp::Min => plan.run::<S, T, MinOp>(x),
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
    fn run<S: Lane<T>, T: Num, R: Reducer<T>>(&self, x: &[S]) -> Result<Vec<T>> {
        split_reduction(
            self.out_len(),
            self.reduced_len(),
            R::IDENTITY,
            ROW_TILE_OUTPUTS,
            |outputs, reduced, dst| self.block::<S, T, R>(x, outputs, reduced, dst),
            |acc, part| *acc = R::combine(*acc, part),
        )
    }

    /// Writes into `dst` the reduction of each output in `outputs` over the positions
    /// `reduced` of its block.
    fn block<S: Lane<T>, T: Num, R: Reducer<T>>(
        &self,
        x: &[S],
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
                        *o = reduce_slice::<S, T, R>(&x[b + reduced.start..b + reduced.end]);
                    }
                } else if ks == 1 && len >= MIN_ROW_RUN {
                    reduce_rows::<S, T, R>(x, base, &self.reduced, reduced.clone(), out);
                } else {
                    for (j, o) in out.iter_mut().enumerate() {
                        let b = base + j * ks;
                        let mut acc = R::IDENTITY;
                        self.reduced
                            .for_each_run(reduced.start, reduced.len(), |_, [ro], rlen| {
                                acc =
                                    R::combine(acc, reduce_strided::<S, T, R>(x, b + ro, rs, rlen));
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

#[cfg(test)]
mod tests {
    //! bf16 reductions against the widening path written out: the view cast to a contiguous
    //! f32 tensor, reduced in f32, rounded once.
    use super::*;
    use tessera_core::Shape;

    fn widened_path(op: ReduceOp, x: &CpuStorage, layout: &Layout, axes: &[usize]) -> Vec<u16> {
        let wide = cast(x, layout, DType::F32).unwrap();
        let contiguous = Layout::contiguous(layout.dims().to_vec());
        let CpuStorage::F32(sum) = reduce(op, &wide, &contiguous, axes).unwrap() else {
            panic!("f32 in, f32 out")
        };
        sum.iter()
            .map(|&v| <bf16 as Lane<f32>>::store(v).to_bits())
            .collect()
    }

    fn check(len: usize, layouts: &[Layout]) {
        let values: Vec<bf16> = (0..len)
            .map(|i| match i % 97 {
                0 => bf16::NAN,
                13 => bf16::INFINITY,
                k => bf16::from_f32((k as f32 * 0.731).sin() * 3.0 + 1.0 / (1.0 + i as f32)),
            })
            .collect();
        let x = CpuStorage::BF16(values);
        for layout in layouts {
            let rank = layout.rank();
            let mut axis_sets: Vec<Vec<usize>> = (0..rank).map(|a| vec![a]).collect();
            axis_sets.push((0..rank).collect());
            axis_sets.push((1..rank).collect());
            axis_sets.push(vec![0, rank - 1]);
            for axes in &axis_sets {
                for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                    let CpuStorage::BF16(got) = reduce(op, &x, layout, axes).unwrap() else {
                        panic!("bf16 in, bf16 out")
                    };
                    let got: Vec<u16> = got.iter().map(|v| v.to_bits()).collect();
                    assert_eq!(
                        got,
                        widened_path(op, &x, layout, axes),
                        "{op:?} over {axes:?} of {layout:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn miri_bf16_reductions_equal_the_widened_f32_reductions_rounded_once() {
        let base = Layout::contiguous([3, 4, 5]);
        check(
            60,
            &[
                base.clone(),
                base.permute(&[2, 0, 1]).unwrap(),
                base.narrow(1, 1, 2).unwrap(),
                // Contiguous past an offset: reduced in place.
                base.narrow(0, 1, 2).unwrap(),
                Layout::contiguous([4, 1, 5])
                    .broadcast_to(&Shape::new([4, 3, 5]))
                    .unwrap(),
            ],
        );
    }

    #[test]
    fn bf16_reductions_equal_the_widened_f32_reductions_on_large_views() {
        // Past the pairwise block and the row tiles, split over threads: a convolution's bias
        // gradient shape ([n, c, h, w] over n, h, w) among them.
        let base = Layout::contiguous([16, 32, 28, 28]);
        check(
            16 * 32 * 28 * 28,
            &[
                base.clone(),
                base.permute(&[0, 2, 3, 1]).unwrap(),
                base.narrow(3, 3, 20).unwrap(),
            ],
        );
    }
}
