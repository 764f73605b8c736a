//! Memory movement: contiguous copies of strided layouts and strided writes (`assign`).

use super::map::map1;
use super::num::Num;
use crate::alloc::Zeroable;
use crate::checks::dtype_mismatch;
use crate::parallel::worth_parallel;
use crate::strided::StridedPlan;
use crate::CpuStorage;
use rayon::prelude::*;
use tessera_core::{AssignMode, Element, Layout, Result};

/// A contiguous row-major copy of the elements of `layout` (through [`map1`], which has the
/// contiguous, broadcast, strided and tiled-transpose paths).
pub(crate) fn copy_strided<T: Zeroable + Send + Sync>(x: &[T], layout: &Layout) -> Result<Vec<T>> {
    map1(x, layout, |v| v)
}

/// `dst[dst_layout] = combine(dst[dst_layout], src[src_layout])` element by element.
///
/// Runs in parallel over the outermost dimension when the destination blocks of its indices
/// provably cannot overlap (the outer stride is at least the extent of one block), which holds
/// for every narrow/slice region; otherwise, or for small copies, on this thread.
pub(crate) fn assign<T, F>(
    dst: &mut [T],
    dst_layout: &Layout,
    src: &[T],
    src_layout: &Layout,
    combine: F,
) where
    T: Copy + Send + Sync,
    F: Fn(T, T) -> T + Sync,
{
    let plan = StridedPlan::from_layouts([dst_layout, src_layout]);
    if plan.numel() == 0 {
        return;
    }
    let strides = plan.inner_strides();
    if worth_parallel(plan.numel()) {
        if let Some((outer, [outer_dst, outer_src], inner)) = plan.split_outer() {
            if outer_dst > 0 && outer_dst >= inner.extent(0) {
                let [base_dst, base_src] = plan.base_offsets();
                dst[base_dst..]
                    .par_chunks_mut(outer_dst)
                    .take(outer)
                    .enumerate()
                    .for_each(|(i, block)| {
                        let src_base = base_src + i * outer_src;
                        inner.for_each_run(0, inner.numel(), |_, [od, os], len| {
                            assign_run(block, od, src, src_base + os, strides, len, &combine);
                        });
                    });
                return;
            }
        }
    }
    plan.for_each_run(0, plan.numel(), |_, [od, os], len| {
        assign_run(dst, od, src, os, strides, len, &combine);
    });
}

/// One run of [`assign`]: `len` elements from offsets `od` / `os` with inner strides `[sd, ss]`.
fn assign_run<T: Copy, F: Fn(T, T) -> T>(
    dst: &mut [T],
    od: usize,
    src: &[T],
    os: usize,
    [sd, ss]: [usize; 2],
    len: usize,
    combine: &F,
) {
    match (sd, ss) {
        (1, 1) => {
            for (d, &s) in dst[od..od + len].iter_mut().zip(&src[os..os + len]) {
                *d = combine(*d, s);
            }
        }
        (1, 0) => {
            let s = src[os];
            for d in &mut dst[od..od + len] {
                *d = combine(*d, s);
            }
        }
        _ => {
            for i in 0..len {
                let d = &mut dst[od + i * sd];
                *d = combine(*d, src[os + i * ss]);
            }
        }
    }
}

/// [`assign`] on storages: overwrite, or accumulate (`+`, wrapping for i64, logical or for
/// bool). The dtypes must match.
pub(crate) fn assign_storage(
    dst: &mut CpuStorage,
    dst_layout: &Layout,
    src: &CpuStorage,
    src_layout: &Layout,
    mode: AssignMode,
) -> Result<()> {
    fn run<T: Copy + Send + Sync>(
        d: &mut [T],
        dl: &Layout,
        s: &[T],
        sl: &Layout,
        mode: AssignMode,
        add: impl Fn(T, T) -> T + Sync,
    ) {
        match mode {
            AssignMode::Overwrite => assign(d, dl, s, sl, |_, v| v),
            AssignMode::Accumulate => assign(d, dl, s, sl, add),
        }
    }
    match (&mut *dst, src) {
        (CpuStorage::F32(d), CpuStorage::F32(s)) => {
            run(d, dst_layout, s, src_layout, mode, f32::num_add)
        }
        (CpuStorage::F64(d), CpuStorage::F64(s)) => {
            run(d, dst_layout, s, src_layout, mode, f64::num_add)
        }
        (CpuStorage::I64(d), CpuStorage::I64(s)) => {
            run(d, dst_layout, s, src_layout, mode, i64::num_add)
        }
        // 16-bit floats accumulate through f64, where the sum of two is exact (f16) or
        // rounded at twice their precision plus two bits (bf16), so the rounding back is a
        // single correct one.
        (CpuStorage::F16(d), CpuStorage::F16(s)) => {
            run(d, dst_layout, s, src_layout, mode, |a, b| {
                Element::from_f64(a.to_f64() + b.to_f64())
            })
        }
        (CpuStorage::BF16(d), CpuStorage::BF16(s)) => {
            run(d, dst_layout, s, src_layout, mode, |a, b| {
                Element::from_f64(a.to_f64() + b.to_f64())
            })
        }
        (CpuStorage::Bool(d), CpuStorage::Bool(s)) => {
            run(d, dst_layout, s, src_layout, mode, |a: u8, b: u8| {
                u8::from(a != 0 || b != 0)
            })
        }
        _ => return Err(dtype_mismatch("assign", dst, src)),
    }
    Ok(())
}
