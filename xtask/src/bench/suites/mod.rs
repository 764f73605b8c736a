//! The benchmark suites, one file each. A suite measures one workload on any [`Backend`] and
//! emits [`Record`]s; `tessera-bench` runs it in release.
//!
//! | suite | workload | phase |
//! | --- | --- | --- |
//! | `gemm` | square f32 matrix products, GFLOP/s | - |
//! | `mlp` | a training step of the 784-512-512-10 MLP, batch 128 | train |
//! | `cnn` | a training step of the `train` CNN, batch 64 | train |
//! | `infer` | forward passes, batch 1 (latency) and 256 (throughput) | infer-1, infer-batch |
//! | `prep` | decode, normalise and batch one Fashion-MNIST epoch | prep |
//! | `eval` | a test-set pass of `tessera_nn::training::evaluate` | eval |
//! | `mem` | resident memory of a training step and of an epoch | train-step, train-epoch |
//! | `gpt` | a GPT's training step and its KV-cached generation at batch 1 | train, generate |
//! | `decode` | GPT-2 124M and a Llama shape at batch 1: prompt prefill, KV-cached decoding, memory | prefill, decode, decode-memory |
//! | `precision` | bf16 (or f16) against f32: GEMMs and training steps, speed and peak memory | gemm, train, gemm-memory, train-memory |
//!
//! Adding a suite: a file here with its clap `Args` and a `measure` function generic over
//! [`Backend`], a variant of [`SuiteCommand`] with its arms below, and optionally peers
//! `xtask/peers/<suite>_<peer>.py` (see [`crate::bench::peer`]). A suite that needs fresh
//! processes for some of its cases says so in [`SuiteCommand::processes`].

pub mod cnn;
pub mod data_source;
pub mod decode;
pub mod eval;
pub mod gemm;
pub mod gpt;
pub mod infer;
pub mod mem;
pub mod mlp;
pub mod models;
pub mod precision;
pub mod prep;
pub mod train_step;

use clap::Subcommand;
use tessera_core::Backend;

use crate::bench::precision::BenchPrecision;
use crate::bench::record::Record;
use crate::bench::timing::Protocol;
use crate::TaskResult;
use tessera_nn::precision::Precision;

/// A suite and its arguments, as given on the command line (`gemm --sizes ... --reps ...`).
#[derive(Debug, Clone, PartialEq, Subcommand)]
pub enum SuiteCommand {
    /// Square n×n f32 matrix product C = A·B, in GFLOP/s.
    Gemm(gemm::GemmArgs),
    /// A full training step (forward, loss, backward, Adam) of the 784-512-512-10 MLP.
    Mlp(train_step::TrainArgs),
    /// A full training step of the `train` command's CNN.
    Cnn(train_step::TrainArgs),
    /// Inference: batch-1 latency and batch-256 throughput of both models.
    Infer(infer::InferArgs),
    /// Data preparation: decode, normalise and batch one Fashion-MNIST epoch.
    Prep(data_source::DataArgs),
    /// Evaluation: one pass over the Fashion-MNIST test set.
    Eval(eval::EvalArgs),
    /// Resident memory of a training step and of an epoch.
    Mem(mem::MemArgs),
    /// Data-parallel training on 1 and 2 ranks under mpirun (see `bench::ddp`).
    Ddp(crate::bench::ddp::DdpArgs),
    /// A GPT: one training step (tokens/s) and KV-cached generation at batch 1 (ms/token).
    Gpt(gpt::GptArgs),
    /// GPT-2 124M and a Llama shape at batch 1 from a Hugging Face folder: prompt prefill and
    /// KV-cached decoding (tokens/s), and their resident memory.
    Decode(decode::DecodeArgs),
    /// bf16 (or f16) against f32: GEMM and training-step speed and peak memory, beside
    /// PyTorch's CPU autocast.
    Precision(precision::PrecisionArgs),
}

impl SuiteCommand {
    /// Whether the suite measures what an inference program runs (batch-1 latency, decoding),
    /// which keeps rayon's default pool; the others measure a training program's work, whose
    /// thread joins the pool first (`tessera_cpu::join_thread_pool`).
    pub fn is_inference(&self) -> bool {
        matches!(self, SuiteCommand::Infer(_) | SuiteCommand::Decode(_))
    }

    /// The suite's name, as in records, peer script names and result files.
    pub fn name(&self) -> &'static str {
        match self {
            SuiteCommand::Gemm(_) => gemm::NAME,
            SuiteCommand::Mlp(_) => mlp::NAME,
            SuiteCommand::Cnn(_) => cnn::NAME,
            SuiteCommand::Infer(_) => infer::NAME,
            SuiteCommand::Prep(_) => prep::NAME,
            SuiteCommand::Eval(_) => eval::NAME,
            SuiteCommand::Mem(_) => mem::NAME,
            SuiteCommand::Ddp(_) => crate::bench::ddp::NAME,
            SuiteCommand::Gpt(_) => gpt::NAME,
            SuiteCommand::Decode(_) => decode::NAME,
            SuiteCommand::Precision(_) => precision::NAME,
        }
    }

    /// Every suite with its default arguments, in the order `cargo xtask bench` runs them.
    pub fn all_defaults() -> Vec<SuiteCommand> {
        use clap::Parser;
        /// Parses one suite's defaults from its name.
        #[derive(Parser)]
        struct One {
            #[command(subcommand)]
            suite: SuiteCommand,
        }
        [
            "gemm",
            "mlp",
            "cnn",
            "infer",
            "prep",
            "eval",
            "mem",
            "gpt",
            "decode",
            "precision",
        ]
        .into_iter()
        .map(|name| {
            One::try_parse_from(["bench", name])
                .expect("every suite parses with its defaults")
                .suite
        })
        .collect()
    }

    /// The command-line words that parse back to `self` (the subcommand name first), used to
    /// forward the suite to `tessera-bench` and to the peers.
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = vec![self.name().to_string()];
        match self {
            SuiteCommand::Gemm(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Mlp(a) | SuiteCommand::Cnn(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Infer(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Prep(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Eval(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Mem(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Ddp(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Gpt(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Decode(a) => args.extend(a.to_cli_args()),
            SuiteCommand::Precision(a) => args.extend(a.to_cli_args()),
        }
        args
    }

    /// The processes one side of a round runs, in order, each on its own arguments: the suite
    /// itself, except for the `precision` suite, whose memory cases each get a fresh process
    /// (see [`precision::PrecisionArgs::processes`]).
    pub fn processes(&self) -> Vec<SuiteCommand> {
        match self {
            SuiteCommand::Precision(a) => a
                .processes()
                .into_iter()
                .map(SuiteCommand::Precision)
                .collect(),
            _ => vec![self.clone()],
        }
    }

    /// The timing protocol: the default one, or for the suites whose repetition is a whole
    /// pass over a data set (seconds each), a single warm-up and at least 3 repetitions.
    pub fn protocol(&self) -> Protocol {
        match self {
            SuiteCommand::Prep(_) | SuiteCommand::Eval(_) => Protocol::whole_passes(),
            _ => Protocol::default(),
        }
    }

    /// Why the suite cannot run on this machine (its data set is missing), if it cannot.
    pub fn unavailable_reason(&self) -> Option<String> {
        match self {
            SuiteCommand::Prep(a) => a.missing_reason(),
            SuiteCommand::Eval(a) => a.data.missing_reason(),
            SuiteCommand::Mem(a) => a.unavailable_reason(),
            SuiteCommand::Ddp(_) => crate::bench::ddp::unavailable_reason(),
            _ => None,
        }
    }

    /// Why the suite cannot be measured in `precision`, if it cannot: bf16 is the reference
    /// models' policy (mlp, cnn, infer, eval, gpt, and decode with bf16 weights; the gemm
    /// suite's matrices are f32 only), TF32 changes matrix products only (not prep, mem or
    /// ddp).
    pub fn precision_unavailable(&self, precision: BenchPrecision) -> Option<String> {
        let ok = match precision {
            BenchPrecision::F32 => true,
            BenchPrecision::Tf32 => matches!(
                self,
                SuiteCommand::Gemm(_)
                    | SuiteCommand::Mlp(_)
                    | SuiteCommand::Cnn(_)
                    | SuiteCommand::Infer(_)
                    | SuiteCommand::Eval(_)
                    | SuiteCommand::Gpt(_)
            ),
            BenchPrecision::Bf16 => matches!(
                self,
                SuiteCommand::Mlp(_)
                    | SuiteCommand::Cnn(_)
                    | SuiteCommand::Infer(_)
                    | SuiteCommand::Eval(_)
                    | SuiteCommand::Gpt(_)
                    | SuiteCommand::Decode(_)
            ),
        };
        (!ok).then(|| {
            format!(
                "the {} suite has no {} variant",
                self.name(),
                precision.name()
            )
        })
    }

    /// Runs the suite on `dev` with `protocol`, the reference models under `precision` (the
    /// suites without models ignore it, see [`SuiteCommand::precision_unavailable`]), passing
    /// each record to `emit` as it is measured (the `mem` suite, which times nothing, ignores
    /// `protocol`).
    pub fn measure<B: Backend>(
        &self,
        dev: &B,
        precision: Precision,
        protocol: &Protocol,
        emit: &mut dyn FnMut(Record),
    ) -> TaskResult<()> {
        match self {
            SuiteCommand::Gemm(args) => Ok(gemm::measure(dev, args, protocol, emit)?),
            SuiteCommand::Mlp(args) => mlp::measure(dev, args, precision, protocol, emit),
            SuiteCommand::Cnn(args) => cnn::measure(dev, args, precision, protocol, emit),
            SuiteCommand::Infer(args) => infer::measure(dev, args, precision, protocol, emit),
            SuiteCommand::Prep(args) => prep::measure(dev, args, protocol, emit),
            SuiteCommand::Eval(args) => eval::measure(dev, args, precision, protocol, emit),
            // Its per-epoch series goes to stdout beside the records, as a peer's info lines.
            SuiteCommand::Mem(args) => mem::measure(dev, args, emit, &mut |v| println!("{v}")),
            SuiteCommand::Ddp(_) => {
                let _ = (dev, protocol, emit);
                Err("the ddp suite runs ranks under mpirun: `cargo xtask bench ddp`".into())
            }
            SuiteCommand::Gpt(args) => gpt::measure(dev, args, precision, protocol, emit),
            SuiteCommand::Decode(args) => decode::measure(dev, args, precision, protocol, emit),
            SuiteCommand::Precision(args) => precision::measure(dev, args, protocol, emit),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(subcommand)]
        suite: SuiteCommand,
    }

    fn parse(words: &[&str]) -> SuiteCommand {
        Cli::try_parse_from(std::iter::once("bench").chain(words.iter().copied()))
            .unwrap()
            .suite
    }

    #[test]
    fn every_suite_round_trips_through_its_cli_words() {
        for suite in SuiteCommand::all_defaults() {
            let words = suite.to_cli_args();
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            assert_eq!(parse(&words), suite, "{words:?}");
        }
        let custom = parse(&[
            "infer",
            "--models",
            "cnn",
            "--batches",
            "1,8",
            "--reps",
            "2",
        ]);
        let words = custom.to_cli_args();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        assert_eq!(parse(&words), custom);
        let custom = parse(&["mlp", "--batch", "32"]);
        assert_eq!(custom.to_cli_args(), ["mlp", "--batch", "32"]);
    }

    #[test]
    fn all_suites_run_in_lifecycle_order() {
        let names: Vec<&str> = SuiteCommand::all_defaults()
            .iter()
            .map(SuiteCommand::name)
            .collect();
        assert_eq!(
            names,
            [
                "gemm",
                "mlp",
                "cnn",
                "infer",
                "prep",
                "eval",
                "mem",
                "gpt",
                "decode",
                "precision"
            ]
        );
    }

    #[test]
    fn only_the_precision_suite_splits_into_processes() {
        for suite in SuiteCommand::all_defaults() {
            let parts = suite.processes();
            if suite.name() == "precision" {
                // The timed cases, then gemm, mlp and cnn memory at f32 and bf16.
                assert_eq!(parts.len(), 1 + 3 * 2, "{parts:?}");
                assert!(parts.iter().all(|p| p.name() == "precision"));
            } else {
                assert_eq!(parts, [suite]);
            }
        }
    }

    #[test]
    fn model_suites_measure_on_the_cpu_and_emit_their_phase() {
        let dev = tessera_cpu::Cpu::new();
        let quick = Protocol::quick();
        let mut records = Vec::new();
        for words in [
            &["mlp", "--batch", "4", "--reps", "1"][..],
            &["cnn", "--batch", "2", "--reps", "1"][..],
            &["infer", "--batches", "1,3", "--reps", "1"][..],
        ] {
            parse(words)
                .measure(&dev, Precision::F32, &quick, &mut |r| records.push(r))
                .unwrap();
        }
        let phases: Vec<(&str, &str, usize)> = records
            .iter()
            .map(|r| {
                (
                    r.model.as_deref().unwrap(),
                    r.phase.as_deref().unwrap(),
                    r.n,
                )
            })
            .collect();
        assert_eq!(
            phases,
            [
                ("mlp", "train", 4),
                ("cnn", "train", 2),
                ("mlp", "infer-1", 1),
                ("mlp", "infer-batch", 3),
                ("cnn", "infer-1", 1),
                ("cnn", "infer-batch", 3),
            ]
        );
        assert!(records.iter().all(|r| r.samples_per_s.unwrap() > 0.0));
    }
}
