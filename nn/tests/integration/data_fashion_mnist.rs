//! The real Fashion-MNIST files, when installed (`apt-get install dataset-fashion-mnist`): sizes,
//! label range and the data set's known balance of 6000 training / 1000 test images per class.
//! Skipped, with the reason printed, when the files are absent.

use std::path::Path;
use std::time::Instant;
use tessera_nn::data::{
    DataLoader, Dataset, LoaderConfig, MnistDataset, MnistLike, Normalization, Split,
    FASHION_MNIST_DIR,
};

fn installed() -> bool {
    let present = Path::new(FASHION_MNIST_DIR).is_dir();
    if !present {
        println!(
            "skipped: {FASHION_MNIST_DIR} does not exist (apt-get install dataset-fashion-mnist)"
        );
    }
    present
}

#[test]
fn fashion_mnist_has_the_documented_sizes_and_balance() {
    if !installed() {
        return;
    }
    for (split, n, per_class) in [(Split::Train, 60_000, 6_000), (Split::Test, 10_000, 1_000)] {
        let data = MnistLike::load(FASHION_MNIST_DIR, split).unwrap();
        assert_eq!(data.image_dims(), [n, 28, 28], "{split}");
        assert_eq!(data.labels().len(), n);
        assert!(data.labels().iter().all(|&l| l < 10));
        assert_eq!(data.class_histogram(), vec![per_class; 10], "{split}");
        // Every image has some ink and some background.
        let first = data.image(0).unwrap();
        assert!(first.contains(&0) && first.iter().any(|&p| p > 100));
    }
}

#[test]
fn fashion_mnist_normalised_training_set_has_mean_0_std_1() {
    if !installed() {
        return;
    }
    let data = MnistLike::load(FASHION_MNIST_DIR, Split::Train).unwrap();
    let dataset = MnistDataset::new(data, Normalization::FASHION_MNIST);
    let indices: Vec<usize> = (0..dataset.len()).collect();
    let (mut features, mut labels) = (Vec::new(), Vec::new());
    dataset
        .fill_batch(&indices, &mut features, &mut labels)
        .unwrap();
    let n = features.len() as f64;
    let mean = features.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = features
        .iter()
        .map(|&x| (x as f64 - mean).powi(2))
        .sum::<f64>()
        / n;
    // 0.2860 / 0.3530 are the training set's statistics rounded to 4 digits.
    assert!(mean.abs() < 1e-3, "mean {mean}");
    assert!((var.sqrt() - 1.0).abs() < 1e-3, "std {}", var.sqrt());
}

/// Decode + normalise + batch one training epoch (60000 images, batch 128). Run with
/// `cargo test -p tessera-nn --release --test data_fashion_mnist -- --ignored --nocapture`.
#[test]
#[ignore = "timing measurement"]
fn time_one_training_epoch() {
    if !installed() {
        return;
    }
    let start = Instant::now();
    let data = MnistLike::load(FASHION_MNIST_DIR, Split::Train).unwrap();
    let decoded = start.elapsed();
    let dataset = MnistDataset::new(data, Normalization::FASHION_MNIST);
    for prefetch in [0, 2] {
        let loader = DataLoader::new(
            dataset.clone(),
            LoaderConfig::new(128).shuffled(1).prefetch(prefetch),
        )
        .unwrap();
        let t = Instant::now();
        let mut items = 0;
        let mut checksum = 0.0f64;
        for batch in loader.epoch(0).unwrap() {
            let batch = batch.unwrap();
            items += batch.len();
            checksum += batch.features[0] as f64;
        }
        assert_eq!(items, 60_000);
        println!(
            "prefetch {prefetch}: batching one epoch (469 batches of <=128): {:?} (checksum {checksum:.3})",
            t.elapsed()
        );
    }
    println!("decode (gunzip + parse) of the training split: {decoded:?}");
}
