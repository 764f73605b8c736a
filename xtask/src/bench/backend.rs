//! Which Tessera backends a benchmark measures.

use clap::ValueEnum;
use tessera_cpu::Cpu;

use crate::bench::precision::BenchPrecision;
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
            BackendKind::Cuda => tessera_cuda::Cuda::new().is_ok(),
        }
    }

    /// The backends present on this machine: what `cargo xtask bench` measures by default.
    pub fn present() -> Vec<BackendKind> {
        BackendKind::all()
            .into_iter()
            .filter(|b| b.is_present())
            .collect()
    }

    /// Whether the backend can run matrix products in `precision` (TF32 is a CUDA handle
    /// option); None when it can, else why not.
    pub fn precision_unavailable(self, precision: BenchPrecision) -> Option<String> {
        match (self, precision) {
            #[cfg(feature = "cuda")]
            (BackendKind::Cuda, _) => None,
            (_, BenchPrecision::Tf32) => Some(format!(
                "tf32 is a CUDA option (cuBLAS tensor cores); the {} backend has none",
                self.name()
            )),
            _ => None,
        }
    }

    /// Creates this backend and runs `suite` on it in `precision`, passing each record (marked
    /// with the precision when not f32) to `emit`. Errors before measuring when the backend or
    /// the suite cannot run in `precision`.
    pub fn measure(
        self,
        suite: &SuiteCommand,
        precision: BenchPrecision,
        protocol: &Protocol,
        emit: &mut dyn FnMut(Record),
    ) -> TaskResult<()> {
        if let Some(reason) = self
            .precision_unavailable(precision)
            .or_else(|| suite.precision_unavailable(precision))
        {
            return Err(reason.into());
        }
        let policy = precision.model_precision();
        // Suites that measure several precisions themselves (the precision suite) label their
        // records; the others are labelled with the precision they ran in.
        let mut marked = |mut record: Record| {
            if record.precision.is_none() {
                record.precision = precision.record_label().map(str::to_string);
            }
            emit(record)
        };
        match self {
            BackendKind::Cpu => suite.measure(&Cpu::new(), policy, protocol, &mut marked),
            BackendKind::Opencl => suite.measure(
                &tessera_opencl::OpenCl::new()?,
                policy,
                protocol,
                &mut marked,
            ),
            // The handle's TF32 switch is set either way, so that `TESSERA_CUDA_TF32` in the
            // environment cannot turn an f32 measurement into a TF32 one.
            #[cfg(feature = "cuda")]
            BackendKind::Cuda => {
                let dev = tessera_cuda::Cuda::new()?.with_tf32(precision.allows_tf32());
                let cublas = dev.driver().cublas_library();
                match &cublas {
                    Ok(path) => eprintln!("tessera-bench: cuBLAS {}", path.display()),
                    Err(reason) => eprintln!("tessera-bench: no cuBLAS ({reason})"),
                }
                // Only cuBLAS products use TF32: without it (or on the tiled kernel) a "tf32"
                // record would be an f32 one mislabelled.
                if precision.allows_tf32() {
                    if let Err(reason) = cublas {
                        return Err(
                            format!("tf32 needs cuBLAS, which is unavailable: {reason}").into()
                        );
                    }
                    if dev.options().engine == tessera_cuda::GemmEngine::Tiled {
                        return Err("tf32 needs cuBLAS, but TESSERA_CUDA_GEMM=tiled".into());
                    }
                }
                suite.measure(&dev, policy, protocol, &mut marked)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_is_refused_off_cuda_and_marks_nothing_it_did_not_run() {
        let suite = quick_infer();
        let mut records = Vec::new();
        let err = BackendKind::Cpu
            .measure(&suite, BenchPrecision::Tf32, &quick(), &mut |r| {
                records.push(r)
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("tf32 is a CUDA option"), "{err}");
        assert!(records.is_empty());
    }

    #[test]
    fn bf16_records_carry_their_precision() {
        let suite = quick_infer();
        let mut records = Vec::new();
        BackendKind::Cpu
            .measure(&suite, BenchPrecision::Bf16, &quick(), &mut |r| {
                records.push(r)
            })
            .unwrap();
        assert!(!records.is_empty());
        for r in &records {
            assert_eq!(r.precision.as_deref(), Some("bf16"));
            assert_eq!(r.column(), "cpu bf16");
        }
    }

    #[test]
    fn the_precision_suite_keeps_the_labels_of_its_own_records() {
        use clap::Parser;
        #[derive(Parser)]
        struct One {
            #[command(subcommand)]
            suite: SuiteCommand,
        }
        let args = [
            "b",
            "precision",
            "--workloads",
            "gemm",
            "--sizes",
            "16",
            "--reps",
            "1",
            "--part",
            "speed",
        ];
        let suite = One::try_parse_from(args).unwrap().suite;
        let mut records = Vec::new();
        BackendKind::Cpu
            .measure(&suite, BenchPrecision::F32, &quick(), &mut |r| {
                records.push(r)
            })
            .unwrap();
        let mut labels: Vec<_> = records.iter().map(|r| r.precision.clone()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels, [Some("bf16".to_string()), Some("f32".to_string())]);
    }

    /// One warm-up run, no minimum warm-up time.
    fn quick() -> Protocol {
        Protocol {
            min_warmup_runs: 1,
            min_warmup_s: 0.0,
            ..Protocol::default()
        }
    }

    /// One MLP forward at batch 2, one repetition.
    fn quick_infer() -> SuiteCommand {
        use clap::Parser;
        #[derive(Parser)]
        struct One {
            #[command(subcommand)]
            suite: SuiteCommand,
        }
        One::try_parse_from([
            "b",
            "infer",
            "--models",
            "mlp",
            "--batches",
            "2",
            "--reps",
            "1",
        ])
        .unwrap()
        .suite
    }

    #[test]
    fn the_cpu_is_always_present_and_first() {
        assert_eq!(BackendKind::present()[0], BackendKind::Cpu);
        assert_eq!(BackendKind::Cpu.name(), "cpu");
    }
}
