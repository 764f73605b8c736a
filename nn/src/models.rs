//! The two reference models of the `train` command and the benchmarks.

use crate::layers::{Conv2d, Conv2dConfig, Flatten, Linear, MaxPool2d, ReLU, Sequential};
use tessera_core::{Backend, DType, Generator, Result};

/// Which reference model to build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelKind {
    /// [`mlp`]: 784-512-512-10 with ReLU.
    Mlp,
    /// [`cnn`]: two conv + pool blocks and two linear layers.
    Cnn,
}

impl ModelKind {
    /// Input dims of one sample (without the batch axis): `[784]` or `[1, 28, 28]`.
    pub fn sample_dims(self) -> Vec<usize> {
        match self {
            ModelKind::Mlp => vec![784],
            ModelKind::Cnn => vec![1, 28, 28],
        }
    }

    /// Builds the model for 28x28 grey images and 10 classes.
    pub fn build<B: Backend>(self, dtype: DType, seed: u64, backend: &B) -> Result<Sequential<B>> {
        match self {
            ModelKind::Mlp => mlp(dtype, seed, backend),
            ModelKind::Cnn => cnn(dtype, seed, backend),
        }
    }
}

/// A multi-layer perceptron `784 → 512 → 512 → 10` with ReLU, initialised from `seed`.
pub fn mlp<B: Backend>(dtype: DType, seed: u64, backend: &B) -> Result<Sequential<B>> {
    let mut g = Generator::new(seed);
    Ok(Sequential::new()
        .with(Linear::new(784, 512, true, dtype, &mut g, backend)?)
        .with(ReLU::new())
        .with(Linear::new(512, 512, true, dtype, &mut g, backend)?)
        .with(ReLU::new())
        .with(Linear::new(512, 10, true, dtype, &mut g, backend)?))
}

/// A small CNN for `[n, 1, 28, 28]` inputs: conv 3x3 (32) → ReLU → max-pool 2 → conv 3x3 (64)
/// → ReLU → max-pool 2 → flatten → linear 3136 → 128 → ReLU → linear 128 → 10.
pub fn cnn<B: Backend>(dtype: DType, seed: u64, backend: &B) -> Result<Sequential<B>> {
    let mut g = Generator::new(seed);
    let conv = |c_in, c_out, g: &mut Generator| {
        Conv2d::new(
            Conv2dConfig::new(c_in, c_out, (3, 3)).padding((1, 1)),
            dtype,
            g,
            backend,
        )
    };
    Ok(Sequential::new()
        .with(conv(1, 32, &mut g)?)
        .with(ReLU::new())
        .with(MaxPool2d::square(2)?)
        .with(conv(32, 64, &mut g)?)
        .with(ReLU::new())
        .with(MaxPool2d::square(2)?)
        .with(Flatten::new())
        .with(Linear::new(64 * 7 * 7, 128, true, dtype, &mut g, backend)?)
        .with(ReLU::new())
        .with(Linear::new(128, 10, true, dtype, &mut g, backend)?))
}
