//! Minimising a counterexample beyond proptest's shrinking.
//!
//! The case strategies are nested `prop_flat_map`s (shape, then layout, then values). proptest
//! shrinks the innermost level first, so a failure found on a `[5, 4, 3]` tensor spends its
//! shrink budget zeroing sixty values and rarely gets to a smaller shape. After proptest's
//! shrink, [`minimize`] therefore:
//!
//! 1. searches: draws fresh cases from the same strategy and keeps any failing one that is
//!    smaller (by the length of its `Debug` text, a proxy for dimensions and element count);
//!    only candidates smaller than the best so far are checked, so this is cheap;
//! 2. shrinks the smallest failing draw with proptest's own value tree, which on a small case
//!    finishes well within budget.
//!
//! The search draws from an RNG seeded by the property's seed, so a rerun with the same base
//! seed finds the same minimal case.

use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngSeed, TestRunner};
use std::fmt::Debug;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Fresh draws examined when searching for a smaller failing case.
pub const SEARCH_DRAWS: usize = 3000;
/// Simplification steps when shrinking the smallest failing draw.
pub const SHRINK_STEPS: usize = 4000;

/// The size of a case: the length of its compact `Debug` text.
pub fn case_size<T: Debug>(value: &T) -> usize {
    format!("{value:?}").len()
}

/// Runs `check`, counting a panic as a failure.
fn outcome<T>(check: &impl Fn(&T) -> Result<(), String>, value: &T) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| check(value))) {
        Ok(result) => result,
        Err(panic) => Err(panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into())),
    }
}

/// Moves to the first failing case of `smaller(value)` (a family's own reductions, e.g. one
/// element of an element-wise op's operands), again and again until none of them fails. The
/// candidates must be strictly smaller than the case they come from, so that this ends.
pub fn reduce<T>(
    value: T,
    reason: String,
    check: &impl Fn(&T) -> Result<(), String>,
    smaller: &impl Fn(&T) -> Vec<T>,
) -> (T, String) {
    let (mut best, mut why) = (value, reason);
    'outer: loop {
        for candidate in smaller(&best) {
            if let Err(w) = outcome(check, &candidate) {
                (best, why) = (candidate, w);
                continue 'outer;
            }
        }
        return (best, why);
    }
}

/// A failing case no larger than `(value, reason)`, found as the module docs describe.
pub fn minimize<S>(
    strategy: &S,
    seed: u64,
    value: S::Value,
    reason: String,
    check: &impl Fn(&S::Value) -> Result<(), String>,
) -> (S::Value, String)
where
    S: Strategy,
    S::Value: Debug,
{
    let config = Config {
        rng_seed: RngSeed::Fixed(seed ^ 0x5eed_5eed_5eed_5eed),
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let (mut best, mut best_reason, mut best_size) = (value, reason, 0);
    best_size += case_size(&best);

    // 1. Search for a smaller failing draw.
    let mut smallest_tree = None;
    for _ in 0..SEARCH_DRAWS {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let candidate = tree.current();
        let size = case_size(&candidate);
        if size >= best_size {
            continue;
        }
        if let Err(why) = outcome(check, &candidate) {
            (best, best_reason, best_size) = (candidate, why, size);
            smallest_tree = Some(tree);
        }
    }

    // 2. Shrink it: simplify while it fails, complicate back when it passes.
    if let Some(mut tree) = smallest_tree {
        let mut steps = 0;
        if tree.simplify() {
            while steps < SHRINK_STEPS {
                steps += 1;
                let candidate = tree.current();
                match outcome(check, &candidate) {
                    Err(why) => {
                        if case_size(&candidate) <= best_size {
                            best_size = case_size(&candidate);
                            (best, best_reason) = (candidate, why);
                        }
                        if !tree.simplify() {
                            break;
                        }
                    }
                    Ok(()) => {
                        if !tree.complicate() {
                            break;
                        }
                    }
                }
            }
        }
    }
    (best, best_reason)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn reductions_reach_the_one_failing_element() {
        // Fails when some element is 7; the reduction to one element finds it among 35.
        let check = |v: &Vec<u32>| {
            if v.contains(&7) {
                Err("has a 7".to_string())
            } else {
                Ok(())
            }
        };
        let smaller = |v: &Vec<u32>| {
            if v.len() <= 1 {
                vec![]
            } else {
                v.iter().map(|&x| vec![x]).collect()
            }
        };
        let start: Vec<u32> = (0..35).map(|i| i % 10).collect();
        let (small, why) = reduce(start, "has a 7".into(), &check, &smaller);
        assert_eq!((small, why.as_str()), (vec![7], "has a 7"));
    }

    #[test]
    fn finds_a_smaller_case_than_nested_shrinking() {
        // Fails whenever the vector has at least two elements and contains a 7: proptest's
        // shrink of a long vector keeps its length; the search finds a two-element one.
        let strategy = (0usize..40).prop_flat_map(|n| prop::collection::vec(0u32..10, n));
        let check = |v: &Vec<u32>| {
            if v.len() >= 2 && v.contains(&7) {
                Err("has a 7".to_string())
            } else {
                Ok(())
            }
        };
        let start: Vec<u32> = (0..35).map(|i| i % 10).collect();
        let (small, why) = minimize(&strategy, 1, start, "has a 7".into(), &check);
        assert_eq!(why, "has a 7");
        assert_eq!(small.len(), 2, "{small:?}");
        assert!(small.contains(&7));
    }
}
