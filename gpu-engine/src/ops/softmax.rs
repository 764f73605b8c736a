//! Fused softmax, log-softmax and log-sum-exp along the last axis (`softmax.cl.c`): one kernel
//! instead of the composite's seven to ten. Other axes, empty rows, non-float dtypes and inputs
//! whose outer dimensions do not simplify to `MAX_RANK` fall back to the composite.

use crate::driver::{Driver, ModuleKey};
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use crate::view::MapPlan;
use std::sync::Arc;
use tessera_core::kernels::MAX_RANK;
use tessera_core::{BackendStorage, Layout, Result};

/// Which function of the row (the kernel's `mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOp {
    /// `softmax`.
    Softmax = 0,
    /// `log_softmax`.
    LogSoftmax = 1,
    /// `logsumexp`.
    LogSumExp = 2,
}

/// The fused result and its contiguous layout, or None when the composite must run instead.
pub(crate) fn last_axis<D: Driver>(
    rt: &Arc<Runtime<D>>,
    op: RowOp,
    x: &GpuStorage<D>,
    layout: &Layout,
    axis: usize,
) -> Result<Option<(GpuStorage<D>, Layout)>> {
    let rank = layout.rank();
    if rank == 0 || axis != rank - 1 || layout.dims()[axis] == 0 || !x.dtype().is_float() {
        return Ok(None);
    }
    let (dims, strides) = (layout.dims(), layout.strides());
    let outer = MapPlan::new(&dims[..axis], [&strides[..axis]], [layout.offset()]);
    if outer.rank() > MAX_RANK {
        return Ok(None);
    }
    let Some(chunk) = outer.chunks().first().copied() else {
        return Ok(None);
    };
    let rows = outer.numel();
    let k = dims[axis];
    let mut out_dims = dims.to_vec();
    if op == RowOp::LogSumExp {
        out_dims[axis] = 1;
    }
    let out = rt.alloc(
        x.dtype(),
        if op == RowOp::LogSumExp {
            rows
        } else {
            rows * k
        },
    )?;
    let args = [
        Arg::I64(rows as i64),
        Arg::I64(k as i64),
        Arg::Buffer(x),
        Arg::View(chunk.views[0]),
        Arg::I64(strides[axis] as i64),
        Arg::Buffer(&out),
        Arg::I32(op as i32),
    ];
    rt.launch(
        &ModuleKey::tensor(x.dtype()),
        "softmax_rows",
        &args,
        [rows, 1, 1],
        [rt.info().reduce_group as usize, 1, 1],
    )?;
    Ok(Some((out, Layout::contiguous(out_dims))))
}
