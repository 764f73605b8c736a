//! [`Linear`]: `y = x · Wᵀ + b`.

use crate::init;
use crate::module::{child_name, Module, TrainingMode};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};

/// A fully connected layer: `y = x · Wᵀ + b` with `W: [out_features, in_features]` and
/// `b: [out_features]` (PyTorch's `nn.Linear`). The input is `[.., in_features]` (any number of
/// leading dimensions, or none); the output replaces the last dimension by `out_features`.
///
/// Default initialisation (PyTorch's): `W, b ~ U(-1/√in_features, 1/√in_features)`.
/// Parameters: `weight`, `bias`.
pub struct Linear<B: Backend> {
    weight: Var<B>,
    bias: Option<Var<B>>,
    mode: TrainingMode,
}

impl<B: Backend> Linear<B> {
    /// A layer with PyTorch's default initialisation drawn from `generator`; `bias` chooses
    /// whether it has a bias.
    pub fn new(
        in_features: usize,
        out_features: usize,
        bias: bool,
        dtype: DType,
        generator: &mut Generator,
        backend: &B,
    ) -> Result<Self> {
        let weight = init::default_weight([out_features, in_features], dtype, generator, backend)?;
        let bias = if bias {
            Some(init::default_bias(
                out_features,
                in_features,
                dtype,
                generator,
                backend,
            )?)
        } else {
            None
        };
        Self::from_tensors(weight, bias)
    }

    /// A layer with the given `weight: [out, in]` and optional `bias: [out]`.
    pub fn from_tensors(weight: Tensor<B>, bias: Option<Tensor<B>>) -> Result<Self> {
        if weight.rank() != 2 {
            return Err(Error::InvalidArgument {
                op: "Linear",
                msg: format!("weight must be [out, in], got shape {}", weight.shape()),
            });
        }
        if let Some(b) = &bias {
            if b.dims() != [weight.dims()[0]] || b.dtype() != weight.dtype() {
                return Err(Error::InvalidArgument {
                    op: "Linear",
                    msg: format!(
                        "bias must be a {} vector of length {}, got a {} tensor of shape {}",
                        weight.dtype(),
                        weight.dims()[0],
                        b.dtype(),
                        b.shape()
                    ),
                });
            }
        }
        Ok(Linear {
            weight: Var::param(weight),
            bias: bias.map(Var::param),
            mode: TrainingMode::new(),
        })
    }

    /// The weight `[out_features, in_features]`.
    pub fn weight(&self) -> &Var<B> {
        &self.weight
    }

    /// The bias `[out_features]`, if the layer has one.
    pub fn bias(&self) -> Option<&Var<B>> {
        self.bias.as_ref()
    }

    /// Number of input features.
    pub fn in_features(&self) -> usize {
        self.weight.dims()[1]
    }

    /// Number of output features.
    pub fn out_features(&self) -> usize {
        self.weight.dims()[0]
    }
}

impl<B: Backend> Module<B> for Linear<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let (in_f, out_f) = (self.in_features(), self.out_features());
        let dims = x.dims().to_vec();
        if dims.last() != Some(&in_f) {
            return Err(Error::InvalidArgument {
                op: "Linear",
                msg: format!(
                    "input of shape {:?} does not end in {in_f} features",
                    dims.as_slice()
                ),
            });
        }
        // Matrix products stay rank 2: leading dimensions are folded into the rows.
        let rows = x.reshape([dims[..dims.len() - 1].iter().product::<usize>(), in_f])?;
        let mut y = rows.matmul(&self.weight.t()?)?;
        if let Some(b) = &self.bias {
            y = y.add(b)?;
        }
        let mut out_dims = dims;
        *out_dims.last_mut().expect("checked non-empty above") = out_f;
        y.reshape(out_dims)
    }

    fn visit_parameters(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        f(&child_name(prefix, "weight"), &self.weight);
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
