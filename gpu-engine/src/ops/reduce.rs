//! Reductions and arg-reductions.
//!
//! The axes are split into kept axes (which index the output, in order) and reduced axes; each
//! group is simplified into its own view, the kept view giving where an output's elements start
//! and the reduced view (offset 0) where each of them lies from there. When either group still
//! has more than `MAX_RANK` dimensions, the input is first copied contiguous in
//! `[kept..., reduced...]` order, which makes both groups one-dimensional.
//!
//! Kernel choice (see `reduce.cl.c`): one thread per output (`*_seq`) for short rows or for many
//! outputs that sit next to each other in memory; otherwise blocks with a tree in shared memory
//! (`*_tree`), split into several chunks per output plus a combining pass when there are too few
//! outputs to occupy every multiprocessor.

use crate::checks::element_count;
use crate::driver::{Driver, ModuleKey};
use crate::kernels::MAX_RANK;
use crate::ops::elementwise::copy_strided;
use crate::ops::transfer::full;
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use crate::view::{MapPlan, View};
use std::sync::Arc;
use tessera_core::{ArgReduceOp, BackendStorage, DType, Error, Layout, ReduceOp, Result};

/// Rows at most this long are reduced by one thread each.
const SHORT_ROW: usize = 16;
/// From this many outputs, contiguous outputs get one thread each whatever the row length.
const MANY_OUTPUTS: usize = 1024;

/// The kept and reduced views of one reduction.
struct RowPlan {
    /// Number of outputs.
    m: usize,
    /// Elements per output.
    k: usize,
    kept: View,
    reduced: View,
    /// Stride between consecutive outputs' first elements when the kept group is 1-d.
    kept_inner_stride: Option<isize>,
}

impl RowPlan {
    /// The plan (for `m, k > 0`), or None when a group has more than `MAX_RANK` dimensions.
    fn new(layout: &Layout, reduced_axes: &[usize]) -> Option<RowPlan> {
        let (dims, strides) = (layout.dims(), layout.strides());
        let is_reduced = |a: usize| reduced_axes.contains(&a);
        let pick = |keep: bool| -> (Vec<usize>, Vec<isize>) {
            (0..layout.rank())
                .filter(|&a| is_reduced(a) != keep)
                .map(|a| (dims[a], strides[a]))
                .unzip()
        };
        let (kd, ks) = pick(true);
        let (rd, rs) = pick(false);
        let kept = MapPlan::new(&kd, [&ks], [layout.offset()]);
        let reduced = MapPlan::new(&rd, [&rs], [0]);
        if kept.rank() > MAX_RANK || reduced.rank() > MAX_RANK {
            return None;
        }
        let kept_view = kept.chunks().first()?.views[0];
        let reduced_view = reduced.chunks().first()?.views[0];
        Some(RowPlan {
            m: kept.numel(),
            k: reduced.numel(),
            kept: kept_view,
            reduced: reduced_view,
            kept_inner_stride: kept.inner_stride(),
        })
    }

    /// Whether one thread per output is the better kernel shape.
    fn sequential(&self, short_row: usize) -> bool {
        self.k <= short_row || (self.m >= MANY_OUTPUTS && self.kept_inner_stride == Some(1))
    }
}

/// `layout`'s elements permuted to `[kept..., reduced...]` and copied contiguous, as a 2-d
/// `[m, k]` problem.
fn packed_rows<D: Driver>(
    rt: &Arc<Runtime<D>>,
    x: &GpuStorage<D>,
    layout: &Layout,
    axes: &[usize],
) -> Result<(GpuStorage<D>, Layout)> {
    let mut perm: Vec<usize> = (0..layout.rank()).filter(|a| !axes.contains(a)).collect();
    perm.extend_from_slice(axes);
    let permuted = layout.permute(&perm)?;
    let packed = copy_strided(rt, x, &permuted)?;
    let k = element_count(rt, axes.iter().map(|&a| layout.dims()[a]))?;
    let m = layout.numel() / k.max(1);
    Ok((packed, Layout::contiguous([m, k])))
}

/// Checks that `axes` are distinct axes of `layout`.
fn check_axes(op: &'static str, layout: &Layout, axes: &[usize]) -> Result<()> {
    let rank = layout.rank();
    let mut seen = vec![false; rank];
    for &a in axes {
        if a >= rank || std::mem::replace(&mut seen[a], true) {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("axes {axes:?} are not distinct axes of a rank-{rank} tensor"),
            });
        }
    }
    Ok(())
}

/// Number of outputs: the product of the kept dimensions.
fn kept_count<D: Driver>(rt: &Runtime<D>, layout: &Layout, axes: &[usize]) -> Result<usize> {
    let kept = layout
        .dims()
        .iter()
        .enumerate()
        .filter(|(a, _)| !axes.contains(a))
        .map(|(_, &d)| d);
    element_count(rt, kept)
}

/// The reduce kernel of `op` in shape `seq` or `tree`.
fn reduce_kernel(op: ReduceOp, sequential: bool) -> &'static str {
    match (op, sequential) {
        (ReduceOp::Sum, true) => "reduce_sum_seq",
        (ReduceOp::Sum, false) => "reduce_sum_tree",
        (ReduceOp::Prod, true) => "reduce_prod_seq",
        (ReduceOp::Prod, false) => "reduce_prod_tree",
        (ReduceOp::Max, true) => "reduce_max_seq",
        (ReduceOp::Max, false) => "reduce_max_tree",
        (ReduceOp::Min, true) => "reduce_min_seq",
        (ReduceOp::Min, false) => "reduce_min_tree",
    }
}

/// Reduces `x` over `axes`; the output has the input's shape with those axes set to 1.
pub(crate) fn reduce<D: Driver>(
    rt: &Arc<Runtime<D>>,
    op: ReduceOp,
    x: &GpuStorage<D>,
    layout: &Layout,
    axes: &[usize],
) -> Result<GpuStorage<D>> {
    check_axes(op.name(), layout, axes)?;
    let dtype = x.dtype();
    if dtype == DType::Bool {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype,
        });
    }
    let m = kept_count(rt, layout, axes)?;
    // With outputs, the input's element count (which fits) is `m * k`.
    let k = if m == 0 {
        0
    } else {
        element_count(rt, axes.iter().map(|&a| layout.dims()[a]))?
    };
    if m == 0 || k == 0 {
        let identity = match op {
            ReduceOp::Sum => 0.0,
            ReduceOp::Prod => 1.0,
            ReduceOp::Max => f64::NEG_INFINITY,
            ReduceOp::Min => f64::INFINITY,
        };
        return full(rt, m, dtype, identity);
    }
    let Some(plan) = RowPlan::new(layout, axes) else {
        let (packed, rows) = packed_rows(rt, x, layout, axes)?;
        return reduce(rt, op, &packed, &rows, &[1]);
    };
    let module = ModuleKey::tensor(dtype);
    let out = rt.alloc(dtype, m)?;
    if plan.sequential(SHORT_ROW) {
        let args = [
            Arg::I64(m as i64),
            Arg::I64(k as i64),
            Arg::Buffer(x),
            Arg::View(plan.kept),
            Arg::View(plan.reduced),
            Arg::Buffer(&out),
        ];
        rt.launch_1d(&module, reduce_kernel(op, true), &args, m)?;
        return Ok(out);
    }
    let group = rt.info().reduce_group as usize;
    // Enough blocks to occupy every multiprocessor a few times over.
    let wanted_groups = 4 * rt.info().compute_units.max(1);
    // A 16-bit reduction is never split: its partials would be rounded to 16 bits.
    let chunks = if m >= wanted_groups || dtype.is_half() {
        1
    } else {
        wanted_groups.div_ceil(m).min(k.div_ceil(4 * group)).max(1)
    };
    let partials = if chunks == 1 {
        None
    } else {
        Some(rt.alloc(dtype, m * chunks)?)
    };
    let tree_out = partials.as_ref().unwrap_or(&out);
    let args = [
        Arg::I64(m as i64),
        Arg::I64(k as i64),
        Arg::Buffer(x),
        Arg::View(plan.kept),
        Arg::View(plan.reduced),
        Arg::Buffer(tree_out),
        Arg::I64(chunks as i64),
    ];
    rt.launch(
        &module,
        reduce_kernel(op, false),
        &args,
        [m * chunks, 1, 1],
        [group, 1, 1],
    )?;
    if let Some(partials) = &partials {
        let args = [
            Arg::I64(m as i64),
            Arg::I64(chunks as i64),
            Arg::Buffer(partials),
            Arg::View(View::new(&[m], &[chunks as isize], 0)),
            Arg::View(View::contiguous(chunks, 0)),
            Arg::Buffer(&out),
        ];
        rt.launch_1d(&module, reduce_kernel(op, true), &args, m)?;
    }
    Ok(out)
}

/// Index of the extremum along `axis`, as i64.
pub(crate) fn arg_reduce<D: Driver>(
    rt: &Arc<Runtime<D>>,
    op: ArgReduceOp,
    x: &GpuStorage<D>,
    layout: &Layout,
    axis: usize,
) -> Result<GpuStorage<D>> {
    layout.check_axis(op.name(), axis)?;
    let dtype = x.dtype();
    if dtype == DType::Bool {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype,
        });
    }
    let k = layout.dims()[axis];
    // An empty axis has no extremum: an error, as on the CPU (tensor-core checks it before
    // calling, but the method is public).
    if k == 0 {
        return Err(Error::InvalidArgument {
            op: op.name(),
            msg: format!("axis {axis} of shape {} is empty", layout.shape()),
        });
    }
    let m = kept_count(rt, layout, &[axis])?;
    if m == 0 {
        return full(rt, m, DType::I64, 0.0);
    }
    let Some(plan) = RowPlan::new(layout, &[axis]) else {
        let (packed, rows) = packed_rows(rt, x, layout, &[axis])?;
        return arg_reduce(rt, op, &packed, &rows, 1);
    };
    let sequential = plan.sequential(4 * SHORT_ROW);
    let kernel = match (op, sequential) {
        (ArgReduceOp::ArgMax, true) => "argmax_seq",
        (ArgReduceOp::ArgMax, false) => "argmax_tree",
        (ArgReduceOp::ArgMin, true) => "argmin_seq",
        (ArgReduceOp::ArgMin, false) => "argmin_tree",
    };
    let out = rt.alloc(DType::I64, m)?;
    let args = [
        Arg::I64(m as i64),
        Arg::I64(k as i64),
        Arg::Buffer(x),
        Arg::View(plan.kept),
        Arg::View(plan.reduced),
        Arg::Buffer(&out),
    ];
    let module = ModuleKey::tensor(dtype);
    if sequential {
        rt.launch_1d(&module, kernel, &args, m)?;
    } else {
        let group = rt.info().reduce_group as usize;
        rt.launch(&module, kernel, &args, [m, 1, 1], [group, 1, 1])?;
    }
    Ok(out)
}
