//! Running Tessera's side of a benchmark: `tessera-bench`, built once in release, then run
//! directly (under the run's threads and pinning, see [`RunEnv`]) as many times as the
//! alternating rounds need.

use std::path::{Path, PathBuf};

use crate::bench::collect::collect;
use crate::bench::record::Output;
use crate::bench::run_env::RunEnv;
use crate::bench::suites::SuiteCommand;
use crate::process::{cargo, run_checked, target_dir};
use crate::TaskResult;
use tessera::registry::BackendEntry;

/// Builds `tessera-bench` in release (through cargo, so it is rebuilt when stale; cargo's
/// output passes through) and returns the binary's path.
pub fn build() -> TaskResult<PathBuf> {
    run_checked(&mut cargo([
        "build",
        "--release",
        "--quiet",
        "--package",
        "xtask",
        "--bin",
        "tessera-bench",
    ]))?;
    let binary = target_dir()
        .join("release")
        .join(format!("tessera-bench{}", std::env::consts::EXE_SUFFIX));
    if !binary.is_file() {
        return Err(format!(
            "cargo built tessera-bench but {} is missing",
            binary.display()
        )
        .into());
    }
    Ok(binary)
}

/// Runs `suite` on `backend` with the `tessera-bench` at `binary` under `env`, returning the
/// records it printed; its stderr passes through.
pub fn measure(
    binary: &Path,
    env: &RunEnv,
    backend: BackendEntry,
    suite: &SuiteCommand,
) -> TaskResult<Output> {
    let mut args = vec!["--backend".to_string(), backend.name().to_string()];
    args.extend(suite.to_cli_args());
    let mut cmd = env.command(binary.as_os_str(), &args);
    let output = collect(&mut cmd)?;
    if output.records.is_empty() {
        return Err("tessera-bench printed no records".into());
    }
    Ok(output)
}
