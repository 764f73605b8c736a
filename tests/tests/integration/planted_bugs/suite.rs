//! Each planted bug fails its family in exactly the expected cells, with a small counterexample.

use super::planted;
use super::planted::Bug;
use tessera_conformance::checks::{binary, matmul, reduce};
use tessera_conformance::runner::{falsify, RunConfig};
use tessera_conformance::seed::SEED_VARIABLE;
use tessera_conformance::strategies::TensorCase;
use tessera_conformance::suite::{run_family, Family, Op, Outcome};
use tessera_core::{BinaryOp, DType, ReduceOp};

/// Runs `family` on the planted backend; returns the failed cells, after checking that every
/// other declared cell passed.
fn failed_cells(bug: Bug, family: Family) -> Vec<(Op, DType)> {
    let coverage = run_family(
        &planted(bug),
        family,
        &planted::capabilities(),
        &RunConfig::from_env(),
    );
    // The planted backends leave out the 16-bit floats (see `planted::capabilities`).
    let unsupported: Vec<(Op, DType)> = coverage
        .cells(Outcome::Unsupported)
        .into_iter()
        .filter(|(_, d)| !d.is_half())
        .collect();
    assert_eq!(unsupported, vec![], "{coverage}");
    assert_eq!(
        coverage.failures.len(),
        coverage.cells(Outcome::Fail).len(),
        "{coverage}"
    );
    for failure in &coverage.failures {
        let text = failure.to_string();
        assert!(
            text.contains("minimal failing input:") && text.contains("PROPTEST_RNG_SEED="),
            "{text}"
        );
    }
    coverage.cells(Outcome::Fail)
}

/// Elements of a tensor case as the op sees it.
fn numel(case: &TensorCase) -> usize {
    case.shape().iter().product()
}

/// The counterexample of a planted bug must be small: no tensor over `MAX_ELEMENTS`.
const MAX_ELEMENTS: usize = 16;

#[test]
fn the_healthy_wrapper_passes() {
    for family in [Family::Binary, Family::Reduce, Family::Matmul] {
        assert_eq!(failed_cells(Bug::None, family), vec![], "{family}");
    }
}

#[test]
fn a_wrong_broadcast_in_one_binary_op_is_caught() {
    let bug = Bug::WrongBroadcast(BinaryOp::Mul);
    let mul = Op::Binary(BinaryOp::Mul);
    let expected: Vec<(Op, DType)> = DType::ALL
        .into_iter()
        .filter(|d| !d.is_half())
        .map(|d| (mul, d))
        .collect();
    assert_eq!(failed_cells(bug, Family::Binary), expected);

    let dev = planted(bug);
    // The minimiser's size proxy (the case's Debug text) does not see the elements a broadcast
    // step adds, so on about 3% of base seeds (e.g. 110, 174, 210) the smallest case it finds
    // is `[2, 1, 1]` broadcast to `[4, 2, 1, 3]`: 24 elements. This assertion is about the
    // minimiser on a planted bug, so it runs on a fixed base seed unless PROPTEST_RNG_SEED
    // asks for another (the family check above still runs on every run's own seed).
    let config = match std::env::var_os(SEED_VARIABLE) {
        Some(_) => RunConfig::from_env(),
        None => RunConfig::from_env().with_base_seed(1),
    };
    let found = falsify(
        "planted wrong broadcast",
        binary::cases(BinaryOp::Mul, DType::F32),
        &config,
        |c| binary::check(&dev, c),
    )
    .expect_err("the wrong broadcast must be caught");
    let case = found.input.expect("a counterexample");
    let (l, r) = (numel(&case.lhs), numel(&case.rhs));
    assert!(
        l <= MAX_ELEMENTS && r <= MAX_ELEMENTS,
        "not shrunk: {case:#?}"
    );
    // The bug needs an operand broadcast along a non-leading axis, so both have 2+ elements
    // or one of them is broadcast inside the other.
    assert!(l.max(r) >= 2, "{case:#?}");
}

#[test]
fn an_off_by_one_in_a_reduction_over_an_outer_axis_is_caught() {
    let bug = Bug::SumOffByOneOnOuterAxis;
    let sum = Op::Reduce(ReduceOp::Sum);
    let expected: Vec<(Op, DType)> = DType::ALL
        .into_iter()
        .filter(|d| !d.is_half())
        .map(|d| (sum, d))
        .collect();
    assert_eq!(failed_cells(bug, Family::Reduce), expected);

    let dev = planted(bug);
    let found = falsify(
        "planted off by one",
        reduce::cases(ReduceOp::Sum, DType::F64),
        &RunConfig::from_env(),
        |c| reduce::check(&dev, c),
    )
    .expect_err("the off-by-one must be caught");
    let case = found.input.expect("a counterexample");
    assert!(numel(&case.input) <= MAX_ELEMENTS, "not shrunk: {case:#?}");
    // Only a reduction over an axis that is not the last can show the bug.
    let rank = case.input.shape().len();
    assert!(
        rank >= 2 && case.resolved_axes().iter().any(|&a| a + 1 < rank),
        "{case:#?}"
    );
}

#[test]
fn a_transposed_operand_ignored_by_matmul_is_caught() {
    let bug = Bug::MatmulIgnoresTranspose;
    let expected = vec![(Op::Matmul, DType::F32), (Op::Matmul, DType::F64)];
    assert_eq!(failed_cells(bug, Family::Matmul), expected);

    let dev = planted(bug);
    let found = falsify(
        "planted transpose",
        matmul::cases(DType::F32),
        &RunConfig::from_env(),
        |c| matmul::check(&dev, c),
    )
    .expect_err("the ignored transpose must be caught");
    let case = found.input.expect("a counterexample");
    let (l, r) = (numel(&case.lhs), numel(&case.rhs));
    assert!(
        l <= MAX_ELEMENTS && r <= MAX_ELEMENTS,
        "not shrunk: {case:#?}"
    );
    // Some operand was built through a permutation.
    let permuted = |c: &TensorCase| {
        c.recipe
            .steps
            .iter()
            .any(|s| matches!(s, tessera_conformance::strategies::ViewStep::Permute { .. }))
    };
    assert!(permuted(&case.lhs) || permuted(&case.rhs), "{case:#?}");
}

#[test]
fn nan_swallowed_by_max_is_caught() {
    let bug = Bug::MaxSwallowsNan;
    let max = Op::Reduce(ReduceOp::Max);
    let expected = vec![(max, DType::F32), (max, DType::F64)];
    assert_eq!(failed_cells(bug, Family::Reduce), expected);

    let dev = planted(bug);
    let found = falsify(
        "planted nan",
        reduce::cases(ReduceOp::Max, DType::F32),
        &RunConfig::from_env(),
        |c| reduce::check(&dev, c),
    )
    .expect_err("a swallowed NaN must be caught");
    let case = found.input.expect("a counterexample");
    assert!(numel(&case.input) <= 4, "not shrunk: {case:#?}");
    let logical = case.input.reference().data;
    assert!(logical.iter().any(|v| v.is_nan()), "{case:#?}");
    assert!(found.reason.contains("expected NaN"), "{}", found.reason);
}

#[test]
fn a_panic_on_a_bad_index_is_caught_by_the_errors_family() {
    use tessera_conformance::checks::errors::ErrorOp;
    let bug = Bug::IndexSelectPanicsOnBadIndex;
    let row = Op::Error(ErrorOp::IndexSelect);
    let expected: Vec<(Op, DType)> = DType::ALL
        .into_iter()
        .filter(|d| !d.is_half())
        .map(|d| (row, d))
        .collect();
    assert_eq!(failed_cells(Bug::None, Family::Errors), vec![]);
    assert_eq!(failed_cells(bug, Family::Errors), expected);

    let coverage = run_family(
        &planted(bug),
        Family::Errors,
        &planted::capabilities(),
        &RunConfig::from_env(),
    );
    let reason = &coverage.failures[0].reason;
    assert!(
        reason.contains("`index_select` panicked on index 3 on an axis of size 3")
            && reason.contains("`index_select` panicked on index i64::MAX"),
        "{reason}"
    );
    // The report names the method in the matrix too.
    let text = coverage.to_string();
    assert!(
        text.lines().any(|l| l.starts_with("errors index_select")
            && l.contains("FAIL")
            && l.ends_with("index_select")),
        "{text}"
    );
}

#[test]
fn an_adam_failure_shrinks_to_one_element_per_tensor() {
    use tessera_conformance::checks::fused;
    use tessera_conformance::runner::falsify_reducing;
    let dev = planted(Bug::AdamDropsBiasCorrection);
    let found = falsify_reducing(
        "planted adam",
        fused::cases(fused::FusedOp::AdamUpdate, DType::F32),
        &RunConfig::from_env(),
        |c| fused::check(&dev, c),
        &fused::smaller_cases,
    )
    .expect_err("the missing bias correction must be caught");
    let case = found.input.expect("a counterexample");
    let fused::FusedCase::Adam { tensors, .. } = &case else {
        panic!("{case:#?}")
    };
    assert!(
        tensors.iter().all(|t| numel(t) == 1),
        "not shrunk: {case:#?}"
    );
}
