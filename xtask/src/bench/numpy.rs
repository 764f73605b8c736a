//! The numpy peer: `xtask/peers/<suite>_numpy.py`, run with `python3` beside Tessera's side.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::bench::collect::collect;
use crate::bench::record::Output;
use crate::bench::suites::SuiteCommand;
use crate::process::workspace_root;
use crate::TaskResult;

/// The Python interpreter the peers run with.
pub const PYTHON: &str = "python3";

/// Environment variables removed for the peer process only: some machines here set them for
/// old OpenBLAS builds, and they slow down the OpenBLAS that a current numpy wheel bundles.
pub const REMOVED_ENV: [&str; 2] = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"];

/// What became of the peer.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerRun {
    /// It ran and printed these records and info lines.
    Ran(Output),
    /// It did not run; the reason says why and what to do about it.
    Skipped(String),
}

/// The peer script of `suite`.
pub fn script(suite: &SuiteCommand) -> PathBuf {
    workspace_root()
        .join("xtask/peers")
        .join(format!("{}_numpy.py", suite.name()))
}

/// A `python3` command with [`REMOVED_ENV`] removed.
fn python() -> Command {
    let mut cmd = Command::new(PYTHON);
    for var in REMOVED_ENV {
        cmd.env_remove(var);
    }
    cmd.current_dir(workspace_root());
    cmd
}

/// Why numpy cannot be used, or `None` when `python3 -c "import numpy"` works.
pub fn unavailable_reason() -> Option<String> {
    let hint = "install it with `pip install numpy` to compare";
    match python()
        .args(["-c", "import numpy"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
    {
        Ok(status) if status.success() => None,
        Ok(_) => Some(format!("`{PYTHON} -c \"import numpy\"` failed; {hint}")),
        Err(e) => Some(format!("`{PYTHON}` could not be started ({e}); {hint}")),
    }
}

/// Runs the numpy peer of `suite` with the same arguments as Tessera's side, or says why not.
/// A peer that is available but fails is an error.
pub fn measure(suite: &SuiteCommand) -> TaskResult<PeerRun> {
    let script = script(suite);
    if !script.is_file() {
        return Ok(PeerRun::Skipped(format!(
            "suite `{}` has no numpy peer ({} is missing)",
            suite.name(),
            script.display()
        )));
    }
    if let Some(reason) = unavailable_reason() {
        return Ok(PeerRun::Skipped(reason));
    }
    let mut cmd = python();
    cmd.arg(&script)
        .args(suite.to_cli_args().into_iter().skip(1));
    Ok(PeerRun::Ran(collect(&mut cmd)?))
}
