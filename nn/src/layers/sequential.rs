//! [`Sequential`]: a chain of modules applied in order.

use crate::module::{child_name, Module, TrainingMode};
use tessera_autograd::Var;
use tessera_core::{Backend, Result};

/// Modules applied one after the other (PyTorch's `nn.Sequential`). Children are named by their
/// position: the parameters of the first child are `"0.weight"`, `"0.bias"`, ...; an empty chain
/// is the identity.
///
/// ```
/// use tessera_autograd::Var;
/// use tessera_cpu::Cpu;
/// use tessera_nn::layers::{Linear, ReLU, Sequential};
/// use tessera_nn::module::Module;
/// use tessera_core::{DType, Generator, Tensor};
/// # fn main() -> tessera_core::Result<()> {
/// let (dev, mut g) = (Cpu::new(), Generator::new(0));
/// let mlp = Sequential::new()
///     .with(Linear::new(4, 16, true, DType::F32, &mut g, &dev)?)
///     .with(ReLU::new())
///     .with(Linear::new(16, 3, true, DType::F32, &mut g, &dev)?);
/// let names: Vec<String> = mlp.parameters().into_iter().map(|(name, _)| name).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// let x = Var::constant(Tensor::zeros([8, 4], DType::F32, &dev)?);
/// assert_eq!(mlp.forward(&x)?.dims(), &[8, 3]);
/// # Ok(()) }
/// ```
pub struct Sequential<B: Backend> {
    layers: Vec<Box<dyn Module<B>>>,
    mode: TrainingMode,
}

impl<B: Backend> Sequential<B> {
    /// An empty chain.
    pub fn new() -> Self {
        Sequential {
            layers: Vec::new(),
            mode: TrainingMode::new(),
        }
    }

    /// Appends `layer` (builder style). The layer takes the chain's current mode.
    pub fn with(mut self, layer: impl Module<B> + 'static) -> Self {
        self.push(layer);
        self
    }

    /// Appends `layer`, which takes the chain's current mode.
    pub fn push(&mut self, layer: impl Module<B> + 'static) {
        self.push_boxed(Box::new(layer));
    }

    /// Appends an already boxed `layer`, which takes the chain's current mode.
    pub fn push_boxed(&mut self, layer: Box<dyn Module<B>>) {
        layer.set_training(self.mode.get());
        self.layers.push(layer);
    }

    /// The number of children.
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// True when the chain has no children.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// Child `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&dyn Module<B>> {
        self.layers.get(index).map(|layer| layer.as_ref())
    }
}

impl<B: Backend> Default for Sequential<B> {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: Backend> Module<B> for Sequential<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let mut h = x.clone();
        for layer in &self.layers {
            h = layer.forward(&h)?;
        }
        Ok(h)
    }

    fn visit_parameters(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        for (i, layer) in self.layers.iter().enumerate() {
            layer.visit_parameters(&child_name(prefix, &i.to_string()), f);
        }
    }

    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        for (i, layer) in self.layers.iter().enumerate() {
            layer.visit_buffers(&child_name(prefix, &i.to_string()), f);
        }
    }

    fn set_training(&self, training: bool) {
        self.mode.set(training);
        for layer in &self.layers {
            layer.set_training(training);
        }
    }

    fn is_training(&self) -> bool {
        self.mode.get()
    }
}
