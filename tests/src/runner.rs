//! Running a property: a proptest [`TestRunner`] with the default configuration (256 cases
//! unless `PROPTEST_CASES` says otherwise) that panics with the shrunk failing case.

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, TestCaseError, TestError, TestRunner};
use std::fmt::Debug;

/// Checks `check` on values drawn from `strategy`; on failure, shrinks and panics with `name`,
/// the reason and the minimal failing input (which prints op, shapes, layout recipe and values).
pub fn check_property<S>(name: &str, strategy: S, check: impl Fn(&S::Value) -> Result<(), String>)
where
    S: Strategy,
    S::Value: Debug,
{
    let config = Config {
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&strategy, |case| check(&case).map_err(TestCaseError::fail));
    match outcome {
        Ok(()) => {}
        Err(TestError::Fail(reason, case)) => {
            panic!("property `{name}` failed: {reason}\nminimal failing input: {case:#?}")
        }
        Err(TestError::Abort(reason)) => panic!("property `{name}` aborted: {reason}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn runs_the_default_number_of_cases() {
        let count = Cell::new(0u32);
        check_property("count", 0u32..100, |_| {
            count.set(count.get() + 1);
            Ok(())
        });
        assert_eq!(count.get(), Config::default().cases);
    }

    #[test]
    #[should_panic(expected = "minimal failing input: 10")]
    fn failures_shrink_to_the_minimal_case() {
        check_property("shrinks", 0u32..1000, |&v| {
            if v >= 10 {
                Err(format!("{v} is too big"))
            } else {
                Ok(())
            }
        });
    }
}
