//! The two cast input classes of issue 22, each shown by a planted bug that the cast family
//! must catch on every seed: a cast that flushes subnormal results to zero (caught by the
//! target-boundary values) and an `f64 -> f16/bf16` cast that rounds twice, through f32
//! (caught by the values next to the 16-bit ties).
//!
//! The bugs are planted in the CPU backend, which holds the 16-bit floats. Ten base seeds are
//! derived from the process's (`PROPTEST_RNG_SEED` fixes it), so every run tries ten new ones;
//! on each, the whole cast family runs at the default case count and must fail in exactly the
//! cells the bug touches, and the random cases alone (the systematic patterns off) must catch
//! each of those cells too. Failures are not minimised there; one test per bug checks that the
//! counterexample shrinks to the single offending element.

use super::planted::{Bug, Planted};
use tessera_conformance::checks::cast;
use tessera_conformance::reference::elementwise::round_to;
use tessera_conformance::runner::{falsify_systematic_reducing, RunConfig};
use tessera_conformance::seed::base_seed;
use tessera_conformance::strategies::layouts::TensorCase;
use tessera_conformance::suite::{check_cell, run_family, Capabilities, Family, Op, Outcome};
use tessera_core::DType;
use tessera_cpu::Cpu;

/// Seeds per bug.
const SEEDS: u64 = 10;

/// The CPU backend carrying `bug`.
fn planted_cpu(bug: Bug) -> Planted<Cpu> {
    Planted::new(Cpu::new(), bug)
}

/// Ten base seeds derived from this process's.
fn seeds() -> Vec<u64> {
    (0..SEEDS)
        .map(|i| base_seed() ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect()
}

/// `(cast to to, from)` cells, in the order of the coverage matrix.
fn cells(pairs: &[(DType, DType)]) -> Vec<(Op, DType)> {
    let mut out: Vec<(Op, DType)> = pairs
        .iter()
        .map(|&(from, to)| (Op::CastTo(to), from))
        .collect();
    let index = |d: DType| DType::ALL.iter().position(|&x| x == d).unwrap();
    out.sort_by_key(|&(op, from)| match op {
        Op::CastTo(to) => (index(to), index(from)),
        _ => unreachable!(),
    });
    out
}

/// Asserts that the cast family fails in exactly `expected` on every seed, and that the
/// random cases alone (without the systematic patterns) catch every expected cell too.
fn caught_on_every_seed(bug: Bug, expected: &[(Op, DType)]) {
    let dev = planted_cpu(bug);
    let capabilities = Capabilities::declared_by(&dev);
    assert_eq!(
        capabilities.dtypes(),
        DType::ALL,
        "the casts keep every dtype"
    );
    for seed in seeds() {
        let config = RunConfig::from_env()
            .with_base_seed(seed)
            .without_minimizing();
        let coverage = run_family(&dev, Family::Cast, &capabilities, &config);
        assert_eq!(
            coverage.cells(Outcome::Fail),
            expected,
            "{bug:?} on seed {seed} (PROPTEST_RNG_SEED={seed}):\n{coverage}"
        );
        let random_only = RunConfig {
            pattern_cases: 0,
            ..config
        };
        for &(op, dtype) in expected {
            assert!(
                check_cell(&dev, op, dtype, &random_only).is_err(),
                "{bug:?} escaped the random cases of {op} {dtype} on seed {seed}"
            );
        }
    }
}

/// The minimal counterexample of `from -> to` on the planted backend: its one source value.
fn minimal_value(bug: Bug, from: DType, to: DType) -> f64 {
    let dev = planted_cpu(bug);
    // A cast is element-wise: each element of a failing view, cast alone, is a smaller case
    // (without this, how far proptest's shrinking gets depends on the seed).
    let one_element = |case: &cast::CastCase| -> Vec<cast::CastCase> {
        let values = case.input.reference().data;
        if values.len() < 2 {
            return Vec::new();
        }
        values
            .into_iter()
            .map(|v| cast::CastCase {
                input: TensorCase::contiguous(case.input.dtype, vec![1], vec![v]),
                to: case.to,
            })
            .collect()
    };
    let found = falsify_systematic_reducing(
        &format!("planted {bug:?} {from} -> {to}"),
        cast::patterns(from, to),
        cast::cases(from, to),
        &RunConfig::from_env(),
        |c| cast::check(&dev, c),
        &one_element,
    )
    .expect_err("the planted cast bug must be caught");
    let case = found.input.expect("a counterexample");
    let values = case.input.reference().data;
    assert_eq!(values.len(), 1, "not shrunk to one element: {case:#?}");
    values[0]
}

#[test]
fn a_cast_that_flushes_subnormal_results_is_caught_on_every_seed() {
    // Every pair whose source holds a value that is subnormal in the target: the narrowing
    // float casts, and bf16 -> f32 (bf16's subnormals are f32's). Not f16 -> anything (its
    // subnormals are normal in f32, f64 and bf16), integers or bools.
    let expected = cells(&[
        (DType::F64, DType::F32),
        (DType::BF16, DType::F32),
        (DType::F32, DType::F16),
        (DType::F64, DType::F16),
        (DType::BF16, DType::F16),
        (DType::F32, DType::BF16),
        (DType::F64, DType::BF16),
    ]);
    caught_on_every_seed(Bug::CastFlushesSubnormals, &expected);

    for (from, to) in [(DType::F64, DType::F16), (DType::F32, DType::BF16)] {
        let v = minimal_value(Bug::CastFlushesSubnormals, from, to);
        let r = round_to(to, v);
        assert!(
            r != 0.0 && r.abs() < cast::Format::of(to).unwrap().min_normal(),
            "{from} -> {to}: {v:e} does not round to a subnormal"
        );
    }
}

#[test]
fn an_f64_to_16_bit_cast_that_rounds_twice_is_caught_on_every_seed() {
    let expected = cells(&[(DType::F64, DType::F16), (DType::F64, DType::BF16)]);
    caught_on_every_seed(Bug::CastRoundsTwiceThroughF32, &expected);

    for to in [DType::F16, DType::BF16] {
        let v = minimal_value(Bug::CastRoundsTwiceThroughF32, DType::F64, to);
        // Next to a tie: the f32 rounding lands on it and the second rounding goes the other
        // way.
        assert_ne!(
            round_to(to, round_to(DType::F32, v)),
            round_to(to, v),
            "{v:e}"
        );
    }
}

#[test]
fn the_healthy_wrapper_passes_every_cast() {
    let dev = planted_cpu(Bug::None);
    let coverage = run_family(
        &dev,
        Family::Cast,
        &Capabilities::declared_by(&dev),
        &RunConfig::from_env(),
    );
    assert!(coverage.passed(), "{coverage}");
}
