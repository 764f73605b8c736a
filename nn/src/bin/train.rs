//! `train`: trains a reference model on Fashion-MNIST (or MNIST) and reports test accuracy and
//! throughput. The last line on stdout is a JSON summary.
//!
//! ```text
//! cargo run --release -p nn --bin train -- --model mlp --epochs 5
//! ```

use clap::{Parser, ValueEnum};
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use tessera_checked::Checked;
use tessera_cpu::Cpu;
use tessera_nn::data::FASHION_MNIST_DIR;
use tessera_nn::models::ModelKind;
use tessera_nn::training::{run_training, OptimizerKind, ScheduleKind, TrainConfig};

#[derive(Clone, Copy, Debug, ValueEnum)]
enum ModelArg {
    /// 784-512-512-10 multi-layer perceptron.
    Mlp,
    /// Two conv + pool blocks and two linear layers.
    Cnn,
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
    /// Samples per step (default: 128 for the MLP, 64 for the CNN).
    #[arg(long)]
    batch_size: Option<usize>,
    /// Learning rate.
    #[arg(long, default_value_t = 1e-3)]
    lr: f64,
    /// Optimizer.
    #[arg(long, value_enum, default_value = "adam")]
    optimizer: OptimizerArg,
    /// Learning-rate schedule.
    #[arg(long, value_enum, default_value = "cosine")]
    schedule: ScheduleArg,
    /// Seed for initialisation and shuffling.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Folder with the IDX files (train-images-idx3-ubyte[.gz], ...).
    #[arg(long, default_value = FASHION_MNIST_DIR)]
    data: PathBuf,
    /// Compute backend.
    #[arg(long, value_enum, default_value = "cpu")]
    backend: BackendArg,
    /// Save the model and optimizer state here (safetensors) after every epoch.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Train on the first N samples only (quick runs).
    #[arg(long)]
    train_limit: Option<usize>,
    /// Evaluate on the first N test samples only (quick runs).
    #[arg(long)]
    test_limit: Option<usize>,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let model = match args.model {
        ModelArg::Mlp => ModelKind::Mlp,
        ModelArg::Cnn => ModelKind::Cnn,
    };
    let config = TrainConfig {
        model,
        epochs: args.epochs,
        batch_size: args.batch_size.unwrap_or(match model {
            ModelKind::Mlp => 128,
            ModelKind::Cnn => 64,
        }),
        lr: args.lr,
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
        data_dir: args.data.clone(),
        save: args.save.clone(),
        train_limit: args.train_limit,
        test_limit: args.test_limit,
        progress: std::io::stderr().is_terminal(),
    };
    let (backend_name, result) = match args.backend {
        BackendArg::Cpu => ("cpu", run_training(&config, &Cpu::new())),
        BackendArg::Opencl => (
            "opencl",
            tessera_opencl::OpenCl::new()
                .map_err(Into::into)
                .and_then(|dev| run_training(&config, &dev)),
        ),
        #[cfg(feature = "cuda")]
        BackendArg::Cuda => (
            "cuda",
            tessera_cuda::Cuda::new(0)
                .map_err(Into::into)
                .and_then(|dev| run_training(&config, &dev)),
        ),
        BackendArg::CheckedCpu => (
            "checked-cpu",
            run_training(&config, &Checked::new(Cpu::new(), Cpu::new())),
        ),
        BackendArg::CheckedOpencl => (
            "checked-opencl",
            tessera_opencl::OpenCl::new()
                .map_err(Into::into)
                .and_then(|dev| run_training(&config, &Checked::new(dev, Cpu::new()))),
        ),
        #[cfg(feature = "cuda")]
        BackendArg::CheckedCuda => (
            "checked-cuda",
            tessera_cuda::Cuda::new(0)
                .map_err(Into::into)
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
