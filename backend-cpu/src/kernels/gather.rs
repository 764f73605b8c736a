//! `gather`: PyTorch's per-element pick along one axis.

use super::index_check::{checked_index, index_values, strides_without_axis};
use crate::alloc::{try_zeroed, Zeroable};
use crate::parallel::try_fill_chunks;
use crate::storage::map_storage;
use crate::strided::StridedPlan;
use crate::CpuStorage;
use tessera_core::{Layout, Result};

const OP: &str = "gather";

/// `out[p] = x[p with p[axis] = indices[p]]`; the output has the shape of `indices`.
pub(crate) fn gather(
    x: &CpuStorage,
    layout: &Layout,
    axis: usize,
    indices: &CpuStorage,
    indices_layout: &Layout,
) -> Result<CpuStorage> {
    layout.check_axis(OP, axis)?;
    layout.check_indices_fit(OP, axis, indices_layout)?;
    let idx = index_values(OP, indices)?;
    // Walk the indices together with `x` restricted to their shape, its `axis` pinned at 0.
    let x_strides = strides_without_axis(layout, axis);
    let plan = StridedPlan::new(
        indices_layout.dims(),
        [indices_layout.strides(), &x_strides],
        [indices_layout.offset(), layout.offset()],
    );
    let size = layout.dims()[axis];
    let axis_stride = layout.strides()[axis] as usize;
    Ok(map_storage!(x, v => gather_typed(v, idx, &plan, size, axis_stride)?))
}

fn gather_typed<T: Zeroable + Send + Sync>(
    x: &[T],
    idx: &[i64],
    plan: &StridedPlan<2>,
    size: usize,
    axis_stride: usize,
) -> Result<Vec<T>> {
    let mut out = try_zeroed::<T>(plan.numel())?;
    let [si, sx] = plan.inner_strides();
    try_fill_chunks(&mut out, |start, chunk| {
        plan.try_for_each_run(start, chunk.len(), |pos, [oi, ox], len| {
            for (t, d) in chunk[pos..pos + len].iter_mut().enumerate() {
                let i = checked_index(OP, idx[oi + t * si], size)?;
                *d = x[ox + t * sx + i * axis_stride];
            }
            Ok(())
        })
    })?;
    Ok(out)
}
