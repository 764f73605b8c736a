//! `train`: trains a reference model on Fashion-MNIST (or MNIST) and reports test accuracy and
//! throughput, or (`--model gpt`) a character-level GPT on a text corpus and reports its
//! validation loss. The last line on stdout is a JSON summary.
//!
//! ```text
//! cargo run --release -p tessera-cli --bin train -- --model mlp --epochs 5
//! # data-parallel, 2 processes (build with --features mpi; see docs/DISTRIBUTED.md):
//! mpirun -np 2 target/release/train --distributed --model mlp --epochs 5
//! cargo run --release -p tessera-cli --bin train -- --model gpt
//! # fine-tune a Hugging Face GPT-2 or Llama folder on a text file:
//! cargo run --release -p tessera-cli --bin train -- --init-from path/to/gpt2 --data notes.txt
//! ```

use clap::{Parser, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera::registry::{self, BackendEntry, BackendJob, DeviceOptions};
use tessera_cli::distributed::{CommChoice, Launch};
use tessera_cli::finetune_job::{self, FinetuneConfig};
use tessera_cli::gpt_job::{self, GptArgs, GptTrainConfig};
use tessera_cli::mnist_job::{
    run_training_with, OptimizerKind, ScheduleKind, TrainConfig, TrainReport,
};
use tessera_core::{Backend, Result};
use tessera_nn::data::FASHION_MNIST_DIR;
use tessera_nn::distributed::ShardLevel;
use tessera_nn::models::ModelKind;
use tessera_nn::precision::Precision;

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModelArg {
    /// 784-512-512-10 multi-layer perceptron.
    Mlp,
    /// Two conv + pool blocks and two linear layers.
    Cnn,
    /// A character-level GPT on a text corpus (default: Debian's fortunes).
    Gpt,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum OptimizerArg {
    /// SGD with momentum 0.9.
    Sgd,
    /// Adam.
    Adam,
    /// AdamW (weight decay 0.01).
    Adamw,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ScheduleArg {
    /// Constant learning rate.
    Constant,
    /// Cosine annealing to 0 over the run.
    Cosine,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum CommArg {
    /// NCCL for --backend cuda when built with --features nccl, MPI otherwise.
    Auto,
    /// MPI (tensors go through the host), on any backend.
    Mpi,
    /// NCCL on the GPUs (--backend cuda, --features nccl).
    Nccl,
}

/// Train a model on Fashion-MNIST with Tessera.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    /// Model architecture.
    #[arg(long, value_enum, default_value = "mlp")]
    model: ModelArg,
    /// Passes over the training set.
    #[arg(long, default_value_t = 5)]
    epochs: usize,
    /// Samples per step and rank (default: 128 for the MLP, 64 for the CNN, 32 sequences for the GPT).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Learning rate [default: 1e-3; 3e-3 for the GPT].
    #[arg(long)]
    lr: Option<f64>,
    /// Optimizer.
    #[arg(long, value_enum, default_value = "adam")]
    optimizer: OptimizerArg,
    /// Learning-rate schedule.
    #[arg(long, value_enum, default_value = "cosine")]
    schedule: ScheduleArg,
    /// Seed for initialisation and shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Folder with the IDX files (train-images-idx3-ubyte[.gz], ...) [default:
    /// /usr/share/datasets/fashion-mnist]; for the GPT a text file or folder [default:
    /// /usr/share/games/fortunes].
    #[arg(long)]
    data: Option<PathBuf>,
    /// Compute backend (`tessera::registry`; `cuda` and `checked-cuda` in builds with
    /// `--features cuda`).
    #[arg(long, default_value = "cpu", value_parser = registry::value_parser())]
    backend: BackendEntry,
    /// The run folder: `model.safetensors` (the newest model), `run.json` (the configuration) and
    /// `checkpoints/` (the whole run's state after every epoch and every --checkpoint-every
    /// steps, resumable with --resume); for the GPT, the checkpoint folder written at every
    /// loss estimate [default: checkpoints/gpt]; for --init-from, the fine-tuned model in the
    /// Hugging Face layout beside `checkpoints/` [default: checkpoints/finetuned].
    #[arg(long)]
    save: Option<PathBuf>,
    /// The GPT and --init-from only: write no checkpoints at all (no run folder; e.g. a
    /// benchmark, or a run whose consolidated checkpoints would not fit in memory: see
    /// docs/DISTRIBUTED.md).
    #[arg(long, conflicts_with_all = ["save", "resume", "checkpoint_every"])]
    no_save: bool,
    /// Also checkpoint the whole run every N optimisation steps (besides each epoch's end;
    /// for the GPT and --init-from, each loss estimate).
    #[arg(long)]
    checkpoint_every: Option<usize>,
    /// How many run checkpoints the --save folder keeps.
    #[arg(long, default_value_t = tessera_cli::mnist_job::DEFAULT_KEEP_LAST)]
    keep_last: usize,
    /// Continue the run in the --save folder from its newest whole checkpoint (bit for bit
    /// what the uninterrupted run gives; a fresh run when the folder has none).
    #[arg(long)]
    resume: bool,
    /// Log the run's scalars (losses, accuracy, learning rate, gradient norm, loss scale,
    /// throughput) here: TensorBoard event files (`tensorboard --logdir DIR`) and
    /// `metrics.jsonl`.
    #[arg(long)]
    log_dir: Option<PathBuf>,
    /// Testing: exit with status 75 right after this many optimisation steps (and any
    /// checkpoint of that step), as a killed run would.
    #[arg(long, hide = true)]
    halt_after_step: Option<usize>,
    /// Train on the first N samples only (quick runs).
    #[arg(long)]
    train_limit: Option<usize>,
    /// Evaluate on the first N test samples only (quick runs).
    #[arg(long)]
    test_limit: Option<usize>,
    /// Data-parallel training as one rank of `mpirun -np N train --distributed ...` (build
    /// with `--features mpi`): each rank trains on its shard, gradients are averaged, rank 0
    /// prints and saves.
    #[arg(long)]
    distributed: bool,
    /// With --distributed: each rank uses the device numbered by its rank on its host (CUDA
    /// device i, OpenCL device i) instead of the default device.
    #[arg(long, requires = "distributed")]
    device_per_rank: bool,
    /// With --distributed: how much of the training state each rank keeps. 0: everything
    /// (plain data parallelism); 1: the optimizer state is split over the ranks; 2: the
    /// gradients too (reduce-scattered); 3: the parameters too, each GPT block (each linear or
    /// convolution layer of the MLP and CNN) gathered for its forward and backward passes only. Every level trains the same model (see
    /// docs/DISTRIBUTED.md).
    #[arg(long, default_value = "0", value_parser = parse_shard)]
    shard: ShardLevel,
    /// With --shard 3: start each block's (layer's) gather while the one before it computes,
    /// so that the exchange overlaps computation (MPI runs it on a thread of its own; one more
    /// block's parameters are held at once).
    #[arg(long)]
    shard_prefetch: bool,
    /// With --shard 2 or 3: start each bucket's reduce-scatter during the backward pass and
    /// let the pass compute on while it runs (MPI runs it on a thread of its own; the same
    /// bits). Pays where the exchange has a network or cores of its own.
    #[arg(long)]
    overlap_reductions: bool,
    /// With --save: each rank writes its own part of the run checkpoints (with --shard 1-3,
    /// its share of the optimizer state and parameters) and rank 0 a manifest, instead of
    /// every rank gathering the whole state for rank 0 to write. They resume on any number of
    /// ranks; `checkpoint consolidate DIR` turns one into the ordinary one-file checkpoint.
    #[arg(long, conflicts_with = "no_save")]
    sharded_checkpoints: bool,
    /// With --distributed: most MiB of gradients in one collective (the buckets of the
    /// all-reduce, or of the sharded optimizer). With --shard 2 or 3 the gradients are
    /// reduce-scattered a bucket at a time during the backward pass, so smaller buckets hold
    /// fewer whole gradients at once (for more, smaller messages).
    #[arg(long, default_value = "25", value_parser = parse_bucket_mb, requires = "distributed")]
    bucket_mb: f64,
    /// With --distributed: the library that carries the gradients.
    #[arg(long, value_enum, default_value = "auto", requires = "distributed")]
    comm: CommArg,
    /// The dtype the linear, convolution and attention layers compute in (parameters and
    /// optimizer state stay f32; f16 adds dynamic loss scaling).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// Fine-tune a Hugging Face GPT-2 or Llama folder (config.json, safetensors weights,
    /// tokenizer.json) on --data instead of training a model from scratch; the GPT options set
    /// the steps, context and schedule, and the result is saved in the same layout to --save
    /// [default: checkpoints/finetuned; --lr default 1e-4], with the run checkpoints that
    /// --resume continues; --distributed, --shard, --precision and --log-dir as for the GPT.
    #[arg(long)]
    init_from: Option<PathBuf>,
    #[command(flatten)]
    gpt: GptArgs,
}

/// `train --model mlp|cnn` on the device the registry opens, with the communicator `launch`
/// gives for its type (NCCL's for CUDA).
struct MnistJob<'a> {
    config: &'a TrainConfig,
    launch: &'a Launch,
    comm: CommChoice,
}

impl BackendJob for MnistJob<'_> {
    type Output = Result<TrainReport>;

    fn run<B: Backend>(self, dev: B) -> Result<TrainReport> {
        let comm = self.launch.communicator_for(&dev, self.comm)?;
        run_training_with(self.config, &dev, comm)
    }
}

/// `train --model gpt` on the device the registry opens.
struct GptJob<'a> {
    config: &'a GptTrainConfig,
    launch: &'a Launch,
    comm: CommChoice,
}

impl BackendJob for GptJob<'_> {
    type Output = Result<gpt_job::GptTrainReport>;

    fn run<B: Backend>(self, dev: B) -> Self::Output {
        let comm = self.launch.communicator_for(&dev, self.comm)?;
        gpt_job::run_gpt_training_with(self.config, &dev, comm)
    }
}

fn main() -> ExitCode {
    // Keep freed tensor memory for reuse: a training program's choice (see tessera_cpu::tune_allocator).
    tessera_cpu::tune_allocator();
    // Compute on this thread as one of the CPU backend's threads (see tessera_cpu::join_thread_pool).
    tessera_cpu::join_thread_pool();
    let args = Args::parse();
    // The text jobs always have a run folder (checkpoints/gpt, checkpoints/finetuned by default).
    let text_job = matches!(args.model, ModelArg::Gpt) || args.init_from.is_some();
    let needs_folder = args.resume || args.checkpoint_every.is_some();
    if needs_folder && args.save.is_none() && !text_job {
        eprintln!("error: --resume and --checkpoint-every need a run folder: --save DIR");
        return ExitCode::FAILURE;
    }
    if args.shard_prefetch && args.shard != ShardLevel::Parameters {
        eprintln!("error: --shard-prefetch prefetches the gathers of --shard 3");
        return ExitCode::FAILURE;
    }
    if args.overlap_reductions
        && !matches!(args.shard, ShardLevel::Gradients | ShardLevel::Parameters)
    {
        eprintln!("error: --overlap-reductions overlaps the reduce-scatters of --shard 2 or 3");
        return ExitCode::FAILURE;
    }
    if args.init_from.is_some() {
        return finetune_main(&args);
    }
    let model = match args.model {
        ModelArg::Mlp => ModelKind::Mlp,
        ModelArg::Cnn => ModelKind::Cnn,
        ModelArg::Gpt => return gpt_main(&args),
    };
    let config = TrainConfig {
        model,
        epochs: args.epochs,
        batch_size: args.batch_size.unwrap_or(match model {
            ModelKind::Mlp => 128,
            ModelKind::Cnn => 64,
        }),
        lr: args.lr.unwrap_or(1e-3),
        optimizer: match args.optimizer {
            OptimizerArg::Sgd => OptimizerKind::Sgd,
            OptimizerArg::Adam => OptimizerKind::Adam,
            OptimizerArg::Adamw => OptimizerKind::AdamW,
        },
        schedule: match args.schedule {
            ScheduleArg::Constant => ScheduleKind::Constant,
            ScheduleArg::Cosine => ScheduleKind::Cosine,
        },
        seed: args.seed,
        data_dir: args
            .data
            .clone()
            .unwrap_or_else(|| FASHION_MNIST_DIR.into()),
        save: args.save.clone(),
        checkpoint_every: args.checkpoint_every,
        keep_last: args.keep_last,
        resume: args.resume,
        halt_after_step: args.halt_after_step,
        log_dir: args.log_dir.clone(),
        train_limit: args.train_limit,
        test_limit: args.test_limit,
        progress: std::io::stderr().is_terminal(),
        precision: args.precision,
        shard: args.shard,
        shard_prefetch: args.shard_prefetch,
        overlap_reductions: args.overlap_reductions,
        sharded_checkpoints: args.sharded_checkpoints,
        bucket_bytes: bucket_bytes(args.bucket_mb),
    };
    let Some(launch) = join(args.distributed) else {
        return ExitCode::FAILURE;
    };
    let comm = comm_choice(args.comm);
    let options = device_options(&args, &launch);
    let job = MnistJob {
        config: &config,
        launch: &launch,
        comm,
    };
    let backend_name = args.backend.name();
    let result = args.backend.open(&options, job).and_then(|trained| trained);
    match result {
        // Only rank 0 reports: every rank holds the same model and the figures are totals.
        Ok(_) if launch.rank != 0 => ExitCode::SUCCESS,
        Ok(report) => {
            let summary = serde_json::json!({
                "model": format!("{model:?}").to_lowercase(),
                "backend": backend_name,
                "epochs": config.epochs,
                "batch_size": config.batch_size,
                "world_size": report.world_size,
                "global_batch_size": config.batch_size * report.world_size,
                "seed": config.seed,
                "precision": config.precision.name(),
                "test_accuracy": report.final_accuracy(),
                "samples_per_s": report.samples_per_s(),
                "seconds": report.seconds,
                "resumed_from_step": report.resumed_from_step,
                "checkpoint": report.checkpoint.as_ref().map(|p| p.display().to_string()),
                "shard": report.shard.number(),
                "state_bytes_per_rank": report.state_bytes_per_rank,
                "peak_rss_bytes": report.peak_rss_bytes,
                "peak_virtual_bytes": report.peak_virtual_bytes,
            });
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => failure(&launch, &e),
    }
}

/// `train --init-from DIR`: the fine-tuning job on the chosen backend, then its JSON summary.
fn finetune_main(args: &Args) -> ExitCode {
    let Some(launch) = join(args.distributed) else {
        return ExitCode::FAILURE;
    };
    let mut text = text_config(
        args,
        finetune_job::DEFAULT_FINETUNE_LR,
        finetune_job::DEFAULT_FINETUNE_DIR,
    );
    // The cosine decays to --min-lr, or stays at a lower peak.
    text.args.min_lr = text.args.min_lr.min(text.lr);
    let config = FinetuneConfig {
        init_from: args.init_from.clone().expect("checked by the caller"),
        text,
    };
    let backend_name = args.backend.name();
    let options = device_options(args, &launch);
    let job = FinetuneJob {
        config: &config,
        launch: &launch,
        comm: comm_choice(args.comm),
    };
    let result = (args.backend)
        .open(&options, job)
        .and_then(|trained| trained);
    match result {
        Ok(_) if launch.rank != 0 => ExitCode::SUCCESS,
        Ok(report) => {
            println!("{}", report.summary(&config, backend_name));
            ExitCode::SUCCESS
        }
        Err(e) => failure(&launch, &e),
    }
}

/// [`finetune_job::run_finetune_with`] on the device the registry opens.
struct FinetuneJob<'a> {
    config: &'a FinetuneConfig,
    launch: &'a Launch,
    comm: CommChoice,
}

impl BackendJob for FinetuneJob<'_> {
    type Output = Result<finetune_job::FinetuneReport>;

    fn run<B: Backend>(self, dev: B) -> Self::Output {
        let comm = self.launch.communicator_for(&dev, self.comm)?;
        finetune_job::run_finetune_with(self.config, &dev, comm)
    }
}

/// The text jobs' options (`--model gpt` and `--init-from`), with their own default learning
/// rate and run folder.
fn text_config(args: &Args, default_lr: f64, default_dir: &str) -> GptTrainConfig {
    GptTrainConfig {
        args: args.gpt.clone(),
        batch_size: args.batch_size.unwrap_or(gpt_job::DEFAULT_BATCH),
        lr: args.lr.unwrap_or(default_lr),
        seed: args.seed,
        data: args
            .data
            .clone()
            .unwrap_or_else(GptTrainConfig::default_data),
        save: match args.no_save {
            true => None,
            false => Some(args.save.clone().unwrap_or_else(|| default_dir.into())),
        },
        checkpoint_every: args.checkpoint_every,
        keep_last: args.keep_last,
        resume: args.resume,
        halt_after_step: args.halt_after_step,
        log_dir: args.log_dir.clone(),
        progress: std::io::stderr().is_terminal(),
        dtype: tessera_core::DType::F32,
        precision: args.precision,
        shard: args.shard,
        shard_prefetch: args.shard_prefetch,
        overlap_reductions: args.overlap_reductions,
        sharded_checkpoints: args.sharded_checkpoints,
        bucket_bytes: bucket_bytes(args.bucket_mb),
    }
}

/// `train --model gpt`: the GPT job on the chosen backend, then its JSON summary.
fn gpt_main(args: &Args) -> ExitCode {
    let Some(launch) = join(args.distributed) else {
        return ExitCode::FAILURE;
    };
    let config = text_config(args, gpt_job::DEFAULT_LR, gpt_job::DEFAULT_CHECKPOINT_DIR);
    let backend_name = args.backend.name();
    let options = device_options(args, &launch);
    let job = GptJob {
        config: &config,
        launch: &launch,
        comm: comm_choice(args.comm),
    };
    let result = (args.backend)
        .open(&options, job)
        .and_then(|trained| trained);
    match result {
        // Only rank 0 reports: every rank holds the same model and the figures are averages.
        Ok(_) if launch.rank != 0 => ExitCode::SUCCESS,
        Ok(report) => {
            if !report.sample.is_empty() {
                eprintln!("sample:\n{}\n", report.sample);
            }
            let last = report.last();
            let summary = serde_json::json!({
                "model": "gpt",
                "backend": backend_name,
                "steps": config.args.steps,
                "batch_size": config.batch_size,
                "world_size": report.world_size,
                "global_batch_size": config.batch_size * report.world_size,
                "block_size": config.args.block_size,
                "seed": config.seed,
                "precision": config.precision.name(),
                "skipped_steps": report.skipped_steps,
                "parameters": report.parameters,
                "train_loss": last.train_loss,
                "val_loss": last.val_loss,
                "tokens_per_s": report.tokens_per_s,
                "samples_per_s": report.tokens_per_s / config.args.block_size as f64,
                "seconds": report.seconds,
                "checkpoint": config.save.as_ref().map(|p| p.display().to_string()),
                "resumed_from_step": report.resumed_from_step,
                "shard": report.shard.number(),
                "state_bytes_per_rank": report.state_bytes_per_rank,
                "peak_rss_bytes": report.peak_rss_bytes,
                "peak_virtual_bytes": report.peak_virtual_bytes,
            });
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => failure(&launch, &e),
    }
}

/// `--bucket-mb MB`: a bucket size in MiB, above 0 and at most 1e6.
fn parse_bucket_mb(text: &str) -> std::result::Result<f64, String> {
    match text.parse::<f64>() {
        Ok(mb) if mb.is_finite() && mb > 0.0 && mb <= 1e6 => Ok(mb),
        _ => Err(format!(
            "`{text}` is not a bucket size in MiB (above 0, at most 1e6)"
        )),
    }
}

/// `--bucket-mb` in bytes (at least one).
fn bucket_bytes(mb: f64) -> usize {
    ((mb * 1024.0 * 1024.0) as usize).max(1)
}

/// `--shard N`: a sharding level, 0 to 3.
fn parse_shard(text: &str) -> std::result::Result<ShardLevel, String> {
    let level: usize = text
        .parse()
        .map_err(|_| format!("`{text}` is not a sharding level (0, 1, 2 or 3)"))?;
    ShardLevel::from_number(level).map_err(|e| e.to_string())
}

/// Alone, or one rank of `mpirun`'s processes (see tessera_cli::distributed); None (the
/// error printed) when joining failed.
fn join(distributed: bool) -> Option<Launch> {
    match distributed {
        false => Some(Launch::single()),
        true => Launch::init().map_err(|e| eprintln!("error: {e}")).ok(),
    }
}

/// With --device-per-rank, the device numbered by the rank on its host (CUDA device i, OpenCL
/// device i); else the backend's default device.
fn device_options(args: &Args, launch: &Launch) -> DeviceOptions {
    DeviceOptions {
        ordinal: args.device_per_rank.then_some(launch.local_rank),
        ..DeviceOptions::default()
    }
}

/// Prints a run's error, naming the rank in a distributed run, and fails.
fn failure(launch: &Launch, e: &tessera_core::Error) -> ExitCode {
    match launch.distributed {
        true => eprintln!("error (rank {} of {}): {e}", launch.rank, launch.world_size),
        false => eprintln!("error: {e}"),
    }
    ExitCode::FAILURE
}

/// The communicator library `--comm` names.
fn comm_choice(arg: CommArg) -> CommChoice {
    match arg {
        CommArg::Auto => CommChoice::Auto,
        CommArg::Mpi => CommChoice::Mpi,
        CommArg::Nccl => CommChoice::Nccl,
    }
}
