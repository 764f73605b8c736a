//! `cargo xtask chaos`: the long version of the chaos test (`cli/tests/integration/train_chaos.rs`). It
//! runs that test in release with `--kills` SIGKILLs of a training run at random moments
//! (`TESSERA_CHAOS_KILLS`) and `--mpi-kills` kills of one rank of a 2-rank `mpirun` job
//! (`TESSERA_CHAOS_MPI_KILLS`; skipped, printing why, without Open MPI), resuming after each
//! and comparing the end with an uninterrupted run bit for bit. The two cases run one after
//! the other so that their timings do not disturb each other. Not part of `cargo xtask ci`,
//! which runs the same test bounded (10 and 3 kills).

use std::time::Instant;

use clap::Args;

use crate::process::{cargo, display_command};
use crate::TaskResult;

/// Arguments of `cargo xtask chaos`.
#[derive(Debug, Args)]
pub struct ChaosArgs {
    /// Kills of the single-process run.
    #[arg(long, default_value_t = 100)]
    pub kills: usize,
    /// Kills of one rank of the 2-rank `mpirun` job.
    #[arg(long, default_value_t = 10)]
    pub mpi_kills: usize,
}

/// The `cargo test` command of the chaos test with these kill counts.
pub fn command(args: &ChaosArgs) -> std::process::Command {
    let mut cmd = cargo([
        "test",
        "--release",
        "-p",
        "tessera-cli",
        "--test",
        "integration",
        "--",
        "train_chaos::",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    cmd.env("TESSERA_CHAOS_KILLS", args.kills.to_string())
        .env("TESSERA_CHAOS_MPI_KILLS", args.mpi_kills.to_string())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd
}

/// Runs the task.
pub fn run(args: &ChaosArgs) -> TaskResult<()> {
    let mut cmd = command(args);
    println!(
        "==> chaos: TESSERA_CHAOS_KILLS={} TESSERA_CHAOS_MPI_KILLS={} {}",
        args.kills,
        args.mpi_kills,
        display_command(&cmd)
    );
    let start = Instant::now();
    let status = cmd.status()?;
    println!(
        "==> chaos: {} in {:.1} s",
        if status.success() { "passed" } else { "FAILED" },
        start.elapsed().as_secs_f64()
    );
    if !status.success() {
        return Err(format!("`{}` failed ({status})", display_command(&cmd)).into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kill_counts_reach_the_test_through_its_environment() {
        let cmd = command(&ChaosArgs {
            kills: 7,
            mpi_kills: 2,
        });
        let env: Vec<(String, String)> = cmd
            .get_envs()
            .filter_map(|(k, v)| Some((k.to_str()?.into(), v?.to_str()?.into())))
            .collect();
        assert!(env.contains(&("TESSERA_CHAOS_KILLS".into(), "7".into())));
        assert!(env.contains(&("TESSERA_CHAOS_MPI_KILLS".into(), "2".into())));
        let line = display_command(&cmd);
        assert!(
            line.contains("--test integration -- train_chaos::") && line.contains("--release"),
            "{line}"
        );
    }
}
