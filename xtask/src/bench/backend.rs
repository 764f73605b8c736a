//! Which Tessera backends a benchmark measures.

use clap::ValueEnum;
use tessera_cpu::Cpu;

use crate::bench::record::Record;
use crate::bench::suites::SuiteCommand;
use crate::bench::timing::Protocol;
use crate::TaskResult;

/// A Tessera backend the benchmarks can run on. Adding one: a variant here, its
/// arm in [`BackendKind::measure`] and in [`BackendKind::is_present`] (the suites are generic
/// over `tessera_core::Backend`, and the lifecycle report gives every accelerator a speedup
/// column over `cpu`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, ValueEnum)]
pub enum BackendKind {
    /// The CPU backend (`backend-cpu`).
    #[default]
    Cpu,
    /// The default OpenCL device (`backend-opencl`: `TESSERA_OPENCL_DEVICE`, else the first GPU,
    /// else the first device; PoCL runs it on the CPU).
    Opencl,
    /// CUDA device 0 (`backend-cuda`; only in builds with `--features cuda`).
    #[cfg(feature = "cuda")]
    Cuda,
}

impl BackendKind {
    /// The name used on the command line and in records.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Cpu => "cpu",
            BackendKind::Opencl => "opencl",
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => "cuda",
        }
    }

    /// Every backend this build knows, CPU first.
    pub fn all() -> Vec<BackendKind> {
        BackendKind::value_variants().to_vec()
    }

    /// Whether this machine has the device (the CPU always does).
    pub fn is_present(self) -> bool {
        match self {
            BackendKind::Cpu => true,
            BackendKind::Opencl => tessera_opencl::OpenCl::new().is_ok(),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => tessera_cuda::Cuda::new(0).is_ok(),
        }
    }

    /// The backends present on this machine: what `cargo xtask bench` measures by default.
    pub fn present() -> Vec<BackendKind> {
        BackendKind::all()
            .into_iter()
            .filter(|b| b.is_present())
            .collect()
    }

    /// Creates this backend and runs `suite` on it, passing each record to `emit`.
    pub fn measure(
        self,
        suite: &SuiteCommand,
        protocol: &Protocol,
        emit: &mut dyn FnMut(Record),
    ) -> TaskResult<()> {
        match self {
            BackendKind::Cpu => suite.measure(&Cpu::new(), protocol, emit),
            BackendKind::Opencl => suite.measure(&tessera_opencl::OpenCl::new()?, protocol, emit),
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => suite.measure(&tessera_cuda::Cuda::new(0)?, protocol, emit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_is_always_present_and_first() {
        assert_eq!(BackendKind::present()[0], BackendKind::Cpu);
        assert_eq!(BackendKind::Cpu.name(), "cpu");
    }
}
