//! Mixed-precision training on the OpenCL backend (PoCL in CI): the MLP learns in bf16 and in
//! f16 with the loss scaler like it does in f32 on the same device, and the f32 run agrees with
//! the CPU's. Skips, printing why, without Fashion-MNIST or an OpenCL device.

use std::path::{Path, PathBuf};
use tessera_cli::mnist_job::{run_training, OptimizerKind, ScheduleKind, TrainConfig};
use tessera_cpu::Cpu;
use tessera_nn::data::FASHION_MNIST_DIR;
use tessera_nn::models::ModelKind;
use tessera_nn::precision::Precision;
use tessera_opencl::OpenCl;

fn config(precision: Precision) -> TrainConfig {
    TrainConfig {
        model: ModelKind::Mlp,
        epochs: 1,
        batch_size: 64,
        lr: 1e-3,
        optimizer: OptimizerKind::Adam,
        schedule: ScheduleKind::Cosine,
        seed: 7,
        data_dir: PathBuf::from(FASHION_MNIST_DIR),
        save: None,
        checkpoint_every: None,
        keep_last: 3,
        resume: false,
        halt_after_step: None,
        log_dir: None,
        train_limit: Some(2000),
        test_limit: Some(500),
        progress: false,
        precision,
        shard: tessera_nn::distributed::ShardLevel::Replicated,
        shard_prefetch: false,
        overlap_reductions: false,
        sharded_checkpoints: false,
        bucket_bytes: tessera_nn::distributed::DEFAULT_BUCKET_BYTES,
    }
}

#[test]
fn bf16_and_f16_training_on_opencl_learn_like_f32() {
    if !Path::new(FASHION_MNIST_DIR)
        .join("train-images-idx3-ubyte.gz")
        .exists()
    {
        println!("skipped: {FASHION_MNIST_DIR} not found (apt-get install dataset-fashion-mnist)");
        return;
    }
    let dev = match OpenCl::new() {
        Ok(dev) => dev,
        Err(e) => {
            println!("skipped: no OpenCL device ({e})");
            return;
        }
    };
    let f32_run = run_training(&config(Precision::F32), &dev).unwrap();
    let reference = f32_run.epochs[0].test_accuracy;
    let cpu = run_training(&config(Precision::F32), &Cpu::new()).unwrap();
    // Same seed, same data: only the order of f32 operations differs between the backends.
    assert!(
        (cpu.epochs[0].test_accuracy - reference).abs() <= 0.02,
        "OpenCL f32 {reference} vs CPU f32 {}",
        cpu.epochs[0].test_accuracy
    );
    for precision in [Precision::BF16, Precision::F16] {
        let run = run_training(&config(precision), &dev).unwrap();
        let e = &run.epochs[0];
        assert!(
            e.train_loss.is_finite(),
            "{precision:?}: loss {}",
            e.train_loss
        );
        // 500 test images: one image is 0.2%; a broken kernel or scaler lands near chance (10%).
        assert!(
            (e.test_accuracy - reference).abs() < 0.03,
            "{precision:?}: accuracy {} vs f32 {reference}",
            e.test_accuracy
        );
    }
}
