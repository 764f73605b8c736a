//! Which Tessera backends a benchmark measures: the unchecked backends of `tessera::registry`
//! in this build (a checked backend runs every op twice, so it has no speed to measure). Adding
//! a backend to the registry adds it here; the suites are generic over `tessera_core::Backend`,
//! and the lifecycle report gives every accelerator a speedup column over `cpu`.

use tessera::registry::{self, BackendEntry, BackendJob, DeviceOptions};
use tessera_core::Backend;
use tessera_nn::precision::Precision;

use crate::bench::precision::BenchPrecision;
use crate::bench::record::Record;
use crate::bench::suites::SuiteCommand;
use crate::bench::timing::Protocol;
use crate::TaskResult;

/// The value parser of `--backend`: the registry's unchecked backends.
pub fn value_parser() -> registry::BackendParser {
    registry::value_parser().without_checked()
}

/// The backends present on this machine (their default device opens), CPU first: what `cargo
/// xtask bench` measures by default.
pub fn present() -> Vec<BackendEntry> {
    registry::enabled()
        .filter(|b| !b.is_checked() && b.is_present())
        .collect()
}

/// Whether `backend` can run matrix products in `precision` (TF32 is a CUDA handle option); None
/// when it can, else why not.
pub fn precision_unavailable(backend: BackendEntry, precision: BenchPrecision) -> Option<String> {
    match precision {
        BenchPrecision::Tf32 if !backend.supports_tf32() => Some(format!(
            "tf32 is a CUDA option (cuBLAS tensor cores); the {backend} backend has none"
        )),
        _ => None,
    }
}

/// Opens `backend` and runs `suite` on it in `precision`, passing each record (marked with the
/// precision when not f32) to `emit`. Errors before measuring when the backend or the suite
/// cannot run in `precision`.
pub fn measure(
    backend: BackendEntry,
    suite: &SuiteCommand,
    precision: BenchPrecision,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    if let Some(reason) =
        precision_unavailable(backend, precision).or_else(|| suite.precision_unavailable(precision))
    {
        return Err(reason.into());
    }
    // Suites that measure several precisions themselves (the precision suite) label their
    // records; the others are labelled with the precision they ran in.
    let mut marked = |mut record: Record| {
        if record.precision.is_none() {
            record.precision = precision.record_label().map(str::to_string);
        }
        emit(record)
    };
    // The TF32 switch is set either way, so that `TESSERA_CUDA_TF32` in the environment cannot
    // turn an f32 measurement into a TF32 one; the registry refuses a TF32 handle whose
    // products would not use TF32 (no cuBLAS, or the tiled kernel), which would record f32
    // under the tf32 label.
    let options = DeviceOptions {
        tf32: Some(precision.allows_tf32()),
        ..DeviceOptions::default()
    };
    let job = Measure {
        suite,
        policy: precision.model_precision(),
        protocol,
        emit: &mut marked,
    };
    backend.open(&options, job)?
}

/// A suite on the device the registry opened.
struct Measure<'a> {
    suite: &'a SuiteCommand,
    policy: Precision,
    protocol: &'a Protocol,
    emit: &'a mut dyn FnMut(Record),
}

impl BackendJob for Measure<'_> {
    type Output = TaskResult<()>;

    fn run<B: Backend>(self, dev: B) -> TaskResult<()> {
        report_blas(&dev);
        self.suite
            .measure(&dev, self.policy, self.protocol, self.emit)
    }
}

/// On a CUDA device, says on stderr which cuBLAS its products use (gpu-check's logs show it);
/// on an OpenCL device, whether they use CLBlast or the tiled kernel.
fn report_blas<B: Backend>(dev: &B) {
    // tessera's `opencl` feature is always on here (Cargo.toml).
    if let Some(opencl) =
        (dev as &dyn std::any::Any).downcast_ref::<tessera::backends::opencl::OpenCl>()
    {
        let route = opencl.driver().gemm_route(opencl.options().engine);
        eprintln!("tessera-bench: OpenCL products: {route}");
    }
    #[cfg(feature = "cuda")]
    if let Some(cuda) = (dev as &dyn std::any::Any).downcast_ref::<tessera::backends::cuda::Cuda>()
    {
        match cuda.driver().cublas_library() {
            Ok(path) => eprintln!("tessera-bench: cuBLAS {}", path.display()),
            Err(reason) => eprintln!("tessera-bench: no cuBLAS ({reason})"),
        }
    }
    let _ = dev;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_is_refused_off_cuda_and_marks_nothing_it_did_not_run() {
        let suite = quick_infer();
        let mut records = Vec::new();
        let err = measure(cpu(), &suite, BenchPrecision::Tf32, &quick(), &mut |r| {
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
        measure(cpu(), &suite, BenchPrecision::Bf16, &quick(), &mut |r| {
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
        measure(cpu(), &suite, BenchPrecision::F32, &quick(), &mut |r| {
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
        Protocol::quick()
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

    fn cpu() -> BackendEntry {
        registry::lookup("cpu").unwrap()
    }

    #[test]
    fn the_cpu_is_always_present_and_first() {
        assert_eq!(present()[0], cpu());
        assert!(present().iter().all(|b| !b.is_checked()));
    }

    #[test]
    fn backend_names_come_from_the_registry_without_the_checked_ones() {
        use clap::Parser;
        #[derive(Parser)]
        struct One {
            #[arg(long, default_value = "cpu", value_parser = value_parser())]
            backend: BackendEntry,
        }
        assert_eq!(One::try_parse_from(["b"]).unwrap().backend, cpu());
        let opencl = One::try_parse_from(["b", "--backend", "opencl"]).unwrap();
        assert_eq!(opencl.backend.name(), "opencl");
        for (name, says) in [
            ("tpu", "unknown backend `tpu`; available: cpu, opencl"),
            ("checked-opencl", "is a checked backend"),
        ] {
            let err = One::try_parse_from(["b", "--backend", name]).err().unwrap();
            assert!(err.to_string().contains(says), "{name}: {err}");
        }
        if cfg!(not(feature = "cuda")) {
            let err = One::try_parse_from(["b", "--backend", "cuda"])
                .err()
                .unwrap();
            assert!(err.to_string().contains("feature `cuda`"), "{err}");
        }
    }
}
