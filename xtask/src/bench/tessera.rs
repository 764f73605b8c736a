//! Running Tessera's side of a benchmark: `tessera-bench` built and run in release.

use crate::bench::backend::BackendKind;
use crate::bench::collect::collect;
use crate::bench::record::Output;
use crate::bench::suites::SuiteCommand;
use crate::process::cargo;
use crate::TaskResult;

/// Builds `tessera-bench` in release (through cargo, so it is rebuilt when stale) and runs
/// `suite` on `backend`, returning the records it printed. Cargo's and the benchmark's stderr
/// pass through, so build errors show as usual.
pub fn measure(backend: BackendKind, suite: &SuiteCommand) -> TaskResult<Output> {
    let mut cmd = cargo([
        "run",
        "--release",
        "--quiet",
        "--package",
        "xtask",
        "--bin",
        "tessera-bench",
        "--",
        "--backend",
        backend.name(),
    ]);
    cmd.args(suite.to_cli_args());
    let output = collect(&mut cmd)?;
    if output.records.is_empty() {
        return Err("tessera-bench printed no records".into());
    }
    Ok(output)
}
