//! Checking one cell of the matrix: the property of one op on one dtype, dispatched to the
//! `checks` module of its family.

use super::op::Op;
use crate::checks::{
    arg_reduce, binary, cast, comparison, concat, constructors, conv, display, gradients, indexing,
    matmul, metamorphic, pool, random, reduce, softmax, statistics, unary, views, where_select,
};
use crate::runner::{falsify, Counterexample, Printed, RunConfig};
use proptest::strategy::Strategy;
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tessera_core::{Backend, DType};

/// The property name of a cell: `"<family> <op> <dtype>"`, e.g. `"unary exp f32"`.
pub fn property_name(op: Op, dtype: DType) -> String {
    format!("{op} {dtype}")
}

fn run<S>(
    name: &str,
    config: &RunConfig,
    strategy: S,
    check: impl Fn(&S::Value) -> Result<(), String>,
) -> Result<(), Counterexample<Printed>>
where
    S: Strategy,
    S::Value: Debug,
{
    falsify(name, strategy, config, check).map_err(|c| c.described())
}

/// Checks `op` on `dtype` over `config.cases` random cases.
pub fn check_cell<B: Backend>(
    dev: &B,
    op: Op,
    dtype: DType,
    config: &RunConfig,
) -> Result<(), Counterexample<Printed>> {
    let name = property_name(op, dtype);
    let n = name.as_str();
    match op {
        Op::Unary(o) => run(n, config, unary::cases(o, dtype), |c| unary::check(dev, c)),
        Op::Binary(o) => run(n, config, binary::cases(o, dtype), |c| {
            binary::check(dev, c)
        }),
        Op::Compare(o) => run(n, config, comparison::cases(o, dtype), |c| {
            comparison::check(dev, c)
        }),
        Op::Where => run(n, config, where_select::cases(dtype), |c| {
            where_select::check(dev, c)
        }),
        Op::CastTo(to) => run(n, config, cast::cases(dtype, to), |c| cast::check(dev, c)),
        Op::Reduce(o) => run(n, config, reduce::cases(o, dtype), |c| {
            reduce::check(dev, c)
        }),
        Op::ArgReduce(o) => run(n, config, arg_reduce::cases(o, dtype), |c| {
            arg_reduce::check(dev, c)
        }),
        Op::MeanVar => run(n, config, statistics::cases(dtype), |c| {
            statistics::check(dev, c)
        }),
        Op::Matmul => run(n, config, matmul::cases(dtype), |c| matmul::check(dev, c)),
        Op::Index(o) => run(n, config, indexing::cases(o, dtype), |c| {
            indexing::check(dev, c)
        }),
        Op::Join(o) => run(n, config, concat::cases(o, dtype), |c| {
            concat::check(dev, c)
        }),
        Op::Views => run(n, config, views::cases(dtype), |c| views::check(dev, c)),
        Op::Softmax => run(n, config, softmax::cases(dtype), |c| softmax::check(dev, c)),
        Op::Conv(o) => run(n, config, conv::cases(o, dtype), |c| conv::check(dev, c)),
        Op::Pool(o) => run(n, config, pool::cases(o, dtype), |c| pool::check(dev, c)),
        Op::Random => run(n, config, random::cases(dtype), |c| random::check(dev, c)),
        Op::RandomMoments => moments(dev, &name, dtype, config),
        Op::Constructors => run(n, config, constructors::cases_of(dtype), |c| {
            constructors::check(dev, c)
        }),
        Op::DisplaySmall => run(n, config, display::small_cases_of(dtype), |c| {
            display::check_small(dev, c)
        }),
        Op::DisplaySummary => run(n, config, display::big_shapes(), |s| {
            display::check_big(dev, s)
        }),
        Op::Gradient(o) => run(n, config, gradients::cases(o, dtype), |c| {
            gradients::check(dev, c)
        }),
        Op::Law(law) => run(n, config, metamorphic::cases(law, dtype), |c| {
            metamorphic::check(dev, c)
        }),
    }
}

/// The moments check is one large draw, not a property: a panic is its failure.
fn moments<B: Backend>(
    dev: &B,
    name: &str,
    dtype: DType,
    config: &RunConfig,
) -> Result<(), Counterexample<Printed>> {
    catch_unwind(AssertUnwindSafe(|| random::check_moments_of(dev, dtype))).map_err(|panic| {
        let reason = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into());
        Counterexample {
            property: name.to_string(),
            reason,
            input: Some(Printed(
                "200 000 draws of uniform(-1, 3) and normal(2, 0.5)".into(),
            )),
            base_seed: config.base_seed,
            regression_file: None,
        }
    })
}
