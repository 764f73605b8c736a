//! Batches uploaded to a backend: an F32 features tensor of the batch's dims and an I64 labels
//! tensor, with the host values.

use tessera_core::DType;
use tessera_cpu::Cpu;
use tessera_nn::data::{Batch, DataLoader, LoaderConfig, MnistDataset, MnistLike, Normalization};

#[test]
fn batches_become_f32_features_and_i64_labels() {
    let images: Vec<u8> = (0..5 * 9).map(|i| (i * 5) as u8).collect();
    let data = MnistLike::from_raw(images, [3, 3], vec![4, 3, 2, 1, 0]).unwrap();
    let loader = DataLoader::new(
        MnistDataset::new(data, Normalization::UNIT_RANGE),
        LoaderConfig::new(2).sequential(),
    )
    .unwrap();
    let batches: Vec<Batch> = loader.epoch(0).unwrap().map(Result::unwrap).collect();
    assert_eq!(batches.len(), 3);
    let dev = Cpu::new();
    let (x, y) = batches[0].to_tensors(&dev).unwrap();
    assert_eq!(x.dims(), &[2, 1, 3, 3]);
    assert_eq!(x.dtype(), DType::F32);
    assert_eq!(y.dims(), &[2]);
    assert_eq!(y.dtype(), DType::I64);
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![4, 3]);
    // Pixel k of the first image is 5k / 255.
    let xs = x.to_vec::<f32>().unwrap();
    assert!((xs[3] - 15.0 / 255.0).abs() < 1e-7);
    assert_eq!(xs, batches[0].features);

    let last = batches[2].clone();
    let (x, y) = last.into_tensors(&dev).unwrap();
    assert_eq!(x.dims(), &[1, 1, 3, 3]);
    assert_eq!(y.to_vec::<i64>().unwrap(), vec![0]);

    // Inconsistent hand-made batches are errors, not panics.
    let broken = Batch {
        features: vec![0.0; 5],
        feature_dims: vec![2, 3],
        labels: vec![1, 2],
        indices: vec![0, 1],
    };
    assert!(broken.to_tensors(&dev).is_err());
}
