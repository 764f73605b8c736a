//! The two reference models of the `train` command and the benchmarks, as [`Sequential`]s whose
//! parameter names match the PyTorch peers' (`0.weight`, `0.bias`, `2.weight`, ...).

use crate::layers::{
    Conv2d, Conv2dConfig, Flatten, Linear, LinearConfig, MaxPool2d, Pool2dConfig, ReLU, Sequential,
};
use crate::module::{Forward, ModuleVisitor, ToBackend};
use crate::precision::Precision;
use crate::Module;
use tessera_autograd::Var;
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
    /// Builds the model for 28x28 grey images and 10 classes, initialised from `seed`.
    pub fn build<B: Backend>(
        self,
        dtype: DType,
        seed: u64,
        backend: &B,
    ) -> Result<ReferenceModel<B>> {
        self.build_with_precision(dtype, Precision::F32, seed, backend)
    }

    /// [`ModelKind::build`] with the linear and convolution layers computing under
    /// `precision` (parameters stay `dtype`).
    pub fn build_with_precision<B: Backend>(
        self,
        dtype: DType,
        precision: Precision,
        seed: u64,
        backend: &B,
    ) -> Result<ReferenceModel<B>> {
        Ok(match self {
            ModelKind::Mlp => {
                ReferenceModel::Mlp(mlp_with_precision(dtype, precision, seed, backend)?)
            }
            ModelKind::Cnn => ReferenceModel::Cnn(Box::new(cnn_with_precision(
                dtype, precision, seed, backend,
            )?)),
        })
    }

    /// Input dims of one sample (without the batch axis): `[784]` or `[1, 28, 28]`.
    pub fn sample_dims(self) -> Vec<usize> {
        match self {
            ModelKind::Mlp => vec![784],
            ModelKind::Cnn => vec![1, 28, 28],
        }
    }
}

/// The MLP's type: `784 → 512 → 512 → 10` with ReLU.
pub type Mlp<B> = Sequential<(Linear<B>, ReLU, Linear<B>, ReLU, Linear<B>)>;

/// The CNN's type: conv 3x3 (32) → ReLU → max-pool 2 → conv 3x3 (64) → ReLU → max-pool 2 →
/// flatten → linear 3136 → 128 → ReLU → linear 128 → 10.
pub type Cnn<B> = Sequential<(
    Conv2d<B>,
    ReLU,
    MaxPool2d,
    Conv2d<B>,
    ReLU,
    MaxPool2d,
    Flatten,
    Linear<B>,
    ReLU,
    Linear<B>,
)>;

/// A multi-layer perceptron `784 → 512 → 512 → 10` with ReLU, initialised from `seed`.
pub fn mlp<B: Backend>(dtype: DType, seed: u64, backend: &B) -> Result<Mlp<B>> {
    mlp_with_precision(dtype, Precision::F32, seed, backend)
}

/// [`mlp`] with its linear layers computing under `precision`.
pub fn mlp_with_precision<B: Backend>(
    dtype: DType,
    precision: Precision,
    seed: u64,
    backend: &B,
) -> Result<Mlp<B>> {
    let mut g = Generator::new(seed);
    let linear = |i, o, g: &mut Generator| {
        LinearConfig::new(i, o)
            .dtype(dtype)
            .precision(precision)
            .init(backend, g)
    };
    Ok(Sequential::new((
        linear(784, 512, &mut g)?,
        ReLU::new(),
        linear(512, 512, &mut g)?,
        ReLU::new(),
        linear(512, 10, &mut g)?,
    )))
}

/// A small CNN for `[n, 1, 28, 28]` inputs (see [`Cnn`]), initialised from `seed`.
pub fn cnn<B: Backend>(dtype: DType, seed: u64, backend: &B) -> Result<Cnn<B>> {
    cnn_with_precision(dtype, Precision::F32, seed, backend)
}

/// [`cnn`] with its convolutions and linear layers computing under `precision` (parameters,
/// ReLU and pooling in `dtype`).
pub fn cnn_with_precision<B: Backend>(
    dtype: DType,
    precision: Precision,
    seed: u64,
    backend: &B,
) -> Result<Cnn<B>> {
    let mut g = Generator::new(seed);
    let conv = |c_in, c_out, g: &mut Generator| {
        Conv2dConfig::new(c_in, c_out, (3, 3))
            .padding((1, 1))
            .dtype(dtype)
            .precision(precision)
            .init(backend, g)
    };
    let linear = |i, o, g: &mut Generator| {
        LinearConfig::new(i, o)
            .dtype(dtype)
            .precision(precision)
            .init(backend, g)
    };
    let pool = || Pool2dConfig::new((2, 2)).init_max();
    Ok(Sequential::new((
        conv(1, 32, &mut g)?,
        ReLU::new(),
        pool()?,
        conv(32, 64, &mut g)?,
        ReLU::new(),
        pool()?,
        Flatten::new(),
        linear(64 * 7 * 7, 128, &mut g)?,
        ReLU::new(),
        linear(128, 10, &mut g)?,
    )))
}

/// Either reference model, for code that picks one at run time (the benchmarks, the `train`
/// command). Names, training mode and transfer are those of the model inside.
pub enum ReferenceModel<B: Backend> {
    /// The [`Mlp`].
    Mlp(Mlp<B>),
    /// The [`Cnn`] (boxed: it is much larger than the MLP's handles).
    Cnn(Box<Cnn<B>>),
}

impl<B: Backend> Module<B> for ReferenceModel<B> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        match self {
            ReferenceModel::Mlp(m) => m.visit(prefix, visitor),
            ReferenceModel::Cnn(m) => m.visit(prefix, visitor),
        }
    }
    fn set_training(&self, training: bool) {
        match self {
            ReferenceModel::Mlp(m) => m.set_training(training),
            ReferenceModel::Cnn(m) => m.set_training(training),
        }
    }
    fn training_mode(&self) -> Option<bool> {
        match self {
            ReferenceModel::Mlp(m) => m.training_mode(),
            ReferenceModel::Cnn(m) => m.training_mode(),
        }
    }
}

impl<B: Backend> ToBackend<B> for ReferenceModel<B> {
    type On<B2: Backend> = ReferenceModel<B2>;
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<ReferenceModel<B2>> {
        Ok(match self {
            ReferenceModel::Mlp(m) => ReferenceModel::Mlp(m.to_backend(backend)?),
            ReferenceModel::Cnn(m) => ReferenceModel::Cnn(m.to_backend(backend)?),
        })
    }
}

impl<B: Backend> Forward<B> for ReferenceModel<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        match self {
            ReferenceModel::Mlp(m) => m.forward(x),
            ReferenceModel::Cnn(m) => m.forward(x),
        }
    }
}
