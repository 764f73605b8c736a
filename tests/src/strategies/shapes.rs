//! Shape strategies: ranks 0..=4, dimensions 0..=5 (so zero-size dimensions occur), and pairs of
//! shapes that broadcast together.

use proptest::prelude::*;
use std::ops::RangeInclusive;

/// The default shape: rank 0..=4, every dimension 0..=5.
pub fn shape() -> BoxedStrategy<Vec<usize>> {
    shape_with(0..=4, 0..=5)
}

/// A shape with a rank and dimensions drawn from the given ranges.
pub fn shape_with(
    rank: RangeInclusive<usize>,
    dims: RangeInclusive<usize>,
) -> BoxedStrategy<Vec<usize>> {
    prop::collection::vec(dim(dims), rank).boxed()
}

/// One dimension from `range`. A 0 (when in range) is drawn one time in 12, so that empty
/// tensors occur in every test without making up a third of the cases at rank 4.
pub fn dim(range: RangeInclusive<usize>) -> BoxedStrategy<usize> {
    let (lo, hi) = (*range.start(), *range.end());
    if lo == 0 && hi > 0 {
        prop_oneof![1 => Just(0usize), 11 => 1..=hi].boxed()
    } else {
        range.boxed()
    }
}

/// A shape that broadcasts to `target`: some leading axes dropped and some axes set to 1.
pub fn broadcastable_to(target: Vec<usize>) -> BoxedStrategy<Vec<usize>> {
    let rank = target.len();
    (0..=rank, prop::collection::vec(any::<bool>(), rank))
        .prop_map(move |(drop, ones)| {
            target
                .iter()
                .zip(&ones)
                .skip(drop)
                .map(|(&d, &one)| if one { 1 } else { d })
                .collect()
        })
        .boxed()
}

/// `(out, lhs, rhs)`: two shapes that broadcast to `out` (each dimension of either is the one
/// of `out` or 1, leading dimensions may be missing).
pub fn broadcast_pair() -> BoxedStrategy<(Vec<usize>, Vec<usize>, Vec<usize>)> {
    shape()
        .prop_flat_map(|out| {
            (
                Just(out.clone()),
                broadcastable_to(out.clone()),
                broadcastable_to(out),
            )
        })
        .boxed()
}

/// An axis of a tensor of rank `rank` (which must be positive).
pub fn axis(rank: usize) -> BoxedStrategy<usize> {
    (0..rank).boxed()
}

/// A sorted, duplicate-free subset of `0..rank` (possibly empty).
pub fn axis_subset(rank: usize) -> BoxedStrategy<Vec<usize>> {
    prop::collection::vec(any::<bool>(), rank)
        .prop_map(|keep| {
            keep.iter()
                .enumerate()
                .filter_map(|(i, &k)| k.then_some(i))
                .collect()
        })
        .boxed()
}
