//! Reductions over axes.

use crate::common::*;
use proptest::prelude::*;

/// A subset of the axes of a rank-`rank` tensor, as `Tensor` takes it (possibly negative; an
/// empty list means every axis).
fn axes_of(rank: usize) -> BoxedStrategy<Vec<isize>> {
    (prop::collection::vec(any::<bool>(), rank), any::<bool>())
        .prop_map(move |(picked, negative)| {
            picked
                .iter()
                .enumerate()
                .filter(|(_, &p)| p)
                .map(|(a, _)| {
                    if negative {
                        a as isize - rank as isize
                    } else {
                        a as isize
                    }
                })
                .collect()
        })
        .boxed()
}

/// An input with random values and a subset of its axes.
fn input_and_axes() -> BoxedStrategy<(Input, Vec<isize>)> {
    input(uniform(-2.0, 2.0))
        .prop_flat_map(|x| {
            let rank = x.dims.len();
            (Just(x), axes_of(rank))
        })
        .boxed()
}

/// An input whose values are pairwise distinct (no ties for max/min) and a subset of its axes.
fn distinct_input_and_axes() -> BoxedStrategy<(Input, Vec<isize>)> {
    dims()
        .prop_flat_map(|d| {
            let rank = d.len();
            (distinct_input_with(d), axes_of(rank))
        })
        .boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn sum(((x, axes), keepdim) in (input_and_axes(), any::<bool>())) {
        check(|v| v[0].sum(&axes, keepdim), &[&x])?;
    }

    #[test]
    fn sum_all(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].sum_all(), &[&x])?;
    }

    #[test]
    fn mean(((x, axes), keepdim) in (input_and_axes(), any::<bool>())) {
        check(|v| v[0].mean(&axes, keepdim), &[&x])?;
    }

    #[test]
    fn mean_all(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].mean_all(), &[&x])?;
    }

    #[test]
    fn max(((x, axes), keepdim) in (distinct_input_and_axes(), any::<bool>())) {
        check(|v| v[0].max(&axes, keepdim), &[&x])?;
    }

    #[test]
    fn min(((x, axes), keepdim) in (distinct_input_and_axes(), any::<bool>())) {
        check(|v| v[0].min(&axes, keepdim), &[&x])?;
    }

    #[test]
    fn var(((x, axes), keepdim, correction) in (input_and_axes(), any::<bool>(), 0usize..=1)) {
        let rank = x.dims.len();
        let count: usize = if axes.is_empty() {
            x.dims.iter().product()
        } else {
            axes.iter().map(|&a| x.dims[(a + rank as isize) as usize % rank.max(1)]).product()
        };
        // With nothing left after the correction the variance is NaN, not differentiable.
        let correction = if count > correction { correction } else { 0 };
        check(|v| v[0].var(&axes, correction, keepdim), &[&x])?;
    }

    #[test]
    fn logsumexp(((x, axis), keepdim) in (input_nonscalar(uniform(-3.0, 3.0)).prop_flat_map(|x| {
        let rank = x.dims.len();
        (Just(x), 0..rank)
    }), any::<bool>())) {
        check(|v| v[0].logsumexp(axis as isize, keepdim), &[&x])?;
    }
}
