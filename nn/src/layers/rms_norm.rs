//! [`RmsNorm`]: root-mean-square normalisation over the last dimension (Llama's `LlamaRMSNorm`).

use crate::module::{Forward, TrainingMode};
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// The hyper-parameters of an [`RmsNorm`] (PyTorch's `nn.RMSNorm(dim, eps)` with a learned
/// scale; Llama's `rms_norm_eps` is the `eps`).
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::RmsNormConfig;
/// let norm = RmsNormConfig::new(64).eps(1e-6).init(&tessera_cpu::Cpu::new())?;
/// assert_eq!(norm.weight().dims(), &[64]);
/// # Ok(()) }
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct RmsNormConfig {
    /// The size of the last dimension, normalised over.
    pub dim: usize,
    /// Added to the mean square before the square root.
    #[config(default = 1e-6)]
    pub eps: f64,
    /// The dtype of the scale.
    #[config(default = DType::F32)]
    pub dtype: DType,
}

impl RmsNormConfig {
    /// The layer on `backend`, its scale initialised to one.
    pub fn init<B: Backend>(&self, backend: &B) -> Result<RmsNorm<B>> {
        RmsNorm::from_tensor(Tensor::ones([self.dim], self.dtype, backend)?, self.eps)
    }
}

/// `y = x / √(mean(x², last axis) + eps) · weight` over the last dimension, computed in f32 (or
/// f64 for f64 inputs) and cast back to the input's dtype before the scale, as `transformers`'
/// `LlamaRMSNorm` does. Parameter: `weight` `[dim]`.
///
/// A clone shares the parameter (the same `Var`).
#[derive(Module, Clone)]
pub struct RmsNorm<B: Backend> {
    weight: Var<B>,
    #[module(skip)]
    eps: f64,
    mode: TrainingMode,
}

impl<B: Backend> RmsNorm<B> {
    /// The layer with the scale `weight: [dim]` (e.g. loaded from a checkpoint).
    pub fn from_tensor(weight: Tensor<B>, eps: f64) -> Result<Self> {
        if weight.rank() != 1 || weight.numel() == 0 || !weight.dtype().is_float() {
            return Err(Error::InvalidArgument {
                op: "RmsNorm",
                msg: format!(
                    "the scale must be a non-empty float vector, got a {} tensor of shape {}",
                    weight.dtype(),
                    weight.shape()
                ),
            });
        }
        if !(eps.is_finite() && eps > 0.0) {
            return Err(Error::InvalidArgument {
                op: "RmsNorm",
                msg: format!("eps must be positive, got {eps}"),
            });
        }
        Ok(RmsNorm {
            weight: Var::param(weight),
            eps,
            mode: TrainingMode::new(),
        })
    }

    /// The scale `[dim]`.
    pub fn weight(&self) -> &Var<B> {
        &self.weight
    }

    /// The `eps` added to the mean square.
    pub fn eps(&self) -> f64 {
        self.eps
    }
}

impl<B: Backend> Forward<B> for RmsNorm<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let dim = self.weight.dims()[0];
        if x.rank() == 0 || x.dims()[x.rank() - 1] != dim {
            return Err(Error::InvalidArgument {
                op: "RmsNorm",
                msg: format!("input of shape {} does not end in {dim}", x.shape()),
            });
        }
        let input = x.dtype();
        let wide = match input {
            DType::F64 => DType::F64,
            _ => DType::F32,
        };
        let xw = if input == wide {
            x.clone()
        } else {
            x.to_dtype(wide)?
        };
        let inv_rms = xw
            .square()?
            .mean(&[-1], true)?
            .add_scalar(self.eps)?
            .rsqrt()?;
        let mut y = xw.mul(&inv_rms)?;
        if y.dtype() != input {
            y = y.to_dtype(input)?;
        }
        let weight = if self.weight.dtype() == input {
            self.weight.clone()
        } else {
            self.weight.to_dtype(input)?
        };
        y.mul(&weight)
    }
}
