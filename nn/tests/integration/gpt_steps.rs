//! What the GPT tests of level 3 share: the optimizer, a batch drawn from a seed, one training
//! step, and (for any model) every parameter's bits and whether a value is a placeholder.

use tessera_autograd::Var;
use tessera_core::{Result, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::gpt::Gpt;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::Module;

/// AdamW at learning rate 0.01.
pub(crate) fn adamw(params: Vec<(String, Var<Cpu>)>) -> Result<AdamW<Cpu>> {
    AdamW::new(params, AdamWConfig::new(0.01))
}

/// Two windows of 8 tokens (of a vocabulary of 11) drawn from `seed`: inputs and next-token
/// targets.
pub(crate) fn batch(seed: u64, dev: &Cpu) -> (Tensor<Cpu>, Tensor<Cpu>) {
    let tokens: Vec<i64> = (0..2 * 9)
        .map(|i| ((i as u64 * 5 + seed * 3) % 11) as i64)
        .collect();
    let all = Tensor::from_vec(tokens, [2, 9], dev).unwrap();
    let x = all.narrow(1, 0, 8).unwrap().contiguous().unwrap();
    let y = all.narrow(1, 1, 8).unwrap().contiguous().unwrap();
    (x, y)
}

/// One optimizer step on `batch(seed)`: the loss.
pub(crate) fn step(model: &Gpt<Cpu>, optimizer: &mut dyn Optimizer<Cpu>, seed: u64) -> f64 {
    let (x, y) = batch(seed, &Cpu::new());
    optimizer.zero_grad();
    let loss = model.loss(&x, &y).unwrap();
    loss.backward().unwrap();
    optimizer.step().unwrap();
    loss.value().to_scalar_f64().unwrap()
}

/// Every parameter's bits, by name (of any f32 model).
pub(crate) fn bits<M: Module<Cpu>>(model: &M) -> Vec<(String, Vec<u32>)> {
    model
        .parameters()
        .into_iter()
        .map(|(n, v)| {
            let values = v.value().to_vec::<f32>().unwrap();
            (n, values.into_iter().map(f32::to_bits).collect())
        })
        .collect()
}

/// Whether a tensor is one element broadcast to its shape (a placeholder).
pub(crate) fn is_placeholder(value: &Tensor<Cpu>) -> bool {
    value.numel() > 1 && value.layout().strides().iter().all(|&s| s == 0)
}
