//! The numpy peer: `xtask/peers/<suite>_numpy.py`, run with `python3` beside Tessera's side.
//! A thin front of [`crate::bench::peer`] for [`PeerKind::Numpy`].

use std::path::PathBuf;

use crate::bench::peer::PeerKind;
use crate::bench::run_env::RunEnv;
use crate::bench::suites::SuiteCommand;
use crate::TaskResult;

pub use crate::bench::peer::{PeerRun, PYTHON, REMOVED_ENV};

/// The numpy peer script of `suite`.
pub fn script(suite: &SuiteCommand) -> PathBuf {
    PeerKind::Numpy.script(suite)
}

/// Why numpy cannot be used, or `None` when `python3 -c "import numpy"` works.
pub fn unavailable_reason() -> Option<String> {
    PeerKind::Numpy.unavailable_reason()
}

/// Runs the numpy peer of `suite` with the same arguments as Tessera's side, or says why not.
/// A peer that is available but fails is an error.
pub fn measure(suite: &SuiteCommand, env: &RunEnv) -> TaskResult<PeerRun> {
    PeerKind::Numpy.measure(suite, env)
}
