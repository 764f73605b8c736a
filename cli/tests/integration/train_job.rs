//! The job behind the `train` command: reproducible for a seed, learns, and explains missing data.

use std::path::{Path, PathBuf};
use tessera_cli::mnist_job::{run_training, OptimizerKind, ScheduleKind, TrainConfig};
use tessera_cpu::Cpu;
use tessera_nn::data::FASHION_MNIST_DIR;
use tessera_nn::models::ModelKind;
use tessera_nn::precision::Precision;

fn quick_config(model: ModelKind, data_dir: PathBuf) -> TrainConfig {
    TrainConfig {
        model,
        epochs: 1,
        batch_size: 64,
        lr: 1e-3,
        optimizer: OptimizerKind::Adam,
        schedule: ScheduleKind::Cosine,
        seed: 7,
        data_dir,
        save: None,
        checkpoint_every: None,
        keep_last: 3,
        resume: false,
        halt_after_step: None,
        log_dir: None,
        train_limit: Some(2000),
        test_limit: Some(500),
        progress: false,
        precision: Precision::F32,
        shard: tessera_nn::distributed::ShardLevel::Replicated,
        shard_prefetch: false,
        overlap_reductions: false,
        sharded_checkpoints: false,
        bucket_bytes: tessera_nn::distributed::DEFAULT_BUCKET_BYTES,
    }
}

fn data_available() -> bool {
    let ok = Path::new(FASHION_MNIST_DIR)
        .join("train-images-idx3-ubyte.gz")
        .exists();
    if !ok {
        println!("skipped: {FASHION_MNIST_DIR} not found (apt-get install dataset-fashion-mnist)");
    }
    ok
}

#[test]
fn the_same_seed_gives_the_same_run_and_the_model_learns() {
    if !data_available() {
        return;
    }
    for model in [ModelKind::Mlp, ModelKind::Cnn] {
        let config = quick_config(model, FASHION_MNIST_DIR.into());
        let first = run_training(&config, &Cpu::new()).unwrap();
        let second = run_training(&config, &Cpu::new()).unwrap();
        let e1 = &first.epochs[0];
        let e2 = &second.epochs[0];
        assert_eq!(e1.train_loss, e2.train_loss, "{model:?}");
        assert_eq!(e1.test_accuracy, e2.test_accuracy, "{model:?}");
        // Ten balanced classes: chance is 10%; 2000 samples of training get far above it.
        assert!(
            e1.test_accuracy > 0.6,
            "{model:?}: accuracy {}",
            e1.test_accuracy
        );
    }
}

#[test]
fn a_missing_data_folder_says_how_to_install_the_data() {
    let config = quick_config(ModelKind::Mlp, "/nonexistent/tessera-data".into());
    let err = run_training(&config, &Cpu::new()).unwrap_err().to_string();
    assert!(
        err.contains("apt-get install dataset-fashion-mnist"),
        "{err}"
    );
    assert!(err.contains("/nonexistent/tessera-data"), "{err}");
}

#[test]
fn bf16_and_f16_training_learn_like_f32() {
    if !data_available() {
        return;
    }
    let base = ModelKind::Mlp;
    let f32_run = run_training(&quick_config(base, FASHION_MNIST_DIR.into()), &Cpu::new()).unwrap();
    let reference = f32_run.epochs[0].test_accuracy;
    for precision in [Precision::BF16, Precision::F16] {
        let config = TrainConfig {
            precision,
            ..quick_config(base, FASHION_MNIST_DIR.into())
        };
        let run = run_training(&config, &Cpu::new()).unwrap();
        let e = &run.epochs[0];
        assert!(
            e.train_loss.is_finite(),
            "{precision:?}: loss {}",
            e.train_loss
        );
        // 500 test images: one image is 0.2%; the 16-bit runs round differently, so allow a
        // few images either way (a broken policy or scaler lands near chance, 10%).
        assert!(
            (e.test_accuracy - reference).abs() < 0.03,
            "{precision:?}: accuracy {} vs f32 {reference}",
            e.test_accuracy
        );
    }
}
