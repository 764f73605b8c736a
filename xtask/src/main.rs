//! `cargo xtask`: Tessera's project tasks. See the `xtask` library docs for what each one does.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use xtask::bench::BenchArgs;

/// Tessera's project tasks (run as `cargo xtask <task>`).
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", version)]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

/// The tasks.
#[derive(Debug, Subcommand)]
enum Task {
    /// Runs CI's checks in order, stopping at the first failure: `cargo fmt --all --check`,
    /// `cargo clippy --workspace --all-targets -- -D warnings`, `cargo test --workspace`.
    Ci,
    /// Fails when a tracked file still holds unresolved merge-conflict markers (`<<<<<<<`,
    /// `|||||||`, `>>>>>>>`, and `=======` between them), listing each as `path:line`.
    ConflictMarkers,
    /// Measures Tessera (release build) beside numpy when available; prints a table and writes
    /// target/bench/<suite>.json.
    Bench(BenchArgs),
    /// Builds, in release, the CUDA conformance tests, `train` and the benchmarks with CUDA,
    /// gathers them with precompiled kernels in target/gpu-check/bundle and prints the command
    /// that runs them on a GPU machine.
    GpuCheck(xtask::gpu_check::GpuCheckArgs),
    /// Runs the bad-input regression tests in release, then the fuzzer (release) for `--minutes`;
    /// fails on any panic, abort, hang or broken invariant (see fuzz/src/lib.rs).
    Fuzz(xtask::fuzz::FuzzArgs),
    /// Runs the conformance families whose tolerances are error bounds (default: `fused`) at
    /// 2,000 cases on base seeds 1 to 10 against the CPU and example backends (minutes; not
    /// part of `ci`).
    ConformanceLong(xtask::conformance_long::ConformanceLongArgs),
    /// Kills a training run with SIGKILL `--kills` times at random moments (and one rank of a
    /// 2-rank mpirun job `--mpi-kills` times), resuming after each, and checks that it ends
    /// bit for bit like the uninterrupted run (the long version of cli/tests/integration/train_chaos.rs).
    Chaos(xtask::chaos::ChaosArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match &cli.task {
        Task::Ci => xtask::ci::run(),
        Task::ConflictMarkers => xtask::conflicts::run(),
        Task::Bench(args) => xtask::bench::run(args),
        Task::GpuCheck(args) => xtask::gpu_check::run(args),
        Task::Fuzz(args) => xtask::fuzz::run(args),
        Task::ConformanceLong(args) => xtask::conformance_long::run(args),
        Task::Chaos(args) => xtask::chaos::run(args),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
