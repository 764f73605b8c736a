//! Checking one cell of the matrix: the property of one op on one dtype, dispatched to the
//! `checks` module of its family.

use super::op::Op;
use crate::checks::{
    arg_reduce, attention, binary, cast, comparison, concat, constructors, conv, device, display,
    errors, fused, gradients, indexing, kinks, losses, matmul, memory, metamorphic, pool, random,
    reduce, softmax, statistics, unary, views, where_select,
};
use crate::runner::{
    falsify_systematic, falsify_systematic_reducing, Counterexample, Printed, RunConfig,
};
use crate::strategies::Pattern;
use proptest::strategy::Strategy;
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tessera_core::{Backend, DType};

/// The property name of a cell: `"<family> <op> <dtype>"`, e.g. `"unary exp f32"`.
pub fn property_name(op: Op, dtype: DType) -> String {
    format!("{op} {dtype}")
}

/// The systematic `patterns` of a cell, then its random cases from `strategy`.
fn run<S>(
    name: &str,
    config: &RunConfig,
    patterns: Vec<Pattern<S::Value>>,
    strategy: S,
    check: impl Fn(&S::Value) -> Result<(), String>,
) -> Result<(), Counterexample<Printed>>
where
    S: Strategy,
    S::Value: Debug,
{
    falsify_systematic(name, patterns, strategy, config, check).map_err(|c| c.described())
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
        Op::Device(o) => run(
            n,
            config,
            device::patterns(o, dtype),
            device::cases(o, dtype),
            |c| device::check(dev, c),
        ),
        Op::Memory(o) => run(
            n,
            config,
            memory::patterns(o, dtype),
            memory::cases(o, dtype),
            |c| memory::check(dev, o, c),
        ),
        Op::Attention(o) => run(
            n,
            config,
            attention::patterns(o, dtype),
            attention::cases(o, dtype),
            |c| attention::check(dev, c),
        ),
        Op::Fused(o) => falsify_systematic_reducing(
            n,
            fused::patterns(o, dtype),
            fused::cases(o, dtype),
            config,
            |c| fused::check(dev, c),
            &fused::smaller_cases,
        )
        .map_err(|c| c.described()),
        Op::Unary(o) => run(
            n,
            config,
            unary::patterns(o, dtype),
            unary::cases(o, dtype),
            |c| unary::check(dev, c),
        ),
        Op::Binary(o) => run(
            n,
            config,
            binary::patterns(o, dtype),
            binary::cases(o, dtype),
            |c| binary::check(dev, c),
        ),
        Op::Compare(o) => run(
            n,
            config,
            comparison::patterns(o, dtype),
            comparison::cases(o, dtype),
            |c| comparison::check(dev, c),
        ),
        Op::Where => run(
            n,
            config,
            where_select::patterns(dtype),
            where_select::cases(dtype),
            |c| where_select::check(dev, c),
        ),
        Op::CastTo(to) => run(
            n,
            config,
            cast::patterns(dtype, to),
            cast::cases(dtype, to),
            |c| cast::check(dev, c),
        ),
        Op::Reduce(o) => run(
            n,
            config,
            reduce::patterns(o, dtype),
            reduce::cases(o, dtype),
            |c| reduce::check(dev, c),
        ),
        Op::ArgReduce(o) => run(
            n,
            config,
            arg_reduce::patterns(o, dtype),
            arg_reduce::cases(o, dtype),
            |c| arg_reduce::check(dev, c),
        ),
        Op::MeanVar => run(
            n,
            config,
            statistics::patterns(dtype),
            statistics::cases(dtype),
            |c| statistics::check(dev, c),
        ),
        Op::Matmul => run(
            n,
            config,
            matmul::patterns(dtype),
            matmul::cases(dtype),
            |c| matmul::check(dev, c),
        ),
        Op::Index(o) => run(
            n,
            config,
            indexing::patterns(o, dtype),
            indexing::cases(o, dtype),
            |c| indexing::check(dev, c),
        ),
        Op::Join(o) => run(
            n,
            config,
            concat::patterns(o, dtype),
            concat::cases(o, dtype),
            |c| concat::check(dev, c),
        ),
        Op::Views => run(
            n,
            config,
            views::patterns(dtype),
            views::cases(dtype),
            |c| views::check(dev, c),
        ),
        Op::Softmax(o) => run(
            n,
            config,
            softmax::patterns(o, dtype),
            softmax::cases(o, dtype),
            |c| softmax::check(dev, c),
        ),
        Op::Conv(o) => run(
            n,
            config,
            conv::patterns(o, dtype),
            conv::cases(o, dtype),
            |c| conv::check(dev, c),
        ),
        Op::Pool(o) => run(
            n,
            config,
            pool::patterns(o, dtype),
            pool::cases(o, dtype),
            |c| pool::check(dev, c),
        ),
        Op::Random => run(n, config, vec![], random::cases(dtype), |c| {
            random::check(dev, c)
        }),
        Op::RandomMoments => moments(dev, &name, dtype, config),
        Op::Constructors => run(n, config, vec![], constructors::cases_of(dtype), |c| {
            constructors::check(dev, c)
        }),
        Op::DisplaySmall => run(n, config, vec![], display::small_cases_of(dtype), |c| {
            display::check_small(dev, c)
        }),
        Op::DisplaySummary => run(n, config, vec![], display::big_shapes(), |s| {
            display::check_big(dev, s)
        }),
        Op::Gradient(o) => run(n, config, vec![], gradients::cases(o, dtype), |c| {
            gradients::check(dev, c)
        }),
        Op::Loss(l) => run(n, config, vec![], losses::cases(l, dtype), |c| {
            losses::check(dev, c)
        }),
        Op::Kink(k) => run(n, config, vec![], kinks::cases(k, dtype), |c| {
            kinks::check(dev, c)
        }),
        Op::Law(law) => run(n, config, vec![], metamorphic::cases(law, dtype), |c| {
            metamorphic::check(dev, c)
        }),
        Op::Error(o) => errors::check(dev, o, dtype).map_err(|reason| Counterexample {
            property: name.clone(),
            reason,
            input: Some(Printed(format!(
                "direct calls of `{}` with bad {dtype} operands (tessera_conformance::checks::errors)",
                o.name()
            ))),
            base_seed: config.base_seed,
            regression_file: None,
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
