//! `cargo xtask fuzz --minutes N`: the long fuzz run.
//!
//! First the bad-input regression tests (issue 11's reproducers) in **release** (`cargo test
//! --release -p fuzz --test bad_input_gets_a_typed_error`: no overflow checks, no debug
//! assertions, so release builds are checked to behave like the debug builds CI tests), then the
//! fuzzer itself, built in release, for `--minutes` from a fresh seed (or `--seed`) in `--jobs`
//! memory-limited children. Fails when a reproducer fails or the fuzzer finds a panic, an
//! abort, a hang or a broken invariant; the report names each failing program and its seed
//! (`cargo run -p fuzz -- replay --seed N` reruns one). See `fuzz/src/lib.rs`.

use clap::Args;

use crate::process::{cargo, run_checked};
use crate::TaskResult;

/// Arguments of `cargo xtask fuzz`.
#[derive(Debug, Args)]
pub struct FuzzArgs {
    /// How long the fuzzer runs, in minutes.
    #[arg(long, default_value_t = 10.0)]
    pub minutes: f64,
    /// The first program's seed (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Child processes at once.
    #[arg(long, default_value_t = 2)]
    pub jobs: u64,
    /// Skip the release run of the reproducers.
    #[arg(long)]
    pub no_reproducers: bool,
}

/// Runs the task.
pub fn run(args: &FuzzArgs) -> TaskResult<()> {
    if !args.no_reproducers {
        println!("==> fuzz: the bad-input regression tests in release");
        run_checked(&mut cargo([
            "test",
            "--release",
            "-p",
            "fuzz",
            "--test",
            "bad_input_gets_a_typed_error",
        ]))?;
    }
    println!(
        "==> fuzz: {} minutes of random programs (release)",
        args.minutes
    );
    let minutes = args.minutes.to_string();
    let jobs = args.jobs.to_string();
    let mut fuzz = cargo([
        "run",
        "--release",
        "--quiet",
        "-p",
        "fuzz",
        "--bin",
        "fuzz",
        "--",
        "run",
        "--minutes",
        &minutes,
        "--jobs",
        &jobs,
    ]);
    if let Some(seed) = args.seed {
        fuzz.args(["--seed", &seed.to_string()]);
    }
    run_checked(&mut fuzz)
}
