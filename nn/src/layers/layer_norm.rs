//! [`LayerNorm`]: normalisation over the trailing dimensions of each sample.

use crate::module::{child_name, Module, TrainingMode};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result, Shape, Tensor};

/// Normalises over the last `normalized_shape.rank()` dimensions (PyTorch's `nn.LayerNorm`):
/// `y = (x - mean) / √(var + eps) · weight + bias`, with the biased variance. Same behaviour in
/// training and evaluation.
///
/// Defaults: `eps = 1e-5`, affine with `weight = 1`, `bias = 0` of shape `normalized_shape`.
/// Parameters: `weight`, `bias`.
pub struct LayerNorm<B: Backend> {
    normalized_shape: Shape,
    eps: f64,
    weight: Option<Var<B>>,
    bias: Option<Var<B>>,
    mode: TrainingMode,
}

impl<B: Backend> LayerNorm<B> {
    /// PyTorch's default epsilon.
    pub const DEFAULT_EPS: f64 = 1e-5;

    /// Layer norm over trailing dimensions `normalized_shape`, `eps = 1e-5`, affine.
    pub fn new(normalized_shape: impl Into<Shape>, dtype: DType, backend: &B) -> Result<Self> {
        Self::with_options(normalized_shape, Self::DEFAULT_EPS, true, dtype, backend)
    }

    /// Layer norm with an explicit `eps` (> 0) and with or without the affine parameters.
    pub fn with_options(
        normalized_shape: impl Into<Shape>,
        eps: f64,
        elementwise_affine: bool,
        dtype: DType,
        backend: &B,
    ) -> Result<Self> {
        let normalized_shape = normalized_shape.into();
        if normalized_shape.rank() == 0 || normalized_shape.numel() == 0 {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: format!("normalized shape must be non-empty, got {normalized_shape}"),
            });
        }
        if !(eps.is_finite() && eps > 0.0) {
            return Err(Error::InvalidArgument {
                op: "LayerNorm",
                msg: format!("eps must be positive, got {eps}"),
            });
        }
        let (weight, bias) = if elementwise_affine {
            (
                Some(Var::param(Tensor::ones(&normalized_shape, dtype, backend)?)),
                Some(Var::param(Tensor::zeros(
                    &normalized_shape,
                    dtype,
                    backend,
                )?)),
            )
        } else {
            (None, None)
        };
        Ok(LayerNorm {
            normalized_shape,
            eps,
            weight,
            bias,
            mode: TrainingMode::new(),
        })
    }

    /// The scale, if affine.
    pub fn weight(&self) -> Option<&Var<B>> {
        self.weight.as_ref()
    }

    /// The shift, if affine.
    pub fn bias(&self) -> Option<&Var<B>> {
        self.bias.as_ref()
    }
}

impl<B: Backend> Module<B> for LayerNorm<B> {
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
        let axes: Vec<isize> = (1..=k as isize).map(|i| -i).collect();
        let mean = x.mean(&axes, true)?;
        let var = x.var(&axes, 0, true)?;
        let mut y = x.sub(&mean)?.mul(&var.add_scalar(self.eps)?.rsqrt()?)?;
        if let Some(w) = &self.weight {
            y = y.mul(w)?;
        }
        if let Some(b) = &self.bias {
            y = y.add(b)?;
        }
        Ok(y)
    }

    fn visit_parameters(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        if let Some(w) = &self.weight {
            f(&child_name(prefix, "weight"), w);
        }
        if let Some(b) = &self.bias {
            f(&child_name(prefix, "bias"), b);
        }
    }

    fn set_training(&self, training: bool) {
        self.mode.set(training);
    }

    fn is_training(&self) -> bool {
        self.mode.get()
    }
}
