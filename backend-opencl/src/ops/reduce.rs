//! Reductions and arg-reductions.
//!
//! The axes are split into kept axes (which index the output, in order) and reduced axes; each
//! group is simplified into its own view, the kept view giving where an output's elements start
//! and the reduced view (offset 0) where each of them lies from there. When either group still
//! has more than `MAX_RANK` dimensions, the input is first copied contiguous in
//! `[kept..., reduced...]` order, which makes both groups one-dimensional.
//!
//! Kernel choice (see `reduce.cl.c`): one work-item per output (`*_seq`) for short rows or for
//! many outputs that sit next to each other in memory; otherwise work-groups with a tree in local
//! memory (`*_tree`), split into several chunks per output plus a combining pass when there are
//! too few outputs to occupy the device.

use crate::ops::elementwise::copy_strided;
use crate::ops::transfer::full;
use crate::runtime::{Arg, ProgramKey, Runtime};
use crate::storage::OpenClStorage;
use crate::view::{MapPlan, View};
use std::sync::Arc;
use tensor_core::kernels::MAX_RANK;
use tensor_core::{ArgReduceOp, BackendStorage, DType, Error, Layout, ReduceOp, Result};

/// Rows at most this long are reduced by one work-item each.
const SHORT_ROW: usize = 16;
/// From this many outputs, contiguous outputs get one work-item each whatever the row length.
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
    /// The plan, or None when a group has more than `MAX_RANK` dimensions.
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
        let kept_chunks = kept.chunks();
        let reduced_chunks = reduced.chunks();
        let kept_view = kept_chunks.first()?.views[0];
        let reduced_view = reduced_chunks.first()?.views[0];
        Some(RowPlan {
            m: kept.numel(),
            k: reduced.numel(),
            kept: kept_view,
            reduced: reduced_view,
            kept_inner_stride: kept.inner_stride(),
        })
    }

    /// Whether one work-item per output is the better kernel shape.
    fn sequential(&self, short_row: usize) -> bool {
        self.k <= short_row || (self.m >= MANY_OUTPUTS && self.kept_inner_stride == Some(1))
    }
}

/// The layout of `layout`'s elements permuted to `[kept..., reduced...]` and copied contiguous,
/// as a 2-d `[m, k]` problem.
fn packed_rows(
    rt: &Arc<Runtime>,
    x: &OpenClStorage,
    layout: &Layout,
    axes: &[usize],
) -> Result<(OpenClStorage, Layout)> {
    let mut perm: Vec<usize> = (0..layout.rank()).filter(|a| !axes.contains(a)).collect();
    perm.extend_from_slice(axes);
    let permuted = layout.permute(&perm)?;
    let packed = copy_strided(rt, x, &permuted)?;
    let (m, k) = split_sizes(layout, axes);
    Ok((packed, Layout::contiguous([m, k])))
}

/// `(outputs, elements per output)`: the products of the kept and of the reduced dimensions.
fn split_sizes(layout: &Layout, axes: &[usize]) -> (usize, usize) {
    let dims = layout.dims();
    let kept = (0..dims.len())
        .filter(|a| !axes.contains(a))
        .map(|a| dims[a])
        .product();
    let reduced = axes.iter().map(|&a| dims[a]).product();
    (kept, reduced)
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

/// Reduces `x` over `axes`; the output has the input's shape with those axes set to 1.
pub(crate) fn reduce(
    rt: &Arc<Runtime>,
    op: ReduceOp,
    x: &OpenClStorage,
    layout: &Layout,
    axes: &[usize],
) -> Result<OpenClStorage> {
    check_axes(op.name(), layout, axes)?;
    let dtype = x.dtype();
    if dtype == DType::Bool {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype,
        });
    }
    let (m, k) = split_sizes(layout, axes);
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
    let name = op.name();
    let key = ProgramKey::tensor(dtype);
    let kernel = |shape: &str| -> &'static str {
        match (name, shape) {
            ("sum", "seq") => "reduce_sum_seq",
            ("sum", _) => "reduce_sum_tree",
            ("prod", "seq") => "reduce_prod_seq",
            ("prod", _) => "reduce_prod_tree",
            ("max", "seq") => "reduce_max_seq",
            ("max", _) => "reduce_max_tree",
            ("min", "seq") => "reduce_min_seq",
            _ => "reduce_min_tree",
        }
    };
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
        rt.launch_1d(&key, kernel("seq"), &args, m)?;
        return Ok(out);
    }
    let group = rt.reduce_group;
    // Enough work-groups to occupy every compute unit a few times over.
    let wanted_groups = 4 * rt.info.compute_units.max(1) as usize;
    let chunks = if m >= wanted_groups {
        1
    } else {
        wanted_groups.div_ceil(m).min(k.div_ceil(4 * group)).max(1)
    };
    let target = if chunks == 1 {
        None
    } else {
        Some(rt.alloc(dtype, m * chunks)?)
    };
    let tree_out = target.as_ref().unwrap_or(&out);
    let args = [
        Arg::I64(m as i64),
        Arg::I64(k as i64),
        Arg::Buffer(x),
        Arg::View(plan.kept),
        Arg::View(plan.reduced),
        Arg::Buffer(tree_out),
        Arg::I64(chunks as i64),
    ];
    rt.launch(&key, kernel("tree"), &args, &[m * chunks * group], &[group])?;
    if let Some(partials) = &target {
        let args = [
            Arg::I64(m as i64),
            Arg::I64(chunks as i64),
            Arg::Buffer(partials),
            Arg::View(View::new(&[m], &[chunks as isize], 0)),
            Arg::View(View::contiguous(chunks, 0)),
            Arg::Buffer(&out),
        ];
        rt.launch_1d(&key, kernel("seq"), &args, m)?;
    }
    Ok(out)
}

/// Index of the extremum along `axis`, as i64.
pub(crate) fn arg_reduce(
    rt: &Arc<Runtime>,
    op: ArgReduceOp,
    x: &OpenClStorage,
    layout: &Layout,
    axis: usize,
) -> Result<OpenClStorage> {
    crate::checks::check_axis(op.name(), layout, axis)?;
    let dtype = x.dtype();
    if dtype == DType::Bool {
        return Err(Error::UnsupportedDType {
            op: op.name(),
            dtype,
        });
    }
    let (m, k) = split_sizes(layout, &[axis]);
    if m == 0 || k == 0 {
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
    let key = ProgramKey::tensor(dtype);
    if sequential {
        rt.launch_1d(&key, kernel, &args, m)?;
    } else {
        let group = rt.reduce_group;
        rt.launch(&key, kernel, &args, &[m * group], &[group])?;
    }
    debug_assert_eq!(out.len(), m);
    Ok(out)
}
