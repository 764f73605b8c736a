//! The training problem shared by the MPI test program (`examples/mpi_check.rs`, run under
//! `mpirun`) and the test that launches it (`tests/mpi_ranks.rs`, which computes the
//! single-process reference): a small f64 MLP on a fixed synthetic data set.

#![allow(dead_code)]

use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::data::shuffle::epoch_permutation;
use tessera_nn::layers::{Linear, LinearConfig, ReLU, Sequential};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};
use tessera_nn::{Forward, Module};

pub const FEATURES: usize = 6;
pub const CLASSES: usize = 3;
pub const ITEMS: usize = 240;
pub const SEED: u64 = 5;
pub const STEPS: usize = 20;
pub const GLOBAL_BATCH: usize = 12;

pub type Model = Sequential<(Linear<Cpu>, ReLU, Linear<Cpu>)>;

/// The model, initialised from `seed`.
pub fn model(seed: u64, dev: &Cpu) -> Model {
    let mut g = Generator::new(seed);
    Sequential::new((
        LinearConfig::new(FEATURES, 16)
            .dtype(DType::F64)
            .init(dev, &mut g)
            .expect("valid layer"),
        ReLU::new(),
        LinearConfig::new(16, CLASSES)
            .dtype(DType::F64)
            .init(dev, &mut g)
            .expect("valid layer"),
    ))
}

/// SGD with momentum over the model's parameters.
pub fn optimizer(model: &impl Module<Cpu>) -> Sgd<Cpu> {
    Sgd::new(model.parameters(), SgdConfig::new(0.1).momentum(0.9)).expect("valid optimizer")
}

/// AdamW with weight decay over `params` (the sharded runs' optimizer).
pub fn adamw(params: Vec<(String, Var<Cpu>)>) -> AdamW<Cpu> {
    let config = AdamWConfig {
        weight_decay: 0.05,
        ..AdamWConfig::new(0.02)
    };
    AdamW::new(params, config).expect("valid optimizer")
}

/// Items `indices` of the data set: f64 features `[n, FEATURES]` and labels `[n]`.
pub fn batch(indices: &[usize], dev: &Cpu) -> (Tensor<Cpu>, Tensor<Cpu>) {
    let all = Tensor::randn([ITEMS, FEATURES], DType::F64, 17, dev)
        .and_then(|t| t.to_vec::<f64>())
        .expect("data");
    let mut x = Vec::with_capacity(indices.len() * FEATURES);
    for &i in indices {
        x.extend_from_slice(&all[i * FEATURES..(i + 1) * FEATURES]);
    }
    let y: Vec<i64> = indices
        .iter()
        .map(|&i| ((all[i * FEATURES] > 0.0) as i64) + (i % 2) as i64)
        .collect();
    (
        Tensor::from_vec(x, [indices.len(), FEATURES], dev).expect("features"),
        Tensor::from_vec(y, [indices.len()], dev).expect("labels"),
    )
}

/// Every parameter's values, concatenated in visiting order.
pub fn flat_parameters(model: &impl Module<Cpu>) -> Vec<f64> {
    model
        .parameters()
        .iter()
        .flat_map(|(_, v)| v.value().to_vec::<f64>().expect("f64 parameters"))
        .collect()
}

/// The parameters of rank 0's model before training.
pub fn model_start() -> Vec<f64> {
    flat_parameters(&model(SEED, &Cpu::new()))
}

/// One process at batch `GLOBAL_BATCH`, without any communicator: the parameters after each
/// of `STEPS` steps.
pub fn single_process_reference() -> Vec<Vec<f64>> {
    let dev = Cpu::new();
    let model = model(SEED, &dev);
    reference_with(&model, optimizer(&model), &dev)
}

/// [`single_process_reference`] with [`adamw`].
pub fn single_process_adamw_reference() -> Vec<Vec<f64>> {
    let dev = Cpu::new();
    let model = model(SEED, &dev);
    let opt = adamw(model.parameters());
    reference_with(&model, opt, &dev)
}

fn reference_with(model: &Model, mut opt: impl Optimizer<Cpu>, dev: &Cpu) -> Vec<Vec<f64>> {
    let order = epoch_permutation(ITEMS, SEED, 0);
    let mut out = Vec::new();
    for k in 0..STEPS {
        let (x, y) = batch(&order[k * GLOBAL_BATCH..(k + 1) * GLOBAL_BATCH], dev);
        let logits = model.forward(&Var::constant(x)).expect("forward");
        let loss = cross_entropy(&logits, &y).expect("loss");
        opt.zero_grad();
        loss.backward().expect("backward");
        opt.step().expect("step");
        out.push(flat_parameters(model));
    }
    out
}
