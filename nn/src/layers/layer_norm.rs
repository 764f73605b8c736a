//! [`LayerNorm`]: normalisation over the trailing dimensions of each sample.

use crate::module::{Forward, TrainingMode};
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result, Shape, Tensor};

/// Normalises over the last `normalized_shape.rank()` dimensions (PyTorch's `nn.LayerNorm`):
/// `y = (x - mean) / √(var + eps) · weight + bias`, with the biased variance. Same behaviour in
/// training and evaluation.
///
/// Defaults: `eps = 1e-5`, affine with `weight = 1`, `bias = 0` of shape `normalized_shape`.
/// Parameters: `weight`, `bias`.
///
/// A clone shares the parameters (the same `Var`s); its random streams and training mode
/// are copies that continue from the same point.
#[derive(Module, Clone)]
pub struct LayerNorm<B: Backend> {
    #[module(skip)]
    normalized_shape: Shape,
    #[module(skip)]
    eps: f64,
    weight: Option<Var<B>>,
    bias: Option<Var<B>>,
    mode: TrainingMode,
}

/// The hyper-parameters of a [`LayerNorm`] (PyTorch's `nn.LayerNorm` arguments and
/// defaults: `eps = 1e-5`, `elementwise_affine = true`, `bias = true`).
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::LayerNormConfig;
/// let norm = LayerNormConfig::new(vec![64]).bias(false).init(&tessera_cpu::Cpu::new())?;
/// assert!(norm.weight().is_some() && norm.bias().is_none());
/// # Ok(()) }
/// ```
#[derive(Config, Clone, Debug, PartialEq)]
pub struct LayerNormConfig {
    /// The trailing dimensions normalised over.
    pub normalized_shape: Vec<usize>,
    /// Added to the variance before the square root.
    #[config(default = 1e-5)]
    pub eps: f64,
    /// Whether the layer learns a per-element scale (`weight`, initialised to 1) and, with
    /// `bias`, a shift (initialised to 0).
    #[config(default = true)]
    pub elementwise_affine: bool,
    /// Whether an affine layer also learns the shift `bias`.
    #[config(default = true)]
    pub bias: bool,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
}

impl LayerNormConfig {
    /// The layer on `backend`.
    pub fn init<B: Backend>(&self, backend: &B) -> Result<LayerNorm<B>> {
        let normalized_shape = Shape::new(self.normalized_shape.clone());
        if normalized_shape.rank() == 0 || normalized_shape.numel() == 0 {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: format!("normalized shape must be non-empty, got {normalized_shape}"),
            });
        }
        let eps = self.eps;
        if !(eps.is_finite() && eps > 0.0) {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: format!("eps must be positive, got {eps}"),
            });
        }
        let (dtype, affine) = (self.dtype, self.elementwise_affine);
        let weight = affine
            .then(|| Tensor::ones(&normalized_shape, dtype, backend).map(Var::param))
            .transpose()?;
        let bias = (affine && self.bias)
            .then(|| Tensor::zeros(&normalized_shape, dtype, backend).map(Var::param))
            .transpose()?;
        Ok(LayerNorm {
            normalized_shape,
            eps,
            weight,
            bias,
            mode: TrainingMode::new(),
        })
    }
}

impl<B: Backend> LayerNorm<B> {
    /// The scale, if affine.
    pub fn weight(&self) -> Option<&Var<B>> {
        self.weight.as_ref()
    }

    /// The shift, if affine.
    pub fn bias(&self) -> Option<&Var<B>> {
        self.bias.as_ref()
    }
}

impl<B: Backend> Forward<B> for LayerNorm<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let dims = x.dims().to_vec();
        let k = self.normalized_shape.rank();
        if dims.len() < k || dims[dims.len() - k..] != *self.normalized_shape.dims() {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: format!(
                    "input of shape {} does not end in the normalized shape {}",
                    Shape::new(dims),
                    self.normalized_shape
                ),
            });
        }
        // The trailing `k` dimensions as one axis of `n` values: one fused op over rows.
        let n = self.normalized_shape.numel();
        let rows = dims[..dims.len() - k].to_vec();
        let flat = |v: &Var<B>, shape: Vec<usize>| -> Result<Var<B>> {
            if k == 1 {
                Ok(v.clone())
            } else {
                v.reshape(shape)
            }
        };
        let x_rows = flat(x, [rows.as_slice(), &[n]].concat())?;
        let weight = self.weight.as_ref().map(|w| flat(w, vec![n])).transpose()?;
        let bias = self.bias.as_ref().map(|b| flat(b, vec![n])).transpose()?;
        let y = x_rows.layer_norm(weight.as_ref(), bias.as_ref(), self.eps)?;
        flat(&y, dims)
    }
}
