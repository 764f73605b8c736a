//! [`Linear`]: `y = x · Wᵀ + b`, and its [`LinearConfig`].

use crate::init;
use crate::module::{Forward, TrainingMode};
use crate::precision::Precision;
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};

/// The hyper-parameters of a [`Linear`] layer (PyTorch's `nn.Linear` arguments and defaults).
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::LinearConfig;
/// let (dev, mut g) = (tessera_cpu::Cpu::new(), tessera_core::Generator::new(0));
/// let fc = LinearConfig::new(784, 512).bias(false).init(&dev, &mut g)?;
/// assert_eq!((fc.in_features(), fc.out_features()), (784, 512));
/// assert!(fc.bias().is_none());
/// # Ok(()) }
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinearConfig {
    /// Size of each input sample.
    pub in_features: usize,
    /// Size of each output sample.
    pub out_features: usize,
    /// Whether the layer learns an additive bias.
    #[config(default = true)]
    pub bias: bool,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
    /// The dtype the product is computed in ([`Precision`]); the parameters keep `dtype`.
    #[config(default = Precision::F32)]
    pub precision: Precision,
}

impl LinearConfig {
    /// A layer with PyTorch's default initialisation, `W, b ~ U(-1/√in_features,
    /// 1/√in_features)`, drawn from `generator`.
    pub fn init<B: Backend>(&self, backend: &B, generator: &mut Generator) -> Result<Linear<B>> {
        let (i, o) = (self.in_features, self.out_features);
        let weight = init::default_weight([o, i], self.dtype, generator, backend)?;
        let bias = if self.bias {
            Some(init::default_bias(o, i, self.dtype, generator, backend)?)
        } else {
            None
        };
        Ok(Linear::from_tensors(weight, bias)?.with_precision(self.precision))
    }
}

/// A fully connected layer: `y = x · Wᵀ + b` with `W: [out_features, in_features]` and
/// `b: [out_features]` (PyTorch's `nn.Linear`). The input is `[.., in_features]` (any number of
/// leading dimensions, or none); the output replaces the last dimension by `out_features`.
///
/// Default initialisation (PyTorch's): `W, b ~ U(-1/√in_features, 1/√in_features)`.
/// Parameters: `weight`, `bias`.
///
/// A clone shares the parameters (the same `Var`s); its random streams and training mode
/// are copies that continue from the same point.
#[derive(Module, Clone)]
pub struct Linear<B: Backend> {
    weight: Var<B>,
    bias: Option<Var<B>>,
    mode: TrainingMode,
    #[module(skip)]
    precision: Precision,
}

impl<B: Backend> Linear<B> {
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
            precision: Precision::F32,
        })
    }

    /// A layer over existing parameters, which it shares with whoever else holds them (weight
    /// tying: a model's output head reusing its token embedding). Checked like
    /// [`Linear::from_tensors`].
    pub fn from_vars(weight: Var<B>, bias: Option<Var<B>>) -> Result<Self> {
        let mut layer = Self::from_tensors(weight.value(), bias.as_ref().map(Var::value))?;
        layer.weight = weight;
        layer.bias = bias;
        Ok(layer)
    }

    /// The same layer computing under `precision`: for a 16-bit policy, the input, weight and
    /// bias are cast (differentiably) to the compute dtype, multiplied there, and the output
    /// is cast back to the input's dtype. The parameters themselves are not converted.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The policy the layer computes under.
    pub fn precision(&self) -> Precision {
        self.precision
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

impl<B: Backend> Forward<B> for Linear<B> {
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
        // Under a 16-bit policy every operand is cast to the compute dtype (a no-op when it is
        // already of it) and the result back to the input's dtype.
        let p = self.precision;
        let (rows, weight_t) = (p.to_compute(&rows)?, p.to_compute(&self.weight)?.t()?);
        let y = match &self.bias {
            // One op: a backend may add the bias inside its product.
            Some(b) => rows.matmul_bias(&weight_t, &p.to_compute(b)?)?,
            None => rows.matmul(&weight_t)?,
        };
        let y = p.from_compute(y, x.dtype())?;
        let mut out_dims = dims;
        *out_dims.last_mut().expect("checked non-empty above") = out_f;
        y.reshape(out_dims)
    }
}
