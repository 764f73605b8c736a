//! Running a property: a proptest [`TestRunner`] (256 cases unless `PROPTEST_CASES` says
//! otherwise) seeded from the process's base seed ([`crate::seed`]), optionally persisting
//! failures to a regression file that every later run replays first.
//!
//! A failure is shrunk by proptest, then minimised further by [`crate::minimize`]. [`falsify`]
//! returns the minimal counterexample as a value; [`check_property`] panics with its
//! description. [`falsify_systematic`] first runs every [`Pattern`] of a property (the layout
//! kinds and broadcast patterns of `crate::strategies::patterns`, a few cases each), then the
//! random cases, so that every structure is checked in every run whatever the seed.

use crate::minimize::{minimize, reduce};
use crate::seed::{base_seed, property_seed, SEED_VARIABLE};
use crate::strategies::{Pattern, PATTERN_CASES};
use proptest::strategy::Strategy;
use proptest::test_runner::{
    Config, FileFailurePersistence, RngSeed, TestCaseError, TestError, TestRunner,
};
use std::fmt::{self, Debug};
use std::path::{Path, PathBuf};

/// How properties run: number of cases, base seed and where failures are persisted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunConfig {
    /// Successful cases needed to pass (proptest's default 256, or `PROPTEST_CASES`).
    pub cases: u32,
    /// The base seed every property derives its seed from.
    pub base_seed: u64,
    /// Folder of the regression files (one per property), or `None` to persist nothing.
    pub regressions: Option<PathBuf>,
    /// Cases drawn from each systematic pattern before the random ones ([`PATTERN_CASES`]).
    pub pattern_cases: u32,
    /// Whether a failure is minimised beyond proptest's shrinking ([`crate::minimize`]); off
    /// where only the fact of a failure matters (the harness's own seed-robustness tests).
    pub minimize: bool,
}

impl RunConfig {
    /// The default case count (honouring `PROPTEST_CASES`), the process's base seed and no
    /// persistence.
    pub fn from_env() -> Self {
        RunConfig {
            cases: Config::default().cases,
            base_seed: base_seed(),
            regressions: None,
            pattern_cases: PATTERN_CASES,
            minimize: true,
        }
    }

    /// The same configuration persisting failures under `dir`.
    pub fn with_regressions(self, dir: impl Into<PathBuf>) -> Self {
        RunConfig {
            regressions: Some(dir.into()),
            ..self
        }
    }

    /// The same configuration with `cases` cases.
    pub fn with_cases(self, cases: u32) -> Self {
        RunConfig { cases, ..self }
    }

    /// The same configuration with base seed `base_seed`.
    pub fn with_base_seed(self, base_seed: u64) -> Self {
        RunConfig { base_seed, ..self }
    }

    /// The same configuration without minimising failures (faster when only the fact of a
    /// failure is checked).
    pub fn without_minimizing(self) -> Self {
        RunConfig {
            minimize: false,
            ..self
        }
    }

    /// The regression file of property `name`: its name with every character other than a
    /// letter, digit, `-` or `_` replaced by `-`, plus `.txt`.
    pub fn regression_file(&self, name: &str) -> Option<PathBuf> {
        let file: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '-'
                }
            })
            .collect();
        self.regressions
            .as_ref()
            .map(|dir| dir.join(format!("{file}.txt")))
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig::from_env()
    }
}

/// A property that failed: why, on which (shrunk) input, and how to reproduce it.
#[derive(Clone, Debug)]
pub struct Counterexample<T> {
    /// The property's name (op and dtype).
    pub property: String,
    /// The failure reported for the minimal input.
    pub reason: String,
    /// The minimal failing input; `None` when the run aborted (e.g. too many rejected cases).
    pub input: Option<T>,
    /// The base seed: rerunning with `PROPTEST_RNG_SEED` set to it draws the same cases.
    pub base_seed: u64,
    /// The regression file the failing seed was appended to, if persistence is on.
    pub regression_file: Option<PathBuf>,
}

/// An input already printed with `{:#?}`, shown as is: lets counterexamples of different
/// case types be gathered in one list.
#[derive(Clone, PartialEq, Eq)]
pub struct Printed(pub String);

impl Debug for Printed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<T: Debug> Counterexample<T> {
    /// The same counterexample with its input printed (to gather failures of different types).
    pub fn described(&self) -> Counterexample<Printed> {
        Counterexample {
            property: self.property.clone(),
            reason: self.reason.clone(),
            input: self.input.as_ref().map(|i| Printed(format!("{i:#?}"))),
            base_seed: self.base_seed,
            regression_file: self.regression_file.clone(),
        }
    }
}

impl<T: Debug> fmt::Display for Counterexample<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "property `{}` failed: {}", self.property, self.reason)?;
        match &self.input {
            Some(input) => writeln!(f, "minimal failing input: {input:#?}")?,
            None => writeln!(f, "(the run aborted before finding an input)")?,
        }
        write!(
            f,
            "reproduce: {SEED_VARIABLE}={} draws the same cases and shrinks the same way",
            self.base_seed
        )?;
        if let Some(file) = &self.regression_file {
            write!(
                f,
                "\npersisted: {} (replayed first by every later run)",
                file.display()
            )?;
        }
        Ok(())
    }
}

/// A path as the `&'static str` proptest's file persistence wants (leaked: one per property
/// run, a few dozen bytes).
fn leak_path(path: &Path) -> &'static str {
    Box::leak(path.to_string_lossy().into_owned().into_boxed_str())
}

/// Runs `check` on values drawn from `strategy` until `config.cases` pass or one fails; a
/// failure is shrunk to a minimal input and returned. Persisted failures of this property are
/// replayed first.
pub fn falsify<S>(
    name: &str,
    strategy: S,
    config: &RunConfig,
    check: impl Fn(&S::Value) -> Result<(), String>,
) -> Result<(), Counterexample<S::Value>>
where
    S: Strategy,
    S::Value: Debug,
{
    falsify_reducing(name, strategy, config, check, &|_| Vec::new())
}

/// [`falsify`] with a family's own reductions of a failing case, tried before the generic
/// minimisation ([`crate::minimize::reduce`]: e.g. each element of an element-wise op alone,
/// which proptest's shrinking of nested strategies does not reach).
pub fn falsify_reducing<S>(
    name: &str,
    strategy: S,
    config: &RunConfig,
    check: impl Fn(&S::Value) -> Result<(), String>,
    smaller: &impl Fn(&S::Value) -> Vec<S::Value>,
) -> Result<(), Counterexample<S::Value>>
where
    S: Strategy,
    S::Value: Debug,
{
    let regression_file = config.regression_file(name);
    let persistence = regression_file
        .as_deref()
        .map(|p| Box::new(FileFailurePersistence::Direct(leak_path(p))) as Box<_>);
    let proptest_config = Config {
        cases: config.cases,
        rng_seed: RngSeed::Fixed(property_seed(config.base_seed, name)),
        failure_persistence: persistence,
        max_shrink_iters: 1024,
        ..Config::default()
    };
    let mut runner = TestRunner::new(proptest_config);
    let failure = |reason: String, input: Option<S::Value>| Counterexample {
        property: name.to_string(),
        reason,
        input,
        base_seed: config.base_seed,
        regression_file: regression_file.clone(),
    };
    match runner.run(&strategy, |case| check(&case).map_err(TestCaseError::fail)) {
        Ok(()) => Ok(()),
        Err(TestError::Fail(reason, case)) if config.minimize => {
            let seed = property_seed(config.base_seed, name);
            let (case, reason) = reduce(case, reason.to_string(), &check, smaller);
            let (case, reason) = minimize(&strategy, seed, case, reason, &check);
            Err(failure(reason, Some(case)))
        }
        Err(TestError::Fail(reason, case)) => Err(failure(reason.to_string(), Some(case))),
        Err(TestError::Abort(reason)) => Err(failure(format!("aborted: {reason}"), None)),
    }
}

/// Runs every pattern (`config.pattern_cases` cases each, not persisted: they run in every run
/// anyway), then `config.cases` random cases from `random` as [`falsify`] does. The first
/// failure is returned, minimised within its pattern, whose label is appended to the property
/// name (`"binary mul f32 [lhs [a, 1], rhs [b]]"`).
pub fn falsify_systematic<S>(
    name: &str,
    patterns: Vec<Pattern<S::Value>>,
    random: S,
    config: &RunConfig,
    check: impl Fn(&S::Value) -> Result<(), String>,
) -> Result<(), Counterexample<S::Value>>
where
    S: Strategy,
    S::Value: Debug,
{
    falsify_systematic_reducing(name, patterns, random, config, check, &|_| Vec::new())
}

/// [`falsify_systematic`] with a family's own reductions of a failing case (see
/// [`falsify_reducing`]).
pub fn falsify_systematic_reducing<S>(
    name: &str,
    patterns: Vec<Pattern<S::Value>>,
    random: S,
    config: &RunConfig,
    check: impl Fn(&S::Value) -> Result<(), String>,
    smaller: &impl Fn(&S::Value) -> Vec<S::Value>,
) -> Result<(), Counterexample<S::Value>>
where
    S: Strategy,
    S::Value: Debug,
{
    if config.pattern_cases > 0 {
        let systematic = RunConfig {
            cases: config.pattern_cases,
            regressions: None,
            ..config.clone()
        };
        for pattern in patterns {
            let labelled = format!("{name} [{}]", pattern.label);
            falsify_reducing(&labelled, pattern.strategy, &systematic, &check, smaller)?;
        }
    }
    falsify_reducing(name, random, config, check, smaller)
}

/// Checks `check` on values drawn from `strategy` (no persistence); on failure, shrinks and
/// panics with `name`, the reason, the minimal failing input (which prints op, shapes, layout
/// recipe and values) and the seed that reproduces it.
pub fn check_property<S>(name: &str, strategy: S, check: impl Fn(&S::Value) -> Result<(), String>)
where
    S: Strategy,
    S::Value: Debug,
{
    if let Err(counterexample) = falsify(name, strategy, &RunConfig::from_env(), check) {
        panic!("{counterexample}");
    }
}

/// [`check_property`] with the systematic patterns first ([`falsify_systematic`]).
pub fn check_property_systematic<S>(
    name: &str,
    patterns: Vec<Pattern<S::Value>>,
    random: S,
    check: impl Fn(&S::Value) -> Result<(), String>,
) where
    S: Strategy,
    S::Value: Debug,
{
    if let Err(counterexample) =
        falsify_systematic(name, patterns, random, &RunConfig::from_env(), check)
    {
        panic!("{counterexample}");
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

    #[test]
    fn the_same_base_seed_draws_the_same_cases() {
        let draws = |base: u64| {
            let seen = std::cell::RefCell::new(Vec::new());
            let config = RunConfig::from_env().with_cases(20);
            let config = RunConfig {
                base_seed: base,
                ..config
            };
            falsify("draws", 0u64..1_000_000, &config, |&v| {
                seen.borrow_mut().push(v);
                Ok(())
            })
            .unwrap();
            seen.into_inner()
        };
        assert_eq!(draws(3), draws(3));
        assert_ne!(draws(3), draws(4));
    }

    #[test]
    fn failures_are_persisted_and_replayed_first() {
        let dir = std::env::temp_dir().join(format!(
            "tessera-regressions-{}-{}",
            std::process::id(),
            base_seed()
        ));
        let config = RunConfig::from_env().with_regressions(&dir);
        let fail_big = |v: &u64| {
            if *v >= 500 {
                Err("big".to_string())
            } else {
                Ok(())
            }
        };
        let first = falsify("persist me", 0u64..1000, &config, fail_big).unwrap_err();
        let file = first.regression_file.clone().expect("persistence is on");
        assert_eq!(file, dir.join("persist-me.txt"));
        let text = std::fs::read_to_string(&file).expect("the regression file exists");
        assert!(text.contains("cc ") && text.contains("500"), "{text}");
        assert!(first.to_string().contains("persisted:"), "{first}");

        // A later run with another base seed replays the persisted case before anything else.
        let seen = std::cell::RefCell::new(Vec::new());
        let later = RunConfig {
            base_seed: first.base_seed.wrapping_add(1),
            ..config
        };
        let _ = falsify("persist me", 0u64..1000, &later, |&v| {
            seen.borrow_mut().push(v);
            fail_big(&v)
        });
        assert!(
            seen.borrow()[0] >= 500,
            "first value {:?}",
            seen.borrow()[0]
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
