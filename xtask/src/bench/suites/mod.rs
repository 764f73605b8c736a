//! The benchmark suites, one file each. A suite measures one workload on any [`Backend`] and
//! emits [`Record`]s; `tessera-bench` runs it in release.
//!
//! Adding a suite (e.g. `mlp`, `cnn`, `infer`, `prep`, `eval`): a file here with its clap `Args`
//! and a `measure` function generic over [`Backend`], a variant of [`SuiteCommand`] with its
//! arms below, and optionally a numpy peer `xtask/peers/<suite>_numpy.py` plus its table in
//! [`crate::bench::report`].

pub mod gemm;

use clap::Subcommand;
use tensor_core::Backend;

use crate::bench::record::Record;
use crate::bench::timing::Protocol;

/// A suite and its arguments, as given on the command line (`gemm --sizes ... --reps ...`).
#[derive(Debug, Clone, PartialEq, Subcommand)]
pub enum SuiteCommand {
    /// Square n×n f32 matrix product C = A·B, in GFLOP/s.
    Gemm(gemm::GemmArgs),
}

impl SuiteCommand {
    /// The suite's name, as in records, peer script names and result files.
    pub fn name(&self) -> &'static str {
        match self {
            SuiteCommand::Gemm(_) => gemm::NAME,
        }
    }

    /// The command-line words that parse back to `self` (the subcommand name first), used to
    /// forward the suite to `tessera-bench` and to the peers.
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = vec![self.name().to_string()];
        match self {
            SuiteCommand::Gemm(a) => args.extend(a.to_cli_args()),
        }
        args
    }

    /// Runs the suite on `dev` with `protocol`, passing each record to `emit` as it is measured.
    pub fn measure<B: Backend>(
        &self,
        dev: &B,
        protocol: &Protocol,
        emit: &mut dyn FnMut(Record),
    ) -> tensor_core::Result<()> {
        match self {
            SuiteCommand::Gemm(args) => gemm::measure(dev, args, protocol, emit),
        }
    }
}
