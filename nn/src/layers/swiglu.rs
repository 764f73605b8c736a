//! [`SwiGlu`]: the gated feed-forward block of Llama (`down(silu(gate(x)) · up(x))`).

use super::{Linear, LinearConfig, SiLU};
use crate::module::Forward;
use crate::precision::Precision;
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Generator, Result};

/// The hyper-parameters of a [`SwiGlu`] block.
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct SwiGluConfig {
    /// The model width (input and output).
    pub dim: usize,
    /// The hidden width (`intermediate_size`).
    pub hidden_dim: usize,
    /// Whether the three projections learn biases (Llama's `mlp_bias`, false by default).
    #[config(default = false)]
    pub bias: bool,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
    /// The dtype the projections compute in.
    #[config(default = Precision::F32)]
    pub precision: Precision,
}

impl SwiGluConfig {
    /// The block with PyTorch's default `Linear` initialisation.
    pub fn init<B: Backend>(&self, backend: &B, generator: &mut Generator) -> Result<SwiGlu<B>> {
        let linear = |i, o, g: &mut Generator| {
            LinearConfig::new(i, o)
                .bias(self.bias)
                .dtype(self.dtype)
                .precision(self.precision)
                .init(backend, g)
        };
        Ok(SwiGlu {
            gate_proj: linear(self.dim, self.hidden_dim, generator)?,
            up_proj: linear(self.dim, self.hidden_dim, generator)?,
            down_proj: linear(self.hidden_dim, self.dim, generator)?,
            act: SiLU::new(),
        })
    }
}

/// `down_proj(silu(gate_proj(x)) · up_proj(x))` on `[.., dim]` (`transformers`' `LlamaMLP`,
/// same parameter names: `gate_proj.weight`, `up_proj.weight`, `down_proj.weight`).
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::SwiGluConfig;
/// use tessera_nn::Module;
/// let (dev, mut g) = (tessera_cpu::Cpu::new(), tessera_core::Generator::new(0));
/// let mlp = SwiGluConfig::new(16, 44).init(&dev, &mut g)?;
/// let names: Vec<String> = mlp.parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["gate_proj.weight", "up_proj.weight", "down_proj.weight"]);
/// # Ok(()) }
/// ```
///
/// A clone shares the parameters (the same `Var`s).
#[derive(Module, Clone)]
pub struct SwiGlu<B: Backend> {
    /// The gate projection `dim → hidden_dim`.
    pub gate_proj: Linear<B>,
    /// The value projection `dim → hidden_dim`.
    pub up_proj: Linear<B>,
    /// The output projection `hidden_dim → dim`.
    pub down_proj: Linear<B>,
    /// The gate's activation.
    pub act: SiLU,
}

impl<B: Backend> Forward<B> for SwiGlu<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let gate = self.act.forward(&self.gate_proj.forward(x)?)?;
        self.down_proj
            .forward(&gate.mul(&self.up_proj.forward(x)?)?)
    }
}
