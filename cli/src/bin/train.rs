//! `train`: trains a reference model on Fashion-MNIST (or MNIST) and reports test accuracy and
//! throughput, or (`--model gpt`) a character-level GPT on a text corpus and reports its
//! validation loss. The last line on stdout is a JSON summary.
//!
//! ```text
//! cargo run --release -p tessera-cli --bin train -- --model mlp --epochs 5
//! cargo run --release -p tessera-cli --bin train -- --model gpt
//! ```

use clap::{Parser, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera_checked::Checked;
use tessera_cli::gpt_job::{self, GptArgs, GptTrainConfig};
use tessera_cli::mnist_job::{run_training, OptimizerKind, ScheduleKind, TrainConfig};
use tessera_cpu::Cpu;
use tessera_nn::data::FASHION_MNIST_DIR;
use tessera_nn::models::ModelKind;

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
enum BackendArg {
    /// The multi-threaded CPU backend.
    Cpu,
    /// The default OpenCL device (`TESSERA_OPENCL_DEVICE=platform:device` picks another).
    Opencl,
    /// CUDA device 0 (built with `--features cuda`; `TESSERA_CUDA_GEMM=cublas|tiled|auto`).
    #[cfg(feature = "cuda")]
    Cuda,
    /// The CPU backend checked op by op against a second CPU backend (debugging the checker).
    CheckedCpu,
    /// OpenCL checked op by op against the CPU: stops at the first op that diverges.
    CheckedOpencl,
    /// CUDA checked op by op against the CPU: stops at the first op that diverges.
    #[cfg(feature = "cuda")]
    CheckedCuda,
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
    /// Samples per step (default: 128 for the MLP, 64 for the CNN, 32 sequences for the GPT).
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
    /// Compute backend.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendArg,
    /// Save the model and optimizer state here (safetensors) after every epoch; for the GPT,
    /// the checkpoint folder written at every loss estimate [default: checkpoints/gpt].
    #[arg(long)]
    save: Option<PathBuf>,
    /// Train on the first N samples only (quick runs).
    #[arg(long)]
    train_limit: Option<usize>,
    /// Evaluate on the first N test samples only (quick runs).
    #[arg(long)]
    test_limit: Option<usize>,
    #[command(flatten)]
    gpt: GptArgs,
}

fn main() -> ExitCode {
    // Keep freed tensor memory for reuse: a training program's choice (see tessera_cpu::tune_allocator).
    tessera_cpu::tune_allocator();
    let args = Args::parse();
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
        train_limit: args.train_limit,
        test_limit: args.test_limit,
        progress: std::io::stderr().is_terminal(),
    };
    let (backend_name, result) = match args.backend {
        BackendArg::Cpu => ("cpu", run_training(&config, &Cpu::new())),
        BackendArg::Opencl => (
            "opencl",
            tessera_opencl::OpenCl::new().and_then(|dev| run_training(&config, &dev)),
        ),
        #[cfg(feature = "cuda")]
        BackendArg::Cuda => (
            "cuda",
            tessera_cuda::Cuda::new(0).and_then(|dev| run_training(&config, &dev)),
        ),
        BackendArg::CheckedCpu => (
            "checked-cpu",
            run_training(&config, &Checked::new(Cpu::new(), Cpu::new())),
        ),
        BackendArg::CheckedOpencl => (
            "checked-opencl",
            tessera_opencl::OpenCl::new()
                .and_then(|dev| run_training(&config, &Checked::new(dev, Cpu::new()))),
        ),
        #[cfg(feature = "cuda")]
        BackendArg::CheckedCuda => (
            "checked-cuda",
            tessera_cuda::Cuda::new(0)
                .and_then(|dev| run_training(&config, &Checked::new(dev, Cpu::new()))),
        ),
    };
    match result {
        Ok(report) => {
            let summary = serde_json::json!({
                "model": format!("{model:?}").to_lowercase(),
                "backend": backend_name,
                "epochs": config.epochs,
                "batch_size": config.batch_size,
                "seed": config.seed,
                "test_accuracy": report.final_accuracy(),
                "samples_per_s": report.samples_per_s(),
                "seconds": report.seconds,
            });
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `train --model gpt`: the GPT job on the chosen backend, then its JSON summary.
fn gpt_main(args: &Args) -> ExitCode {
    let config = GptTrainConfig {
        args: args.gpt.clone(),
        batch_size: args.batch_size.unwrap_or(gpt_job::DEFAULT_BATCH),
        lr: args.lr.unwrap_or(gpt_job::DEFAULT_LR),
        seed: args.seed,
        data: args
            .data
            .clone()
            .unwrap_or_else(GptTrainConfig::default_data),
        save: Some(
            args.save
                .clone()
                .unwrap_or_else(|| gpt_job::DEFAULT_CHECKPOINT_DIR.into()),
        ),
        progress: std::io::stderr().is_terminal(),
        dtype: tessera_core::DType::F32,
    };
    let run = |name: &'static str, result| (name, result);
    let (backend_name, result) = match args.backend {
        BackendArg::Cpu => run("cpu", gpt_job::run_gpt_training(&config, &Cpu::new())),
        BackendArg::Opencl => run(
            "opencl",
            tessera_opencl::OpenCl::new().and_then(|dev| gpt_job::run_gpt_training(&config, &dev)),
        ),
        #[cfg(feature = "cuda")]
        BackendArg::Cuda => run(
            "cuda",
            tessera_cuda::Cuda::new(0).and_then(|dev| gpt_job::run_gpt_training(&config, &dev)),
        ),
        BackendArg::CheckedCpu => run(
            "checked-cpu",
            gpt_job::run_gpt_training(&config, &Checked::new(Cpu::new(), Cpu::new())),
        ),
        BackendArg::CheckedOpencl => run(
            "checked-opencl",
            tessera_opencl::OpenCl::new()
                .and_then(|dev| gpt_job::run_gpt_training(&config, &Checked::new(dev, Cpu::new()))),
        ),
        #[cfg(feature = "cuda")]
        BackendArg::CheckedCuda => run(
            "checked-cuda",
            tessera_cuda::Cuda::new(0)
                .and_then(|dev| gpt_job::run_gpt_training(&config, &Checked::new(dev, Cpu::new()))),
        ),
    };
    match result {
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
                "block_size": config.args.block_size,
                "seed": config.seed,
                "parameters": report.parameters,
                "train_loss": last.train_loss,
                "val_loss": last.val_loss,
                "tokens_per_s": report.tokens_per_s,
                "samples_per_s": report.tokens_per_s / config.args.block_size as f64,
                "seconds": report.seconds,
                "checkpoint": config.save.as_ref().map(|p| p.display().to_string()),
            });
            println!("{summary}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
