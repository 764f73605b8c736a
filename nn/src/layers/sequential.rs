//! [`Sequential`]: a chain of layers applied in order.

use crate::module::{Forward, Module, ModuleVisitor, ToBackend};
use tessera_autograd::Var;
use tessera_core::{Backend, Result};

/// Layers applied one after the other (PyTorch's `nn.Sequential`), held as a tuple so that the
/// whole chain keeps its concrete type: it can be saved, loaded and moved to another backend
/// like any derived module. Children are named by their position, as in PyTorch: the
/// parameters of the first child are `"0.weight"`, `"0.bias"`, ...
///
/// ```
/// use tessera_autograd::Var;
/// use tessera_cpu::Cpu;
/// use tessera_nn::layers::{LinearConfig, ReLU, Sequential};
/// use tessera_nn::{Forward, Module};
/// use tessera_core::{DType, Generator, Tensor};
/// # fn main() -> tessera_core::Result<()> {
/// let (dev, mut g) = (Cpu::new(), Generator::new(0));
/// let mlp = Sequential::new((
///     LinearConfig::new(4, 16).init(&dev, &mut g)?,
///     ReLU::new(),
///     LinearConfig::new(16, 3).init(&dev, &mut g)?,
/// ));
/// let names: Vec<String> = mlp.parameters().into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// let x = Var::constant(Tensor::zeros([8, 4], DType::F32, &dev)?);
/// assert_eq!(mlp.forward(&x)?.dims(), &[8, 3]);
/// # Ok(()) }
/// ```
///
/// A chain of one repeated layer type of any length is a `Vec` of it (also a [`Forward`]).
#[derive(Clone, Debug, Default)]
pub struct Sequential<L> {
    layers: L,
}

impl<L> Sequential<L> {
    /// The chain of `layers`, a tuple of up to 12 modules (nest `Sequential`s for more).
    pub fn new(layers: L) -> Self {
        Sequential { layers }
    }

    /// The layers.
    pub fn layers(&self) -> &L {
        &self.layers
    }

    /// The layers, by value.
    pub fn into_layers(self) -> L {
        self.layers
    }
}

impl<B: Backend, L: Module<B>> Module<B> for Sequential<L> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        self.layers.visit(prefix, visitor);
    }
    fn set_training(&self, training: bool) {
        self.layers.set_training(training);
    }
    fn training_mode(&self) -> Option<bool> {
        self.layers.training_mode()
    }
}

impl<B: Backend, L: ToBackend<B>> ToBackend<B> for Sequential<L> {
    type On<B2: Backend> = Sequential<L::On<B2>>;
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Self::On<B2>> {
        Ok(Sequential::new(self.layers.to_backend(backend)?))
    }
}

impl<B: Backend, L: Forward<B>> Forward<B> for Sequential<L> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.layers.forward(x)
    }
}
