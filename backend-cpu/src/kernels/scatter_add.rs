//! `scatter_add`: PyTorch's per-element accumulate along one axis.
//!
//! Runs on the calling thread: several source elements may target one output element, and the
//! additions happen in the row-major order of `indices`, which keeps results deterministic.

use super::copy::copy_strided;
use super::index_check::{checked_index, index_values, strides_without_axis};
use super::num::Num;
use crate::checks::{dtype_mismatch, unsupported};
use crate::strided::StridedPlan;
use crate::CpuStorage;
use tessera_core::{DType, Layout, Result};

const OP: &str = "scatter_add";

/// A contiguous copy of `base` with `src[p]` added at `p with p[axis] = indices[p]`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn scatter_add(
    base: &CpuStorage,
    base_layout: &Layout,
    axis: usize,
    indices: &CpuStorage,
    indices_layout: &Layout,
    src: &CpuStorage,
    src_layout: &Layout,
) -> Result<CpuStorage> {
    base_layout.check_axis(OP, axis)?;
    indices_layout.check_same_shape(OP, src_layout)?;
    base_layout.check_indices_fit(OP, axis, indices_layout)?;
    let idx = index_values(OP, indices)?;
    let target = Target::new(base_layout, axis, indices_layout, src_layout);
    Ok(match (base, src) {
        (CpuStorage::F32(b), CpuStorage::F32(s)) => CpuStorage::F32(target.apply(b, idx, s)?),
        (CpuStorage::F64(b), CpuStorage::F64(s)) => CpuStorage::F64(target.apply(b, idx, s)?),
        (CpuStorage::I64(b), CpuStorage::I64(s)) => CpuStorage::I64(target.apply(b, idx, s)?),
        (CpuStorage::Bool(_), CpuStorage::Bool(_)) => return Err(unsupported(OP, DType::Bool)),
        _ => return Err(dtype_mismatch(OP, base, src)),
    })
}

/// The precomputed walk of one scatter.
struct Target<'a> {
    base_layout: &'a Layout,
    /// Walks `indices`, `src` and the output restricted to the indices' shape with `axis` at 0.
    plan: StridedPlan<3>,
    size: usize,
    axis_stride: usize,
}

impl<'a> Target<'a> {
    fn new(base_layout: &'a Layout, axis: usize, il: &Layout, sl: &Layout) -> Self {
        let out_layout = Layout::contiguous(base_layout.shape().clone());
        let out_strides = strides_without_axis(&out_layout, axis);
        Target {
            base_layout,
            plan: StridedPlan::new(
                il.dims(),
                [il.strides(), sl.strides(), &out_strides],
                [il.offset(), sl.offset(), 0],
            ),
            size: base_layout.dims()[axis],
            axis_stride: out_layout.strides()[axis] as usize,
        }
    }

    fn apply<T: Num>(&self, base: &[T], idx: &[i64], src: &[T]) -> Result<Vec<T>> {
        let mut out = copy_strided(base, self.base_layout)?;
        let [si, ss, so] = self.plan.inner_strides();
        self.plan
            .try_for_each_run(0, self.plan.numel(), |_, [oi, os, oo], len| {
                for t in 0..len {
                    let i = checked_index(OP, idx[oi + t * si], self.size)?;
                    let d = &mut out[oo + t * so + i * self.axis_stride];
                    *d = d.num_add(src[os + t * ss]);
                }
                Ok(())
            })?;
        Ok(out)
    }
}
