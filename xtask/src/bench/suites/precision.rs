//! The `precision` suite: 16-bit compute against f32, for a GEMM and a training step, in speed
//! and in peak memory, beside PyTorch's CPU mixed precision (`xtask/peers/precision_torch.py`:
//! `torch.autocast(device_type="cpu", dtype=torch.bfloat16)`).
//!
//! Each case runs under every `--precisions` policy and its records say which
//! ([`Record::precision`]), so a report shows f32 and bf16 rows side by side:
//!
//! * `gemm` (phase `gemm`): `C = A·B` of square n×n operands stored in the precision's dtype
//!   (f32, or bf16 / f16 rounded to nearest even from the same standard-normal f32 values),
//!   the product in that dtype too. The peer multiplies the same 16-bit tensors under
//!   autocast (which leaves 16-bit inputs as they are).
//! * `mlp`, `cnn` (phase `train`): one training step of the reference model built with
//!   `tessera_nn::models::ModelKind::build_with_precision` (f32 master weights and Adam state;
//!   the layers the policy covers compute in the 16-bit dtype) and
//!   `tessera_nn::training::train_step` (`train_step_scaled` with a `DynamicLossScaler` under
//!   f16), as `train --precision` runs it. The peer runs its forward pass and loss under
//!   autocast, `GradScaler` under f16.
//! * memory (phases `gemm-memory`, `train-memory`): the resident set before the unit (operands,
//!   or model, optimizer and batch in place), its peak during one product at the largest
//!   `--sizes` / one training step, and after, measured as the `mem` suite does
//!   ([`crate::bench::resident`]). `cargo xtask bench` measures each memory case in a fresh
//!   process (see [`PrecisionArgs::processes`]), so that no earlier case's freed memory is
//!   reused by the next.
//!
//! `cargo xtask bench precision` reports, per pair of alternating rounds, Tessera / PyTorch at
//! the same precision and each framework's 16-bit / f32 (see
//! [`crate::bench::precision_ratios`]).

use clap::{Args, ValueEnum};
use tessera_core::{Backend, DType, Error, Tensor};
use tessera_nn::optim::{Adam, AdamConfig};
use tessera_nn::precision::{DynamicLossScaler, Precision};
use tessera_nn::training::{train_step, train_step_scaled};
use tessera_nn::Module;

use crate::bench::record::{MemoryUse, Record};
use crate::bench::resident::{self, Resident};
use crate::bench::suites::gemm::flops;
use crate::bench::suites::models::ModelName;
use crate::bench::timing::{Protocol, Timing};
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "precision";

/// A workload of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Workload {
    /// Square matrix products of `--sizes`.
    Gemm,
    /// A training step of the 784-512-512-10 MLP.
    Mlp,
    /// A training step of the `train` command's CNN.
    Cnn,
}

impl Workload {
    /// Every workload, in the order the suite runs them.
    pub const ALL: [Workload; 3] = [Workload::Gemm, Workload::Mlp, Workload::Cnn];

    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Gemm => "gemm",
            Workload::Mlp => "mlp",
            Workload::Cnn => "cnn",
        }
    }

    /// The reference model of a training workload; `None` for the GEMM.
    pub fn model(self) -> Option<ModelName> {
        match self {
            Workload::Gemm => None,
            Workload::Mlp => Some(ModelName::Mlp),
            Workload::Cnn => Some(ModelName::Cnn),
        }
    }
}

/// What one process of the suite measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum Part {
    /// Speed, then memory, in this process (by hand; `cargo xtask bench` splits it).
    #[default]
    All,
    /// The timed cases only.
    Speed,
    /// The peak memory of each case only.
    Memory,
}

impl Part {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Part::All => "all",
            Part::Speed => "speed",
            Part::Memory => "memory",
        }
    }
}

/// Arguments of the `precision` suite.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct PrecisionArgs {
    /// Workloads (comma-separated): gemm, mlp, cnn.
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1.., default_values_t = Workload::ALL)]
    pub workloads: Vec<Workload>,
    /// Compute precisions (comma-separated): f32, bf16, f16.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [Precision::F32, Precision::BF16])]
    pub precisions: Vec<Precision>,
    /// GEMM sizes n (comma-separated); the memory of the largest is measured.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [256, 512, 1024, 2048])]
    pub sizes: Vec<usize>,
    /// Samples per training step [default: 128 for the MLP, 64 for the CNN, as `train` uses].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: Option<u64>,
    /// Timed repetitions per case [default: enough for about 1.5 s, at least 5].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: Option<u64>,
    /// What this process measures: all, speed, memory.
    #[arg(long, value_enum, default_value_t)]
    pub part: Part,
}

impl PrecisionArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let join = |names: Vec<String>| names.join(",");
        let mut args = vec![
            "--workloads".to_string(),
            join(
                self.workloads
                    .iter()
                    .map(|w| w.name().to_string())
                    .collect(),
            ),
            "--precisions".to_string(),
            join(
                self.precisions
                    .iter()
                    .map(|p| p.name().to_string())
                    .collect(),
            ),
            "--sizes".to_string(),
            join(self.sizes.iter().map(usize::to_string).collect()),
        ];
        if let Some(batch) = self.batch {
            args.extend(["--batch".to_string(), batch.to_string()]);
        }
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        if self.part != Part::All {
            args.extend(["--part".to_string(), self.part.name().to_string()]);
        }
        args
    }

    /// The batch size for `model`: the one given, else the `train` command's default.
    pub fn batch_for(&self, model: ModelName) -> usize {
        match (self.batch, model) {
            (Some(b), _) => b as usize,
            (None, ModelName::Mlp) => 128,
            (None, ModelName::Cnn) => 64,
        }
    }

    /// The processes `cargo xtask bench` runs for these arguments, on each side: the timed
    /// cases in one, then each memory case (one workload at one precision) in a fresh one. An
    /// explicit `--part` runs as given.
    pub fn processes(&self) -> Vec<PrecisionArgs> {
        if self.part != Part::All {
            return vec![self.clone()];
        }
        let mut out = vec![PrecisionArgs {
            part: Part::Speed,
            ..self.clone()
        }];
        let largest = self.sizes.iter().copied().max();
        for &workload in &self.workloads {
            for &precision in &self.precisions {
                out.push(PrecisionArgs {
                    workloads: vec![workload],
                    precisions: vec![precision],
                    sizes: largest.into_iter().collect(),
                    part: Part::Memory,
                    ..self.clone()
                });
            }
        }
        out
    }
}

/// The dtype the operands of a GEMM under `precision` are stored in.
fn gemm_dtype(precision: Precision) -> DType {
    precision.compute_dtype().unwrap_or(DType::F32)
}

/// Whether `e` says the backend lacks a dtype or an op (the case is skipped, with a note).
fn is_unsupported(e: &Error) -> bool {
    matches!(
        e,
        Error::UnsupportedDType { .. } | Error::NotImplemented { .. }
    )
}

/// Runs one case, emitting its record; a backend without the precision's dtype skips it with a
/// note on stderr instead of failing the run.
fn run_case(
    dev_name: &str,
    label: &str,
    emit: &mut dyn FnMut(Record),
    case: impl FnOnce() -> TaskResult<Record>,
) -> TaskResult<()> {
    match case() {
        Ok(record) => {
            emit(record);
            Ok(())
        }
        Err(e) => match e.downcast_ref::<Error>() {
            Some(err) if is_unsupported(err) => {
                eprintln!("tessera-bench: precision {label} on {dev_name} skipped: {err}");
                Ok(())
            }
            _ => Err(e),
        },
    }
}

/// Measures every case of `args` on `dev`: the timed ones with `protocol`, then (or only) the
/// memory ones, as `--part` says.
pub fn measure<B: Backend>(
    dev: &B,
    args: &PrecisionArgs,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    if args.part != Part::Memory {
        for &workload in &args.workloads {
            for &precision in &args.precisions {
                match workload.model() {
                    None => {
                        for &n in &args.sizes {
                            let label = format!("gemm n={n} {precision}");
                            run_case(dev.name(), &label, emit, || {
                                time_gemm(dev, n, precision, args, protocol)
                            })?;
                        }
                    }
                    Some(model) => {
                        let label = format!("{} train {precision}", model.name());
                        run_case(dev.name(), &label, emit, || {
                            time_train_step(dev, model, precision, args, protocol)
                        })?;
                    }
                }
            }
        }
    }
    if args.part != Part::Speed {
        for &workload in &args.workloads {
            for &precision in &args.precisions {
                let label = format!("{} memory {precision}", workload.name());
                run_case(dev.name(), &label, emit, || match workload.model() {
                    None => gemm_memory(dev, args, precision),
                    Some(model) => train_memory(dev, model, precision, args),
                })?;
            }
        }
    }
    Ok(())
}

/// Standard-normal n×n operands A and B in the dtype of `precision`.
fn gemm_operands<B: Backend>(
    dev: &B,
    n: usize,
    precision: Precision,
) -> tessera_core::Result<(Tensor<B>, Tensor<B>)> {
    let dtype = gemm_dtype(precision);
    let a = Tensor::<B>::randn([n, n], DType::F32, 1, dev)?.to_dtype(dtype)?;
    let b = Tensor::<B>::randn([n, n], DType::F32, 2, dev)?.to_dtype(dtype)?;
    dev.synchronize()?;
    Ok((a, b))
}

fn time_gemm<B: Backend>(
    dev: &B,
    n: usize,
    precision: Precision,
    args: &PrecisionArgs,
    protocol: &Protocol,
) -> TaskResult<Record> {
    let (a, b) = gemm_operands(dev, n, precision)?;
    let timing = protocol.measure(args.reps.map(|r| r as usize), || {
        let c = a.matmul(&b)?;
        dev.synchronize()?;
        Ok::<_, Error>(c)
    })?;
    Ok(Record::new(NAME, "tessera", dev.name(), n, &timing)
        .with_flops(flops(n))
        .with_phase("gemm")
        .with_precision(precision.name()))
}

/// A training step of `model` under `precision`, with everything it needs in place.
struct TrainingSetup<B: Backend> {
    net: tessera_nn::models::ReferenceModel<B>,
    optimizer: Adam<B>,
    params: Vec<tessera_autograd::Var<B>>,
    scaler: Option<DynamicLossScaler>,
    x: Tensor<B>,
    y: Tensor<B>,
}

impl<B: Backend> TrainingSetup<B> {
    fn new(dev: &B, model: ModelName, precision: Precision, batch: usize) -> TaskResult<Self> {
        let net = model
            .kind()
            .build_with_precision(DType::F32, precision, 0, dev)?;
        net.train();
        let optimizer = Adam::new(net.parameters(), AdamConfig::default())?;
        let params = net.parameters().into_iter().map(|(_, p)| p).collect();
        let scaler = precision.needs_loss_scaling().then(DynamicLossScaler::new);
        let (x, y) = model.random_batch(batch, 7, dev)?;
        dev.synchronize()?;
        Ok(TrainingSetup {
            net,
            optimizer,
            params,
            scaler,
            x,
            y,
        })
    }

    /// One step, as `train --precision` takes it; returns the loss.
    fn step(&mut self, dev: &B) -> tessera_core::Result<Tensor<B>> {
        let x = self.x.clone();
        let loss = match self.scaler.as_mut() {
            Some(scaler) => {
                train_step_scaled(
                    &self.net,
                    &mut self.optimizer,
                    x,
                    &self.y,
                    scaler,
                    &self.params,
                )?
                .0
            }
            None => train_step(&self.net, &mut self.optimizer, x, &self.y)?,
        };
        dev.synchronize()?;
        Ok(loss)
    }
}

fn time_train_step<B: Backend>(
    dev: &B,
    model: ModelName,
    precision: Precision,
    args: &PrecisionArgs,
    protocol: &Protocol,
) -> TaskResult<Record> {
    let batch = args.batch_for(model);
    let mut setup = TrainingSetup::new(dev, model, precision, batch)?;
    let timing = protocol.measure(args.reps.map(|r| r as usize), || setup.step(dev))?;
    Ok(Record::new(NAME, "tessera", dev.name(), batch, &timing)
        .with_samples()
        .with_flops(model.train_flops() * batch as f64)
        .with_model(model.name())
        .with_phase("train")
        .with_precision(precision.name()))
}

fn read_resident() -> TaskResult<Resident> {
    resident::read().ok_or_else(|| "could not read /proc/self/status".into())
}

/// Runs `unit` once between two readings of the resident set, its peak reset first (as the
/// `mem` suite does); returns the seconds it took and the memory around it. What `unit`
/// returns is dropped after the last reading, so a result is counted as resident after.
fn memory_of<T>(unit: impl FnOnce() -> tessera_core::Result<T>) -> TaskResult<(f64, MemoryUse)> {
    let before = read_resident()?;
    resident::reset_peak();
    let start = std::time::Instant::now();
    let out = unit()?;
    let seconds = start.elapsed().as_secs_f64();
    let after = read_resident()?;
    drop(out);
    Ok((
        seconds,
        MemoryUse {
            rss_before_bytes: before.current,
            peak_rss_bytes: after.peak,
            rss_after_bytes: after.current,
        },
    ))
}

/// A memory record: one sample of `seconds`, with `memory`.
fn memory_record(dev_name: &str, n: usize, seconds: f64, memory: MemoryUse) -> Record {
    let timing = Timing::from_samples(&[seconds]).expect("one sample");
    let mut r = Record::new(NAME, "tessera", dev_name, n, &timing);
    r.memory = Some(memory);
    r
}

fn gemm_memory<B: Backend>(
    dev: &B,
    args: &PrecisionArgs,
    precision: Precision,
) -> TaskResult<Record> {
    let n = args.sizes.iter().copied().max().ok_or("no --sizes")?;
    let (a, b) = gemm_operands(dev, n, precision)?;
    let (seconds, memory) = memory_of(|| {
        let c = a.matmul(&b)?;
        dev.synchronize()?;
        Ok(c)
    })?;
    Ok(memory_record(dev.name(), n, seconds, memory)
        .with_phase("gemm-memory")
        .with_precision(precision.name()))
}

fn train_memory<B: Backend>(
    dev: &B,
    model: ModelName,
    precision: Precision,
    args: &PrecisionArgs,
) -> TaskResult<Record> {
    let batch = args.batch_for(model);
    let mut setup = TrainingSetup::new(dev, model, precision, batch)?;
    let (seconds, memory) = memory_of(|| setup.step(dev))?;
    Ok(memory_record(dev.name(), batch, seconds, memory)
        .with_model(model.name())
        .with_phase("train-memory")
        .with_precision(precision.name()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::suites::SuiteCommand;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        suite: SuiteCommand,
    }

    fn parse(words: &[&str]) -> PrecisionArgs {
        let cli = Cli::try_parse_from(std::iter::once("bench").chain(words.iter().copied()));
        match cli.unwrap().suite {
            SuiteCommand::Precision(args) => args,
            other => panic!("not the precision suite: {other:?}"),
        }
    }

    #[test]
    fn defaults_compare_bf16_with_f32_on_every_workload() {
        let args = parse(&["precision"]);
        assert_eq!(args.workloads, Workload::ALL);
        assert_eq!(args.precisions, [Precision::F32, Precision::BF16]);
        assert_eq!(args.sizes, [256, 512, 1024, 2048]);
        assert_eq!((args.batch, args.reps, args.part), (None, None, Part::All));
        assert_eq!(
            (
                args.batch_for(ModelName::Mlp),
                args.batch_for(ModelName::Cnn)
            ),
            (128, 64)
        );
    }

    #[test]
    fn arguments_round_trip_through_their_words() {
        let words = [
            "precision",
            "--workloads",
            "mlp,gemm",
            "--precisions",
            "bf16,f16",
            "--sizes",
            "8,16",
            "--batch",
            "4",
            "--reps",
            "2",
            "--part",
            "memory",
        ];
        let args = parse(&words);
        assert_eq!(args.to_cli_args(), words[1..]);
        assert!(Cli::try_parse_from(["bench", "precision", "--precisions", "fp8"]).is_err());
    }

    #[test]
    fn memory_cases_get_a_process_each_after_the_timed_ones() {
        let args = parse(&["precision", "--workloads", "gemm,mlp", "--sizes", "64,32"]);
        type Process = (Part, Vec<Workload>, Vec<Precision>, Vec<usize>);
        let parts: Vec<Process> = args
            .processes()
            .into_iter()
            .map(|p| (p.part, p.workloads, p.precisions, p.sizes))
            .collect();
        let (f32, bf16) = (Precision::F32, Precision::BF16);
        let (gemm, mlp) = (Workload::Gemm, Workload::Mlp);
        assert_eq!(
            parts,
            [
                (Part::Speed, vec![gemm, mlp], vec![f32, bf16], vec![64, 32]),
                (Part::Memory, vec![gemm], vec![f32], vec![64]),
                (Part::Memory, vec![gemm], vec![bf16], vec![64]),
                (Part::Memory, vec![mlp], vec![f32], vec![64]),
                (Part::Memory, vec![mlp], vec![bf16], vec![64]),
            ]
        );
        let one = parse(&["precision", "--part", "speed"]);
        assert_eq!(one.processes(), std::slice::from_ref(&one));
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn every_case_measures_on_the_cpu_and_says_its_precision() {
        let args = parse(&[
            "precision",
            "--precisions",
            "f32,bf16,f16",
            "--sizes",
            "5",
            "--batch",
            "3",
            "--reps",
            "1",
        ]);
        let quick = Protocol::quick();
        let mut records = Vec::new();
        measure(&tessera_cpu::Cpu::new(), &args, &quick, &mut |r| {
            records.push(r)
        })
        .unwrap();
        let cases: Vec<String> = records.iter().map(Record::case_label).collect();
        let expected: Vec<String> = [
            "gemm f32 n=5",
            "gemm bf16 n=5",
            "gemm f16 n=5",
            "mlp train f32 n=3",
            "mlp train bf16 n=3",
            "mlp train f16 n=3",
            "cnn train f32 n=3",
            "cnn train bf16 n=3",
            "cnn train f16 n=3",
            "gemm-memory f32 n=5",
            "gemm-memory bf16 n=5",
            "gemm-memory f16 n=5",
            "mlp train-memory f32 n=3",
            "mlp train-memory bf16 n=3",
            "mlp train-memory f16 n=3",
            "cnn train-memory f32 n=3",
            "cnn train-memory bf16 n=3",
            "cnn train-memory f16 n=3",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(cases, expected);
        let (timed, memory): (Vec<&Record>, Vec<&Record>) =
            records.iter().partition(|r| r.memory.is_none());
        assert!(timed.iter().all(|r| r.gflops > 0.0));
        for r in memory {
            let m = r.memory.unwrap();
            assert!(m.peak_rss_bytes >= m.rss_after_bytes.min(m.rss_before_bytes));
        }
    }
}
