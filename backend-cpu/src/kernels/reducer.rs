//! The reduction operators and the inner loops that apply them to a run of elements.
//!
//! Summation accuracy: contiguous runs are summed pairwise (halving recursively down to blocks
//! of [`PAIRWISE_BLOCK`] elements, each summed in [`LANES`] interleaved accumulators that the
//! compiler vectorises), like NumPy; the error grows with `log n` rather than `n`. Strided runs
//! are summed sequentially, but each run gives a partial that is then combined, and row-wise
//! accumulation (see `reduce_rows`) folds blocks of rows separately, so f32 sums of millions of
//! elements stay accurate to a few ulps of the f64 reference. Sums stay in the element type.

use super::num::Num;
use crate::strided::StridedPlan;

/// Interleaved accumulators in the innermost loop.
const LANES: usize = 16;
/// Length below which a contiguous run is reduced directly rather than split in halves.
const PAIRWISE_BLOCK: usize = 512;
/// Width of the output tile accumulated at once when reducing whole rows.
const ROW_TILE: usize = 256;
/// Rows folded into a block partial before it is merged into the running result.
const ROW_BLOCK: usize = 64;

/// An associative reduction with an identity.
pub(crate) trait Reducer<T>: Copy + Send + Sync {
    /// The value of an empty reduction.
    const IDENTITY: T;
    /// Combines two partial results.
    fn combine(a: T, b: T) -> T;
}

/// Sum (wrapping for integers).
#[derive(Clone, Copy)]
pub(crate) struct SumOp;
/// Product (wrapping for integers).
#[derive(Clone, Copy)]
pub(crate) struct ProdOp;
/// NaN-propagating maximum.
#[derive(Clone, Copy)]
pub(crate) struct MaxOp;
/// NaN-propagating minimum.
#[derive(Clone, Copy)]
pub(crate) struct MinOp;

impl<T: Num> Reducer<T> for SumOp {
    const IDENTITY: T = T::ZERO;
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        a.num_add(b)
    }
}

impl<T: Num> Reducer<T> for ProdOp {
    const IDENTITY: T = T::ONE;
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        a.num_mul(b)
    }
}

impl<T: Num> Reducer<T> for MaxOp {
    const IDENTITY: T = T::LOWEST;
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        a.max_nan(b)
    }
}

impl<T: Num> Reducer<T> for MinOp {
    const IDENTITY: T = T::HIGHEST;
    #[inline(always)]
    fn combine(a: T, b: T) -> T {
        a.min_nan(b)
    }
}

/// Reduces a contiguous slice pairwise.
pub(crate) fn reduce_slice<T: Num, R: Reducer<T>>(xs: &[T]) -> T {
    if xs.len() <= PAIRWISE_BLOCK {
        return reduce_lanes::<T, R>(xs);
    }
    let mid = (xs.len() / 2).next_multiple_of(LANES);
    R::combine(
        reduce_slice::<T, R>(&xs[..mid]),
        reduce_slice::<T, R>(&xs[mid..]),
    )
}

/// Reduces a short slice in `LANES` interleaved accumulators.
#[inline]
fn reduce_lanes<T: Num, R: Reducer<T>>(xs: &[T]) -> T {
    let mut acc = [R::IDENTITY; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a = R::combine(*a, v);
        }
    }
    let mut tail = R::IDENTITY;
    for &v in chunks.remainder() {
        tail = R::combine(tail, v);
    }
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] = R::combine(acc[l], acc[l + width]);
        }
        width /= 2;
    }
    R::combine(acc[0], tail)
}

/// Reduces `len` elements of `x` starting at `offset`, `stride` apart.
pub(crate) fn reduce_strided<T: Num, R: Reducer<T>>(
    x: &[T],
    offset: usize,
    stride: usize,
    len: usize,
) -> T {
    match stride {
        1 => reduce_slice::<T, R>(&x[offset..offset + len]),
        0 => (0..len).fold(R::IDENTITY, |acc, _| R::combine(acc, x[offset])),
        _ => x[offset..]
            .iter()
            .step_by(stride)
            .take(len)
            .fold(R::IDENTITY, |acc, &v| R::combine(acc, v)),
    }
}

/// Row-wise accumulation for a contiguous run of outputs: `out[j]` becomes the reduction over
/// the reduced positions `reduced` of `x[base + r + j]`, where `r` walks `red`'s offsets.
///
/// Whole rows are folded with slice loops (vectorised) one output tile at a time, so the tile of
/// accumulators stays in L1 while the rows stream past. Every [`ROW_BLOCK`] rows the block
/// partial is merged into the result, which bounds the rounding error of long f32 sums.
pub(crate) fn reduce_rows<T: Num, R: Reducer<T>>(
    x: &[T],
    base: usize,
    red: &StridedPlan<1>,
    reduced: std::ops::Range<usize>,
    out: &mut [T],
) {
    let [rs] = red.inner_strides();
    let mut block = [R::IDENTITY; ROW_TILE];
    for t0 in (0..out.len()).step_by(ROW_TILE) {
        let width = ROW_TILE.min(out.len() - t0);
        let acc = &mut out[t0..t0 + width];
        acc.fill(R::IDENTITY);
        let blk = &mut block[..width];
        blk.fill(R::IDENTITY);
        let mut rows = 0;
        red.for_each_run(reduced.start, reduced.len(), |_, [ro], rlen| {
            for t in 0..rlen {
                let start = base + ro + t * rs + t0;
                for (b, &v) in blk.iter_mut().zip(&x[start..start + width]) {
                    *b = R::combine(*b, v);
                }
                rows += 1;
                if rows == ROW_BLOCK {
                    merge_block::<T, R>(acc, blk);
                    rows = 0;
                }
            }
        });
        merge_block::<T, R>(acc, blk);
    }
}

/// `acc[i] = combine(acc[i], blk[i])`, then resets `blk` to the identity.
#[inline]
fn merge_block<T: Num, R: Reducer<T>>(acc: &mut [T], blk: &mut [T]) {
    for (a, b) in acc.iter_mut().zip(blk.iter_mut()) {
        *a = R::combine(*a, *b);
        *b = R::IDENTITY;
    }
}
