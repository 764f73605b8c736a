//! Saving a model with its optimizer mid-training and loading it into fresh objects restores
//! identical predictions and an identical continuation; strict loading rejects mismatches.

use std::collections::BTreeMap;
use tessera_autograd::{no_grad, Var};
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{BatchNorm1d, BatchNormConfig, Linear, LinearConfig, ReLU, Sequential};

type Model = Sequential<(Linear<B>, BatchNorm1d<B>, ReLU, Linear<B>)>;
use tessera_nn::optim::{Adam, AdamConfig};
use tessera_nn::training::{load_training_state, save_training_state, train_step};
use tessera_nn::{Forward, Module};

type B = Cpu;

fn model(seed: u64, dev: &B) -> Model {
    let mut g = Generator::new(seed);
    Sequential::new((
        LinearConfig::new(6, 8).init(dev, &mut g).unwrap(),
        BatchNormConfig::new(8).init_1d(dev).unwrap(),
        ReLU::new(),
        LinearConfig::new(8, 3).init(dev, &mut g).unwrap(),
    ))
}

fn data(seed: u64, dev: &B) -> (Tensor<B>, Tensor<B>) {
    let x = Tensor::<B>::randn([16, 6], DType::F32, seed, dev).unwrap();
    let labels: Vec<i64> = (0..16).map(|i| (i * 7 + seed as i64) % 3).collect();
    (x, Tensor::from_vec(labels, [16], dev).unwrap())
}

fn predictions<M: Forward<B>>(m: &M, x: &Tensor<B>) -> Vec<f32> {
    m.eval();
    let out = no_grad(|| m.forward(&Var::constant(x.clone())).unwrap().value());
    m.train();
    out.to_vec::<f32>().unwrap()
}

#[test]
fn a_restored_state_predicts_and_continues_identically() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.safetensors");

    let original = model(1, &dev);
    let mut opt = Adam::new(original.parameters(), AdamConfig::new(0.01)).unwrap();
    for step in 0..5 {
        let (x, y) = data(step, &dev);
        train_step(&original, &mut opt, x, &y).unwrap();
    }
    let mut meta = BTreeMap::new();
    meta.insert("epoch".to_string(), "3".to_string());
    save_training_state(&path, &original, &opt, &meta).unwrap();

    // A model initialised differently, with a fresh optimizer, becomes the saved one.
    let restored = model(99, &dev);
    let mut restored_opt = Adam::new(restored.parameters(), AdamConfig::new(0.01)).unwrap();
    let (probe, _) = data(42, &dev);
    assert_ne!(
        predictions(&original, &probe),
        predictions(&restored, &probe)
    );
    let info = load_training_state(&path, &restored, &mut restored_opt, &dev).unwrap();
    assert_eq!(info.metadata.get("epoch").map(String::as_str), Some("3"));
    assert_eq!(
        predictions(&original, &probe),
        predictions(&restored, &probe)
    );

    // Continuing both for a few steps stays bit-identical: the Adam moments and step counts and
    // the batch-norm running statistics were restored too.
    for step in 5..8 {
        let (x, y) = data(step, &dev);
        let a = train_step(&original, &mut opt, x.clone(), &y).unwrap();
        let b = train_step(&restored, &mut restored_opt, x, &y).unwrap();
        assert_eq!(a.to_scalar_f64().unwrap(), b.to_scalar_f64().unwrap());
    }
    assert_eq!(
        predictions(&original, &probe),
        predictions(&restored, &probe)
    );
}

fn saved_state(dev: &B, dir: &std::path::Path) -> std::path::PathBuf {
    let m = model(1, dev);
    let opt = Adam::new(m.parameters(), AdamConfig::new(0.01)).unwrap();
    let path = dir.join("state.safetensors");
    save_training_state(&path, &m, &opt, &BTreeMap::new()).unwrap();
    path
}

#[test]
fn loading_into_a_different_architecture_names_the_offending_tensor() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = saved_state(&dev, dir.path());

    // Mis-shaped: the last layer has 4 outputs instead of 3.
    let mut g = Generator::new(0);
    let wider = Sequential::new((
        LinearConfig::new(6, 8).init(&dev, &mut g).unwrap(),
        BatchNormConfig::new(8).init_1d(&dev).unwrap(),
        ReLU::new(),
        LinearConfig::new(8, 4).init(&dev, &mut g).unwrap(),
    ));
    let mut opt = Adam::new(wider.parameters(), AdamConfig::new(0.01)).unwrap();
    let before = predictions(&wider, &data(0, &dev).0);
    let err = load_training_state(&path, &wider, &mut opt, &dev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("3.weight"), "{err}");
    assert_eq!(
        before,
        predictions(&wider, &data(0, &dev).0),
        "a failed load changed the model"
    );

    // Missing in the file: an extra layer in the model.
    let (l0, b1, r2, l3) = model(1, &dev).into_layers();
    let deeper = Sequential::new((
        l0,
        b1,
        r2,
        l3,
        ReLU::new(),
        LinearConfig::new(3, 3).init(&dev, &mut g).unwrap(),
    ));
    let mut opt = Adam::new(deeper.parameters(), AdamConfig::new(0.01)).unwrap();
    let err = load_training_state(&path, &deeper, &mut opt, &dev)
        .unwrap_err()
        .to_string();
    assert!(err.contains("5.weight"), "{err}");

    // Extra in the file: a model without the batch-norm layer.
    let shallower = Sequential::new((
        LinearConfig::new(6, 8).init(&dev, &mut g).unwrap(),
        ReLU::new(),
        LinearConfig::new(8, 3).init(&dev, &mut g).unwrap(),
    ));
    let mut opt = Adam::new(shallower.parameters(), AdamConfig::new(0.01)).unwrap();
    let err = load_training_state(&path, &shallower, &mut opt, &dev)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("1.running_mean") || err.contains("1.weight"),
        "{err}"
    );
}

#[test]
fn a_truncated_state_file_is_an_error() {
    let dev = Cpu::new();
    let dir = tempfile::tempdir().unwrap();
    let path = saved_state(&dev, dir.path());
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() / 2]).unwrap();
    let m = model(1, &dev);
    let mut opt = Adam::new(m.parameters(), AdamConfig::new(0.01)).unwrap();
    assert!(load_training_state(&path, &m, &mut opt, &dev).is_err());
}
