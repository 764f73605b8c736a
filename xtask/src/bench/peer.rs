//! The peers: what a user would pick instead of Tessera, measured in the same run by Python
//! scripts `xtask/peers/<suite>_<peer>.py` that print the same records as `tessera-bench`.
//! A peer whose module does not import is skipped with a note saying how to install it.

use std::path::PathBuf;
use std::process::{Command, Stdio};

use crate::bench::collect::collect;
use crate::bench::record::Output;
use crate::bench::run_env::RunEnv;
use crate::bench::suites::SuiteCommand;
use crate::process::workspace_root;
use crate::TaskResult;

/// The Python interpreter the peers run with.
pub const PYTHON: &str = "python3";

/// Environment variables removed for the peer process only: some machines here set them for
/// old OpenBLAS builds, and they slow down the OpenBLAS that a current numpy wheel bundles.
pub const REMOVED_ENV: [&str; 2] = ["OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"];

/// What became of a peer.
#[derive(Debug, Clone, PartialEq)]
pub enum PeerRun {
    /// It ran and printed these records and info lines.
    Ran(Output),
    /// It did not run; the reason says why and what to do about it.
    Skipped(String),
}

impl PeerRun {
    /// The records it printed (none when skipped).
    pub fn records(&self) -> &[crate::bench::record::Record] {
        match self {
            PeerRun::Ran(out) => &out.records,
            PeerRun::Skipped(_) => &[],
        }
    }
}

/// A peer framework.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PeerKind {
    /// numpy (its BLAS): the `gemm` suite.
    Numpy,
    /// PyTorch on the CPU: `gemm`, `mlp`, `cnn`, `infer`.
    Torch,
}

impl PeerKind {
    /// Every peer, in the order they run.
    pub const ALL: [PeerKind; 2] = [PeerKind::Numpy, PeerKind::Torch];

    /// The name in records, script names and tables.
    pub fn name(self) -> &'static str {
        match self {
            PeerKind::Numpy => "numpy",
            PeerKind::Torch => "torch",
        }
    }

    /// The Python module that must import for the peer to run.
    pub fn module(self) -> &'static str {
        match self {
            PeerKind::Numpy => "numpy",
            PeerKind::Torch => "torch",
        }
    }

    /// How a developer installs it.
    pub fn install_hint(self) -> &'static str {
        match self {
            PeerKind::Numpy => "install it with `pip install numpy` to compare",
            PeerKind::Torch => {
                "install it with `pip install numpy torch` to compare (large; never needed in CI)"
            }
        }
    }

    /// The peer's script for `suite`.
    pub fn script(self, suite: &SuiteCommand) -> PathBuf {
        workspace_root()
            .join("xtask/peers")
            .join(format!("{}_{}.py", suite.name(), self.name()))
    }

    /// Whether the peer has a script for `suite`.
    pub fn covers(self, suite: &SuiteCommand) -> bool {
        self.script(suite).is_file()
    }

    /// Why the peer cannot run here, or `None` when `python3 -c "import <module>"` works.
    pub fn unavailable_reason(self) -> Option<String> {
        let (module, hint) = (self.module(), self.install_hint());
        match python()
            .args(["-c", &format!("import {module}")])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
        {
            Ok(status) if status.success() => None,
            Ok(_) => Some(format!("`{PYTHON} -c \"import {module}\"` failed; {hint}")),
            Err(e) => Some(format!("`{PYTHON}` could not be started ({e}); {hint}")),
        }
    }

    /// Runs the peer's script for `suite` with the same arguments as Tessera's side, under the
    /// run's threads and pinning, or says why not. A peer that is available but fails is an
    /// error.
    pub fn measure(self, suite: &SuiteCommand, env: &RunEnv) -> TaskResult<PeerRun> {
        let script = self.script(suite);
        if !script.is_file() {
            return Ok(PeerRun::Skipped(format!(
                "suite `{}` has no {} peer ({} is missing)",
                suite.name(),
                self.name(),
                script.display()
            )));
        }
        if let Some(reason) = self.unavailable_reason() {
            return Ok(PeerRun::Skipped(reason));
        }
        let mut args = vec![script.to_string_lossy().into_owned()];
        args.extend(suite.to_cli_args().into_iter().skip(1));
        let mut cmd = env.command(PYTHON.as_ref(), &args);
        prepare_python(&mut cmd);
        Ok(PeerRun::Ran(collect(&mut cmd)?))
    }
}

/// A `python3` command with [`REMOVED_ENV`] removed, working in the workspace root.
pub fn python() -> Command {
    let mut cmd = Command::new(PYTHON);
    prepare_python(&mut cmd);
    cmd
}

/// Removes [`REMOVED_ENV`] from `cmd` and makes it work in the workspace root.
fn prepare_python(cmd: &mut Command) {
    for var in REMOVED_ENV {
        cmd.env_remove(var);
    }
    cmd.current_dir(workspace_root());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_are_named_after_suite_and_peer() {
        let gemm = &SuiteCommand::all_defaults()[0];
        assert!(PeerKind::Numpy
            .script(gemm)
            .ends_with("xtask/peers/gemm_numpy.py"));
        assert!(PeerKind::Numpy.covers(gemm));
        assert!(PeerKind::Torch.covers(gemm));
        let prep = &SuiteCommand::all_defaults()[4];
        assert!(!PeerKind::Torch.covers(prep));
    }
}
