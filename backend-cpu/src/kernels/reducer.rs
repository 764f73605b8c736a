//! The reduction operators and the inner loops that apply them to a run of elements.
//!
//! Summation accuracy: runs are summed pairwise (halving recursively down to blocks of
//! [`PAIRWISE_BLOCK`] elements, each summed in [`LANES`] interleaved accumulators that the
//! compiler vectorises for contiguous runs), like NumPy; the error grows with `log n` rather
//! than `n`. Each run gives a partial that is then combined with the others, and row-wise
//! accumulation (see `reduce_rows`) folds rows through a three-level cascade, so f32 sums of
//! millions of elements stay within about 1e-6 relative of the f64 reference. Sums stay in the
//! element type, or in f32 for bf16 storage: each loop reads its elements as `S` and
//! accumulates in `T` ([`Lane`]; the identity for f32, f64 and i64), in the order it would
//! sum the widened values.

use super::lanes::Lane;
use super::num::Num;
use super::wide::{fold_into, widest};
use crate::strided::StridedPlan;

/// Interleaved accumulators in the innermost loop.
pub(crate) const LANES: usize = 16;
/// Length below which a contiguous run is reduced directly rather than split in halves.
const PAIRWISE_BLOCK: usize = 512;
/// Width of the output tile accumulated at once when reducing whole rows.
const ROW_TILE: usize = 256;
/// Fan-in of each level of the row-wise cascade (rows per block, blocks per middle partial).
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
pub(crate) fn reduce_slice<S: Lane<T>, T: Num, R: Reducer<T>>(xs: &[S]) -> T {
    if xs.len() <= PAIRWISE_BLOCK {
        return reduce_lanes_widest::<S, T, R>(xs);
    }
    let mid = (xs.len() / 2).next_multiple_of(LANES);
    R::combine(
        reduce_slice::<S, T, R>(&xs[..mid]),
        reduce_slice::<S, T, R>(&xs[mid..]),
    )
}

/// Reduces a short slice in `LANES` interleaved accumulators.
#[inline(always)]
fn reduce_lanes<S: Lane<T>, T: Num, R: Reducer<T>>(xs: &[S]) -> T {
    let mut acc = [R::IDENTITY; LANES];
    let mut chunks = xs.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (a, &v) in acc.iter_mut().zip(chunk) {
            *a = R::combine(*a, v.load());
        }
    }
    let mut tail = R::IDENTITY;
    for &v in chunks.remainder() {
        tail = R::combine(tail, v.load());
    }
    R::combine(combine_lanes::<T, R>(acc), tail)
}

widest! {
    /// [`reduce_lanes`] with the widest vectors the CPU has (bit for bit the same result).
    fn reduce_lanes_widest<S, T, R>(xs: &[S]) -> T
    where [S: Lane<T>, T: Num, R: Reducer<T>]
    = reduce_lanes
}

/// Combines the lane accumulators as a balanced tree.
#[inline(always)]
pub(crate) fn combine_lanes<T: Num, R: Reducer<T>>(mut acc: [T; LANES]) -> T {
    let mut width = LANES / 2;
    while width > 0 {
        for l in 0..width {
            acc[l] = R::combine(acc[l], acc[l + width]);
        }
        width /= 2;
    }
    acc[0]
}

/// Reduces `len` elements of `x` starting at `offset`, `stride` apart (pairwise, like
/// [`reduce_slice`]; a stride of 0 repeats one element).
pub(crate) fn reduce_strided<S: Lane<T>, T: Num, R: Reducer<T>>(
    x: &[S],
    offset: usize,
    stride: usize,
    len: usize,
) -> T {
    if stride == 1 {
        return reduce_slice::<S, T, R>(&x[offset..offset + len]);
    }
    if len <= PAIRWISE_BLOCK {
        let mut acc = [R::IDENTITY; LANES];
        let full = len - len % LANES;
        for c in (0..full).step_by(LANES) {
            for (l, a) in acc.iter_mut().enumerate() {
                *a = R::combine(*a, x[offset + (c + l) * stride].load());
            }
        }
        let mut tail = R::IDENTITY;
        for i in full..len {
            tail = R::combine(tail, x[offset + i * stride].load());
        }
        return R::combine(combine_lanes::<T, R>(acc), tail);
    }
    let mid = (len / 2).next_multiple_of(LANES);
    R::combine(
        reduce_strided::<S, T, R>(x, offset, stride, mid),
        reduce_strided::<S, T, R>(x, offset + mid * stride, stride, len - mid),
    )
}

/// Row-wise accumulation for a contiguous run of outputs: `out[j]` becomes the reduction over
/// the reduced positions `reduced` of `x[base + r + j]`, where `r` walks `red`'s offsets.
///
/// Whole rows are folded with slice loops (vectorised) one output tile at a time, so the tile of
/// accumulators stays in L1 while the rows stream past. The fold is a three-level cascade:
/// [`ROW_BLOCK`] rows go into a block partial, [`ROW_BLOCK`] block partials into a middle
/// partial, and middle partials into the result, which keeps long f32 sums accurate.
pub(crate) fn reduce_rows<S: Lane<T>, T: Num, R: Reducer<T>>(
    x: &[S],
    base: usize,
    red: &StridedPlan<1>,
    reduced: std::ops::Range<usize>,
    out: &mut [T],
) {
    let [rs] = red.inner_strides();
    let mut block = [R::IDENTITY; ROW_TILE];
    let mut middle = [R::IDENTITY; ROW_TILE];
    for t0 in (0..out.len()).step_by(ROW_TILE) {
        let width = ROW_TILE.min(out.len() - t0);
        let acc = &mut out[t0..t0 + width];
        acc.fill(R::IDENTITY);
        let (blk, mid) = (&mut block[..width], &mut middle[..width]);
        blk.fill(R::IDENTITY);
        mid.fill(R::IDENTITY);
        let (mut rows, mut blocks) = (0, 0);
        red.for_each_run(reduced.start, reduced.len(), |_, [ro], rlen| {
            for t in 0..rlen {
                let start = base + ro + t * rs + t0;
                fold_into(blk, &x[start..start + width], &|b, v: S| {
                    R::combine(b, v.load())
                });
                rows += 1;
                if rows == ROW_BLOCK {
                    merge_block::<T, R>(mid, blk);
                    rows = 0;
                    blocks += 1;
                    if blocks == ROW_BLOCK {
                        merge_block::<T, R>(acc, mid);
                        blocks = 0;
                    }
                }
            }
        });
        merge_block::<T, R>(mid, blk);
        merge_block::<T, R>(acc, mid);
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

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::bf16;

    /// The leaf reduction at the CPU's widest vectors gives the bits of the baseline loop, and
    /// the pairwise sum stays within 1e-6 of the f64 sum (lengths around the lane count and
    /// the pairwise block; Miri-sized).
    #[test]
    fn miri_widest_leaf_reductions_match_the_baseline_loop() {
        for len in [0, 1, 15, 16, 17, 100, PAIRWISE_BLOCK, PAIRWISE_BLOCK + 33] {
            let xs: Vec<f32> = (0..len)
                .map(|i| ((i * 37) % 101) as f32 * 0.37 - 9.0)
                .collect();
            let leaf = &xs[..len.min(PAIRWISE_BLOCK)];
            let wide = reduce_lanes_widest::<f32, f32, SumOp>(leaf);
            let plain = reduce_lanes::<f32, f32, SumOp>(leaf);
            assert_eq!(wide.to_bits(), plain.to_bits(), "sum, len {len}");
            let max = reduce_lanes_widest::<f32, f32, MaxOp>(leaf);
            assert_eq!(max, reduce_lanes::<f32, f32, MaxOp>(leaf), "max, len {len}");
            let exact: f64 = xs.iter().map(|&v| f64::from(v)).sum();
            let pairwise = f64::from(reduce_slice::<f32, f32, SumOp>(&xs));
            assert!(
                (pairwise - exact).abs() <= 1e-6 * (1.0 + exact.abs()),
                "len {len}"
            );
            let halves: Vec<bf16> = xs.iter().map(|&v| bf16::from_f32(v)).collect();
            let wide = reduce_lanes_widest::<bf16, f32, SumOp>(&halves[..leaf.len()]);
            let plain = reduce_lanes::<bf16, f32, SumOp>(&halves[..leaf.len()]);
            assert_eq!(wide.to_bits(), plain.to_bits(), "bf16 sum, len {len}");
        }
    }
}
