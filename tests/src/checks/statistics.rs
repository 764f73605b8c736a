//! mean and var over random axis subsets.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close_scaled, Tolerance};
use crate::reference::{reduce, views, RefArray};
use crate::runner::check_property;
use crate::strategies::{axis_subset, shape, special_rate, tensor_case, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, DType, ReduceOp};

/// Which statistic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Statistic {
    /// `mean(axes)`.
    Mean,
    /// `var(axes, correction)`.
    Var {
        /// Subtracted from the count (1: unbiased).
        correction: usize,
    },
}

/// One statistic over a set of axes.
#[derive(Clone, Debug)]
pub struct StatisticCase {
    /// Mean or variance.
    pub stat: Statistic,
    /// Resolved axes (empty: every axis).
    pub axes: Vec<usize>,
    /// Whether reduced axes are kept.
    pub keepdim: bool,
    /// The input.
    pub input: TensorCase,
}

/// Cases on `dtype`; empty groups are allowed (mean and var are NaN there).
pub fn cases(dtype: DType) -> BoxedStrategy<StatisticCase> {
    let stat = prop_oneof![
        Just(Statistic::Mean),
        (0usize..=1).prop_map(|correction| Statistic::Var { correction })
    ];
    (shape(), special_rate(), stat, any::<bool>())
        .prop_flat_map(|(s, special, stat, keepdim)| {
            let rank = s.len();
            (
                Just(s),
                axis_subset(rank),
                Just(special),
                Just(stat),
                Just(keepdim),
            )
        })
        .prop_flat_map(move |(s, axes, special, stat, keepdim)| {
            tensor_case(dtype, s, ValueProfile::DEFAULT.with_specials(special)).prop_map(
                move |input| StatisticCase {
                    stat,
                    axes: axes.clone(),
                    keepdim,
                    input,
                },
            )
        })
        .boxed()
}

/// Compares `mean` / `var` with the reference, with an error magnitude of `mean(|x|)` or
/// [`reduce::var_magnitude`].
pub fn check<B: Backend>(dev: &B, case: &StatisticCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let x = build(dev, &case.input, "input")?;
    let api_axes: Vec<isize> = case.axes.iter().map(|&a| a as isize).collect();
    let got = match case.stat {
        Statistic::Mean => x.mean(&api_axes, case.keepdim),
        Statistic::Var { correction } => x.var(&api_axes, correction, case.keepdim),
    }
    .map_err(op_failed("mean/var", &[&x]))?;
    let input = case.input.reference();
    let axes: Vec<usize> = if case.axes.is_empty() {
        (0..input.rank()).collect()
    } else {
        case.axes.clone()
    };
    let (expected, magnitude) = match case.stat {
        Statistic::Mean => {
            let n = reduce::group_len(&input.shape, &axes) as f64;
            let m = reduce::reduce(ReduceOp::Sum, DType::F64, &input.abs(), &axes).map(|v| v / n);
            (reduce::mean(dtype, &input, &axes), m)
        }
        Statistic::Var { correction } => (
            reduce::var(dtype, &input, &axes, correction),
            reduce::var_magnitude(&input, &axes, correction),
        ),
    };
    let shape = reduce::reduced_shape(&input.shape, &axes, case.keepdim);
    let reshape = |a: RefArray| views::reshape(&a, &shape);
    let tol = Tolerance::accumulation(dtype, 2 * reduce::group_len(&input.shape, &axes));
    assert_close_scaled(&got, dtype, &reshape(expected), &reshape(magnitude), tol)
        .map_err(with_inputs(&[&x]))
}

/// Checks mean and var on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    check_property(&format!("mean/var {dtype}"), cases(dtype), |c| {
        check(dev, c)
    });
}
