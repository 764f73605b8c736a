//! Element-wise maps of one, two or three strided operands into a fresh contiguous output,
//! written once (never zeroed first: the output starts as `MaybeUninit` and every element is
//! written by exactly one run).
//!
//! Each function is generic over the element function `f`, so every op gets its own
//! monomorphised loop; the op is matched once by the caller. The output is produced run by run
//! (see [`StridedPlan::for_each_run`]); inside a run the loop shape is chosen from the inner
//! strides: all contiguous (plain slice zips the compiler vectorises), a broadcast scalar operand
//! (stride 0) next to contiguous ones, or a general stepped loop.
//!
//! When an operand is *transposed* (contiguous along the second-to-last dimension but not the
//! last), a row-major walk would read one element per cache line of it; the output is then
//! produced in `TILE x TILE` tiles instead, so the lines a tile reads stay in L1 until all their
//! elements are used.

use super::wide::{map_contiguous, zip_contiguous};
use crate::alloc::{assume_init, try_uninit};
use crate::parallel::{fill_chunks, worth_parallel};
use crate::strided::StridedPlan;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use tessera_core::{Layout, Result};

/// Side of the square tiles used for transposed operands.
const TILE: usize = 32;

/// `out[i] = f(x[i])` over the elements of `layout` in row-major order.
pub(crate) fn map1<T, U, F>(x: &[T], layout: &Layout, f: F) -> Result<Vec<U>>
where
    T: Copy + Sync,
    U: Copy + Send,
    F: Fn(T) -> U + Sync,
{
    let plan = StridedPlan::from_layouts([layout]);
    let mut out = try_uninit::<U>(plan.numel())?;
    let [s] = plan.inner_strides();
    drive(&plan, &mut out, |dst, [o]| {
        let len = dst.len();
        match s {
            1 => map_contiguous(dst, &x[o..o + len], &|v| MaybeUninit::new(f(v))),
            0 => dst.fill(MaybeUninit::new(f(x[o]))),
            _ => {
                for (d, v) in dst.iter_mut().zip(x[o..].iter().step_by(s)) {
                    d.write(f(*v));
                }
            }
        }
    });
    // SAFETY: `drive` calls `run` on runs that cover every element of `out` once, and every
    // branch of `run` writes each element of its run.
    Ok(unsafe { assume_init(out) })
}

/// `out[i] = f(a[i], b[i])` over two layouts of one shape.
pub(crate) fn map2<A, B, U, F>(a: &[A], la: &Layout, b: &[B], lb: &Layout, f: F) -> Result<Vec<U>>
where
    A: Copy + Sync,
    B: Copy + Sync,
    U: Copy + Send,
    F: Fn(A, B) -> U + Sync,
{
    let plan = StridedPlan::from_layouts([la, lb]);
    let mut out = try_uninit::<U>(plan.numel())?;
    let [sa, sb] = plan.inner_strides();
    drive(&plan, &mut out, |dst, [oa, ob]| {
        let len = dst.len();
        match (sa, sb) {
            (1, 1) => zip_contiguous(dst, &a[oa..oa + len], &b[ob..ob + len], &|x, y| {
                MaybeUninit::new(f(x, y))
            }),
            (1, 0) => {
                let y = b[ob];
                map_contiguous(dst, &a[oa..oa + len], &|x| MaybeUninit::new(f(x, y)));
            }
            (0, 1) => {
                let x = a[oa];
                map_contiguous(dst, &b[ob..ob + len], &|y| MaybeUninit::new(f(x, y)));
            }
            _ => {
                for (i, d) in dst.iter_mut().enumerate() {
                    d.write(f(a[oa + i * sa], b[ob + i * sb]));
                }
            }
        }
    });
    // SAFETY: `drive` calls `run` on runs that cover every element of `out` once, and every
    // branch of `run` writes each element of its run.
    Ok(unsafe { assume_init(out) })
}

/// `out[i] = f(a[i], b[i], c[i])` over three layouts of one shape.
#[allow(clippy::too_many_arguments)]
pub(crate) fn map3<A, B, C, U, F>(
    a: &[A],
    la: &Layout,
    b: &[B],
    lb: &Layout,
    c: &[C],
    lc: &Layout,
    f: F,
) -> Result<Vec<U>>
where
    A: Copy + Sync,
    B: Copy + Sync,
    C: Copy + Sync,
    U: Copy + Send,
    F: Fn(A, B, C) -> U + Sync,
{
    let plan = StridedPlan::from_layouts([la, lb, lc]);
    let mut out = try_uninit::<U>(plan.numel())?;
    let [sa, sb, sc] = plan.inner_strides();
    drive(&plan, &mut out, |dst, [oa, ob, oc]| {
        let len = dst.len();
        match (sa, sb, sc) {
            (1, 1, 1) => {
                let operands = a[oa..oa + len]
                    .iter()
                    .zip(&b[ob..ob + len])
                    .zip(&c[oc..oc + len]);
                for (d, ((&x, &y), &z)) in dst.iter_mut().zip(operands) {
                    d.write(f(x, y, z));
                }
            }
            (1, 1, 0) => {
                let z = c[oc];
                for ((d, &x), &y) in dst.iter_mut().zip(&a[oa..oa + len]).zip(&b[ob..ob + len]) {
                    d.write(f(x, y, z));
                }
            }
            (1, 0, 1) => {
                let y = b[ob];
                for ((d, &x), &z) in dst.iter_mut().zip(&a[oa..oa + len]).zip(&c[oc..oc + len]) {
                    d.write(f(x, y, z));
                }
            }
            _ => {
                for (i, d) in dst.iter_mut().enumerate() {
                    d.write(f(a[oa + i * sa], b[ob + i * sb], c[oc + i * sc]));
                }
            }
        }
    });
    // SAFETY: `drive` calls `run` on runs that cover every element of `out` once, and every
    // branch of `run` writes each element of its run.
    Ok(unsafe { assume_init(out) })
}

/// Fills `out` (the contiguous output of `plan`) by calling `run(dst, offsets)` for runs of
/// consecutive output elements along the innermost dimension, where operand `k` starts at
/// `offsets[k]` and advances by `plan.inner_strides()[k]`. Chooses the walk order (row-major or
/// tiled) and the parallel split.
fn drive<U: Send, const N: usize>(
    plan: &StridedPlan<N>,
    out: &mut [U],
    run: impl Fn(&mut [U], [usize; N]) + Sync,
) {
    if has_transposed_operand(plan) {
        drive_tiled(plan, out, run);
        return;
    }
    fill_chunks(out, |start, chunk| {
        plan.for_each_run(start, chunk.len(), |pos, offsets, len| {
            run(&mut chunk[pos..pos + len], offsets)
        })
    });
}

/// True when some operand is contiguous along the second-to-last simplified dimension but not
/// along the last, and the matrix is big enough for tiles to pay.
fn has_transposed_operand<const N: usize>(plan: &StridedPlan<N>) -> bool {
    let (dims, strides) = (plan.dims(), plan.strides());
    let r = dims.len();
    r >= 2
        && dims[r - 2] >= 4
        && dims[r - 1] >= 4
        && (0..N).any(|k| strides[r - 2][k] == 1 && strides[r - 1][k] > 1)
}

/// [`drive`] in tiles: each `rows x cols` matrix of the last two dimensions is produced
/// `TILE` rows by `TILE` columns at a time, as runs of at most `TILE` elements.
fn drive_tiled<U: Send, const N: usize>(
    plan: &StridedPlan<N>,
    out: &mut [U],
    run: impl Fn(&mut [U], [usize; N]) + Sync,
) {
    if out.is_empty() {
        return;
    }
    let (dims, strides) = (plan.dims(), plan.strides());
    let r = dims.len();
    let (rows, cols) = (dims[r - 2], dims[r - 1]);
    let (row_strides, col_strides) = (strides[r - 2], strides[r - 1]);
    let outer = plan.sub_plan(0..r - 2);
    let parallel = worth_parallel(out.len());
    // Rows `first_row..` (as many as `dst` holds) of the matrix whose offsets are `base`.
    let tile_rows = |base: [usize; N], first_row: usize, dst: &mut [U]| {
        let height = dst.len() / cols;
        for j0 in (0..cols).step_by(TILE) {
            let width = TILE.min(cols - j0);
            for i in 0..height {
                let offsets = std::array::from_fn(|k| {
                    base[k] + (first_row + i) * row_strides[k] + j0 * col_strides[k]
                });
                run(&mut dst[i * cols + j0..i * cols + j0 + width], offsets);
            }
        }
    };
    let fill_matrix = |o: usize, dst: &mut [U]| {
        let base = outer.offsets_at(o);
        if parallel {
            dst.par_chunks_mut(TILE * cols)
                .enumerate()
                .for_each(|(t, d)| tile_rows(base, t * TILE, d));
        } else {
            for (t, d) in dst.chunks_mut(TILE * cols).enumerate() {
                tile_rows(base, t * TILE, d);
            }
        }
    };
    if parallel {
        out.par_chunks_mut(rows * cols)
            .enumerate()
            .for_each(|(o, d)| fill_matrix(o, d));
    } else {
        for (o, d) in out.chunks_mut(rows * cols).enumerate() {
            fill_matrix(o, d);
        }
    }
}
