//! index_select, gather and scatter_add.
//!
//! Out-of-range indices are detected on the device, without waiting for it: the kernel records
//! the first one in the device's error flag and skips the element; the next read-back
//! (`download`) or `synchronize` reports it as [`tessera_core::Error::IndexOutOfRange`] and clears
//! the flag. The op itself therefore returns `Ok` and the error surfaces at the read-back, like
//! CUDA's asynchronous errors; the offending output holds zeros where indices were bad.

use crate::checks::element_count;
use crate::driver::{Driver, ModuleKey};
use crate::kernels::MAX_RANK;
use crate::ops::elementwise::copy_strided;
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use crate::view::{MapPlan, View};
use std::sync::Arc;
use tessera_core::operand::{Gather, IndexSelect, Operand, ScatterAdd};
use tessera_core::{BackendStorage, DType, Error, Layout, Result};

/// `layout`'s strides with `axis` set to 0.
fn strides_without_axis(layout: &Layout, axis: usize) -> Vec<isize> {
    let mut strides = layout.strides().to_vec();
    strides[axis] = 0;
    strides
}

/// Output `[.., i, ..]` is input `[.., indices[i], ..]` along `axis`.
pub(crate) fn index_select<D: Driver>(
    rt: &Arc<Runtime<D>>,
    xs: IndexSelect<'_, GpuStorage<D>>,
) -> Result<GpuStorage<D>> {
    let (x, layout, axis) = (xs.x.storage(), xs.x.layout(), xs.axis);
    let (indices, il) = (xs.indices.storage(), xs.indices.layout());
    let (dims, strides) = (layout.dims(), layout.strides());
    let n_idx = il.numel();
    let inner_n = element_count(rt, dims[axis + 1..].iter().copied())?;
    let outer_n = element_count(rt, dims[..axis].iter().copied())?;
    let n = element_count(rt, [outer_n, n_idx, inner_n])?;
    let out = rt.alloc(x.dtype(), n)?;
    if n == 0 {
        return Ok(out);
    }
    let outer = MapPlan::new(&dims[..axis], [&strides[..axis]], [layout.offset()]);
    let inner = MapPlan::new(&dims[axis + 1..], [&strides[axis + 1..]], [0]);
    if outer.rank() > MAX_RANK || inner.rank() > MAX_RANK {
        let packed = copy_strided(rt, x, layout)?;
        let packed_layout = Layout::contiguous(dims);
        let packed = Operand::new("index_select", &packed, &packed_layout)?;
        return index_select(rt, IndexSelect::new(packed, axis, xs.indices)?);
    }
    let (Some(outer), Some(inner)) = (
        outer.chunks().first().copied(),
        inner.chunks().first().copied(),
    ) else {
        return Ok(out);
    };
    let args = [
        Arg::I64(n as i64),
        Arg::Buffer(x),
        Arg::View(outer.views[0]),
        Arg::View(inner.views[0]),
        Arg::I64(inner_n as i64),
        Arg::I64(strides[axis] as i64),
        Arg::I64(dims[axis] as i64),
        Arg::Buffer(indices),
        Arg::View(View::new(il.dims(), il.strides(), il.offset())),
        Arg::I64(n_idx as i64),
        Arg::Buffer(&out),
        Arg::ErrorFlag,
    ];
    rt.launch_1d(&ModuleKey::tensor(x.dtype()), "index_select", &args, n)?;
    Ok(out)
}

/// `out[p] = x[p with p[axis] = indices[p]]`; the output has the shape of `indices`.
pub(crate) fn gather<D: Driver>(
    rt: &Arc<Runtime<D>>,
    xs: Gather<'_, GpuStorage<D>>,
) -> Result<GpuStorage<D>> {
    let (x, layout, axis) = (xs.x.storage(), xs.x.layout(), xs.axis);
    let (indices, il) = (xs.indices.storage(), xs.indices.layout());
    let x_strides = strides_without_axis(layout, axis);
    let plan = MapPlan::new(
        il.dims(),
        [&x_strides, il.strides()],
        [layout.offset(), il.offset()],
    );
    let out = rt.alloc(x.dtype(), il.numel())?;
    let module = ModuleKey::tensor(x.dtype());
    for chunk in plan.chunks() {
        let args = [
            Arg::I64(chunk.len as i64),
            Arg::Buffer(x),
            Arg::View(chunk.views[0]),
            Arg::I64(layout.strides()[axis] as i64),
            Arg::I64(layout.dims()[axis] as i64),
            Arg::Buffer(indices),
            Arg::View(chunk.views[1]),
            Arg::Buffer(&out),
            Arg::I64(chunk.first as i64),
            Arg::ErrorFlag,
        ];
        rt.launch_1d(&module, "gather", &args, chunk.len)?;
    }
    Ok(out)
}

/// A contiguous copy of `base` with `src[p]` added at `p with p[axis] = indices[p]`. The
/// 16-bit floats arrive widened (tensor-core's dispatch): several sources may add into one
/// element, which must be summed in f32 and rounded once.
pub(crate) fn scatter_add<D: Driver>(
    rt: &Arc<Runtime<D>>,
    xs: ScatterAdd<'_, GpuStorage<D>>,
) -> Result<GpuStorage<D>> {
    const OP: &str = "scatter_add";
    let (base, bl, axis) = (xs.base.storage(), xs.base.layout(), xs.axis);
    let (indices, il) = (xs.indices.storage(), xs.indices.layout());
    let (src, sl) = (xs.src.storage(), xs.src.layout());
    if base.dtype() == DType::Bool || base.dtype().is_half() {
        return Err(Error::UnsupportedDType {
            op: OP,
            dtype: base.dtype(),
        });
    }
    let out = copy_strided(rt, base, bl)?;
    if il.numel() == 0 {
        return Ok(out);
    }
    let out_layout = Layout::contiguous(bl.shape().clone());
    // Columns: the indices' shape with the axis collapsed to one position.
    let mut col_dims = il.dims().to_vec();
    col_dims[axis] = 1;
    let plan = MapPlan::new(
        &col_dims,
        [il.strides(), sl.strides(), out_layout.strides()],
        [il.offset(), sl.offset(), 0],
    );
    let module = ModuleKey::tensor(base.dtype());
    for chunk in plan.chunks() {
        let args = [
            Arg::I64(chunk.len as i64),
            Arg::I64(il.dims()[axis] as i64),
            Arg::Buffer(indices),
            Arg::View(chunk.views[0]),
            Arg::I64(il.strides()[axis] as i64),
            Arg::Buffer(src),
            Arg::View(chunk.views[1]),
            Arg::I64(sl.strides()[axis] as i64),
            Arg::Buffer(&out),
            Arg::View(chunk.views[2]),
            Arg::I64(out_layout.strides()[axis] as i64),
            Arg::I64(bl.dims()[axis] as i64),
            Arg::ErrorFlag,
        ];
        rt.launch_1d(&module, "scatter_add", &args, chunk.len)?;
    }
    Ok(out)
}
