//! One planted bug per class of the conformance issue, each caught by the suite on ten
//! different seeds at the default case count, in exactly the cells it touches.
//!
//! | class | what the suite used to miss | planted bug |
//! | --- | --- | --- |
//! | 1 | methods it never called | Adam without its bias correction; the ReLU gradient at 0 |
//! | 2 | values that hide instability | softmax without the max shift; an overflowing sigmoid; max pooling's last tie |
//! | 3 | shape patterns drawn too rarely | matmul batch offsets from the flattened batch index; causal attention aligned bottom-right |
//! | 4 | edge semantics | softmax with a finite shift (`+inf` rows); the ReLU gradient blocking NaN |
//! | 5 | tolerances too loose for a rounding-level formula change | sigmoid through tanh; log-softmax as `x - logsumexp`; cross-entropy as `logsumexp - x_t` |
//!
//! The seeds are drawn from the process's base seed (`PROPTEST_RNG_SEED` fixes it), so every run
//! tries ten new ones: a bug caught only by lucky draws fails here sooner or later. The first
//! seed runs the whole family (no other cell may fail), the other nine the affected cells;
//! failures are not minimised (only the fact of the failure matters), which keeps this cheap.

use super::planted;
use super::planted::Bug;
use tessera_conformance::checks::attention::AttentionOp;
use tessera_conformance::checks::fused::FusedOp;
use tessera_conformance::checks::kinks::Kink;
use tessera_conformance::checks::pool::PoolOp;
use tessera_conformance::checks::softmax::SoftmaxOp;
use tessera_conformance::runner::RunConfig;
use tessera_conformance::seed::base_seed;
use tessera_conformance::suite::{check_cell, run_family, Family, Op, Outcome};
use tessera_core::{DType, UnaryOp};

/// Seeds per bug.
const SEEDS: u64 = 10;

/// Ten base seeds derived from this process's.
fn seeds() -> Vec<u64> {
    (0..SEEDS)
        .map(|i| base_seed() ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15))
        .collect()
}

/// `op` on f32 and f64.
fn floats(op: Op) -> Vec<(Op, DType)> {
    vec![(op, DType::F32), (op, DType::F64)]
}

/// Asserts that `family` fails in exactly `expected` on the planted backend (the whole family
/// on the first seed, so that no other cell fails), and that every expected cell fails on each
/// of the other nine seeds.
fn caught_on_every_seed(bug: Bug, family: Family, expected: &[(Op, DType)]) {
    let dev = planted(bug);
    let config = |seed| {
        RunConfig::from_env()
            .with_base_seed(seed)
            .without_minimizing()
    };
    let seeds = seeds();
    let coverage = run_family(&dev, family, &planted::capabilities(), &config(seeds[0]));
    assert_eq!(
        coverage.cells(Outcome::Fail),
        expected,
        "{bug:?} on seed {} (PROPTEST_RNG_SEED={0}):\n{coverage}",
        seeds[0]
    );
    for &seed in &seeds[1..] {
        for &(op, dtype) in expected {
            assert!(
                check_cell(&dev, op, dtype, &config(seed)).is_err(),
                "{bug:?} escaped {op} {dtype} on seed {seed} (PROPTEST_RNG_SEED={seed})"
            );
        }
    }
}

#[test]
fn class_1_adam_without_its_bias_correction() {
    caught_on_every_seed(
        Bug::AdamDropsBiasCorrection,
        Family::Fused,
        &floats(Op::Fused(FusedOp::AdamUpdate)),
    );
}

#[test]
fn class_1_and_2_the_relu_gradient_at_zero() {
    let bug = Bug::ReluGradAtZero;
    caught_on_every_seed(
        bug,
        Family::Fused,
        &floats(Op::Fused(FusedOp::ReluBackward)),
    );
    caught_on_every_seed(bug, Family::Gradients, &floats(Op::Kink(Kink::Relu)));
}

#[test]
fn class_2_softmax_without_the_max_shift() {
    caught_on_every_seed(
        Bug::SoftmaxWithoutShift,
        Family::Softmax,
        &floats(Op::Softmax(SoftmaxOp::Softmax)),
    );
}

#[test]
fn class_2_a_sigmoid_that_overflows() {
    caught_on_every_seed(
        Bug::SigmoidOverflows,
        Family::Unary,
        &floats(Op::Unary(UnaryOp::Sigmoid)),
    );
}

#[test]
fn class_2_max_pooling_keeping_the_last_tie() {
    let bug = Bug::MaxPoolLastTie;
    caught_on_every_seed(bug, Family::Pool, &floats(Op::Pool(PoolOp::Max)));
    caught_on_every_seed(bug, Family::Gradients, &floats(Op::Kink(Kink::MaxPoolTies)));
}

#[test]
fn class_3_matmul_batch_offsets_from_the_flat_batch_index() {
    caught_on_every_seed(Bug::MatmulFlatBatch, Family::Matmul, &floats(Op::Matmul));
}

#[test]
fn class_3_causal_attention_aligned_bottom_right() {
    caught_on_every_seed(
        Bug::AttentionCausalBottomRight,
        Family::Attention,
        &AttentionOp::ALL
            .into_iter()
            .flat_map(|op| floats(Op::Attention(op)))
            .collect::<Vec<_>>(),
    );
}

#[test]
fn class_4_softmax_with_a_finite_shift() {
    caught_on_every_seed(
        Bug::SoftmaxFiniteShift,
        Family::Softmax,
        &floats(Op::Softmax(SoftmaxOp::Softmax)),
    );
}

#[test]
fn class_4_a_relu_gradient_that_blocks_nan() {
    caught_on_every_seed(
        Bug::ReluGradBlocksNan,
        Family::Fused,
        &floats(Op::Fused(FusedOp::ReluBackward)),
    );
}

#[test]
fn class_5_sigmoid_through_tanh() {
    caught_on_every_seed(
        Bug::SigmoidViaTanh,
        Family::Unary,
        &floats(Op::Unary(UnaryOp::Sigmoid)),
    );
}

#[test]
fn class_5_log_softmax_as_x_minus_logsumexp() {
    caught_on_every_seed(
        Bug::LogSoftmaxMinusLse,
        Family::Softmax,
        &floats(Op::Softmax(SoftmaxOp::LogSoftmax)),
    );
}

#[test]
fn class_5_cross_entropy_as_logsumexp_minus_the_target_logit() {
    caught_on_every_seed(
        Bug::CrossEntropyUnshifted,
        Family::Fused,
        &floats(Op::Fused(FusedOp::CrossEntropy)),
    );
}

#[test]
fn the_healthy_wrapper_passes_these_families() {
    let config = RunConfig::from_env();
    for family in [
        Family::Fused,
        Family::Softmax,
        Family::Unary,
        Family::Pool,
        Family::Matmul,
        Family::Attention,
    ] {
        let coverage = run_family(
            &planted(Bug::None),
            family,
            &planted::capabilities(),
            &config,
        );
        assert!(coverage.passed(), "{coverage}");
    }
}
