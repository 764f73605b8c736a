//! Which Tessera backend a benchmark measures.

use backend_cpu::Cpu;
use clap::ValueEnum;

use crate::bench::record::Record;
use crate::bench::suites::SuiteCommand;
use crate::bench::timing::Protocol;

/// A Tessera backend the benchmarks can run on. Adding one: a variant here and its arm in
/// [`BackendKind::measure`] (the suites are generic over `tensor_core::Backend`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, ValueEnum)]
pub enum BackendKind {
    /// The CPU backend (`backend-cpu`).
    #[default]
    Cpu,
}

impl BackendKind {
    /// The name used on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
        }
    }

    /// Creates this backend and runs `suite` on it, passing each record to `emit`.
    pub fn measure(
        self,
        suite: &SuiteCommand,
        protocol: &Protocol,
        emit: &mut dyn FnMut(Record),
    ) -> tensor_core::Result<()> {
        match self {
            BackendKind::Cpu => suite.measure(&Cpu::new(), protocol, emit),
        }
    }
}
