//! `cargo xtask conformance-long`: the conformance families whose tolerances come from error
//! bounds (the fused composites, Adam among them) at many more cases and seeds than CI runs,
//! to show the bounds raise no false alarm (issue 28: seed 2 at 2,000 cases once failed a
//! correct Adam).
//!
//! For each base seed (`--seeds`, default 1 to 10) it runs `cargo test -p
//! tessera-conformance` on the CPU and example backends' suites (`--tests`, default
//! `conformance_cpu` and `conformance_example`), filtered to the families of `--families`
//! (default `fused`), with `PROPTEST_RNG_SEED=<seed>` and `PROPTEST_CASES=<--cases>` (default
//! 2,000). It prints the time of every run and a summary, and fails if any run failed (each
//! failure report names its property and seed; the failing case is persisted under
//! `tests/proptest-regressions/`). Not part of `cargo xtask ci`: at the defaults it takes
//! minutes, not seconds.

use std::time::{Duration, Instant};

use clap::Args;

use crate::process::{cargo, display_command};
use crate::TaskResult;

/// Arguments of `cargo xtask conformance-long`.
#[derive(Debug, Args)]
pub struct ConformanceLongArgs {
    /// Random cases per property (`PROPTEST_CASES`).
    #[arg(long, default_value_t = 2000)]
    pub cases: u32,
    /// The base seeds, as `first..=last` or a comma-separated list.
    #[arg(long, default_value = "1..=10", value_parser = parse_seeds)]
    pub seeds: Seeds,
    /// The families (the generated tests' names) to run.
    #[arg(long, value_delimiter = ',', default_value = "fused")]
    pub families: Vec<String>,
    /// The modules of `tessera-conformance`'s integration tests that run the suite on a backend.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "conformance_cpu,conformance_example"
    )]
    pub tests: Vec<String>,
    /// Build and run in release (faster cases, a longer first build).
    #[arg(long)]
    pub release: bool,
}

/// A list of base seeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Seeds(pub Vec<u64>);

/// Parses `a..=b`, `a..b` or `a,b,c`.
pub fn parse_seeds(text: &str) -> Result<Seeds, String> {
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .map_err(|e| format!("`{s}` is not a seed: {e}"))
    };
    let seeds: Vec<u64> = if let Some((a, b)) = text.split_once("..=") {
        (number(a)?..=number(b)?).collect()
    } else if let Some((a, b)) = text.split_once("..") {
        (number(a)?..number(b)?).collect()
    } else {
        text.split(',').map(number).collect::<Result<_, _>>()?
    };
    if seeds.is_empty() {
        return Err(format!("`{text}` names no seed"));
    }
    Ok(Seeds(seeds))
}

/// The `cargo test` command of one run.
pub fn command(args: &ConformanceLongArgs, seed: u64) -> std::process::Command {
    let mut words: Vec<String> = vec!["test".into(), "-p".into(), "tessera-conformance".into()];
    if args.release {
        words.push("--release".into());
    }
    // The suites are modules of the crate's one integration-test binary: each generated test is
    // `<module>::<family>`.
    words.extend([
        "--test".into(),
        "integration".into(),
        "--".into(),
        "--exact".into(),
    ]);
    for test in &args.tests {
        for family in &args.families {
            words.push(format!("{test}::{family}"));
        }
    }
    let mut cmd = cargo(words);
    cmd.env("PROPTEST_RNG_SEED", seed.to_string())
        .env("PROPTEST_CASES", args.cases.to_string());
    cmd
}

/// Runs the task.
pub fn run(args: &ConformanceLongArgs) -> TaskResult<()> {
    // Build first, so that the timings below are of the runs alone.
    let mut build = command(args, 0);
    build.arg("--list");
    println!(
        "==> conformance-long: building ({})",
        display_command(&build)
    );
    let status = build.stdout(std::process::Stdio::null()).status()?;
    if !status.success() {
        return Err(format!("`{}` failed ({status})", display_command(&build)).into());
    }
    let mut results: Vec<(u64, Duration, bool)> = Vec::new();
    for &seed in &args.seeds.0 {
        let mut cmd = command(args, seed);
        println!(
            "==> conformance-long: seed {seed}, {} cases: PROPTEST_RNG_SEED={seed} PROPTEST_CASES={} {}",
            args.cases,
            args.cases,
            display_command(&cmd)
        );
        let start = Instant::now();
        let ok = cmd.status()?.success();
        let took = start.elapsed();
        println!(
            "==> conformance-long: seed {seed} {} in {:.1} s",
            if ok { "passed" } else { "FAILED" },
            took.as_secs_f64()
        );
        results.push((seed, took, ok));
    }
    let total: Duration = results.iter().map(|r| r.1).sum();
    println!(
        "==> conformance-long summary ({} on {}, {} cases):",
        args.families.join(", "),
        args.tests.join(", "),
        args.cases
    );
    for (seed, took, ok) in &results {
        println!(
            "    seed {seed:>4}: {:6} {:7.1} s",
            if *ok { "pass" } else { "FAIL" },
            took.as_secs_f64()
        );
    }
    println!("    total {:.1} s", total.as_secs_f64());
    let failed: Vec<String> = results
        .iter()
        .filter(|r| !r.2)
        .map(|r| r.0.to_string())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!("failed on seeds {}", failed.join(", ")).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: ConformanceLongArgs,
    }

    #[test]
    fn seeds_parse() {
        assert_eq!(parse_seeds("1..=3"), Ok(Seeds(vec![1, 2, 3])));
        assert_eq!(parse_seeds("1..3"), Ok(Seeds(vec![1, 2])));
        assert_eq!(parse_seeds("2, 7"), Ok(Seeds(vec![2, 7])));
        assert!(parse_seeds("3..1").is_err());
        assert!(parse_seeds("x").is_err());
    }

    #[test]
    fn defaults_are_2000_fused_cases_on_seeds_1_to_10() {
        let cli = Cli::parse_from(["conformance-long"]);
        assert_eq!(cli.args.cases, 2000);
        assert_eq!(cli.args.seeds, Seeds((1..=10).collect()));
        let cmd = command(&cli.args, 4);
        let line = display_command(&cmd);
        assert!(
            line.ends_with(
                "test -p tessera-conformance --test integration -- --exact conformance_cpu::fused conformance_example::fused"
            ),
            "{line}"
        );
        let envs: Vec<_> = cmd.get_envs().collect();
        assert!(envs.contains(&(
            std::ffi::OsStr::new("PROPTEST_RNG_SEED"),
            Some(std::ffi::OsStr::new("4"))
        )));
    }
}
