//! [`Conv2d`]: 2-D convolution over `[n, c, h, w]` inputs.

use crate::init;
use crate::module::{Forward, TrainingMode};
use crate::precision::Precision;
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, Conv2dParams, DType, Error, Generator, Result, Tensor};

/// The hyper-parameters of a [`Conv2d`] (PyTorch's `nn.Conv2d` arguments and defaults:
/// stride 1, no padding, no dilation, with bias; `groups = 1`). Pairs are `(height, width)`.
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::Conv2dConfig;
/// let (dev, mut g) = (tessera_cpu::Cpu::new(), tessera_core::Generator::new(0));
/// let conv = Conv2dConfig::new(1, 32, (3, 3)).padding((1, 1)).init(&dev, &mut g)?;
/// assert_eq!(conv.weight().dims(), &[32, 1, 3, 3]);
/// # Ok(()) }
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dConfig {
    /// Input channels `c`.
    pub in_channels: usize,
    /// Output channels `o`.
    pub out_channels: usize,
    /// Kernel `(kh, kw)`.
    pub kernel_size: (usize, usize),
    /// Step between output positions.
    #[config(default = (1, 1))]
    pub stride: (usize, usize),
    /// Zero padding added on each side.
    #[config(default = (0, 0))]
    pub padding: (usize, usize),
    /// Spacing between kernel taps.
    #[config(default = (1, 1))]
    pub dilation: (usize, usize),
    /// Whether the layer adds a learned bias.
    #[config(default = true)]
    pub bias: bool,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
    /// The dtype the convolution is computed in ([`Precision`]); the parameters keep `dtype`.
    #[config(default = Precision::F32)]
    pub precision: Precision,
}

impl Conv2dConfig {
    /// Stride, padding and dilation as the op takes them.
    pub fn params(&self) -> Conv2dParams {
        Conv2dParams {
            stride: self.stride,
            padding: self.padding,
            dilation: self.dilation,
        }
    }

    /// A layer with PyTorch's default initialisation, `W, b ~ U(-1/√fan_in, 1/√fan_in)` with
    /// `fan_in = c · kh · kw`, drawn from `generator`.
    pub fn init<B: Backend>(&self, backend: &B, generator: &mut Generator) -> Result<Conv2d<B>> {
        let (kh, kw) = self.kernel_size;
        let weight_dims = [self.out_channels, self.in_channels, kh, kw];
        let weight = init::default_weight(weight_dims, self.dtype, generator, backend)?;
        let bias = if self.bias {
            let fan_in = init::fan_in_and_fan_out(&weight_dims)?.0;
            Some(init::default_bias(
                self.out_channels,
                fan_in,
                self.dtype,
                generator,
                backend,
            )?)
        } else {
            None
        };
        Ok(Conv2d::from_tensors(weight, bias, self.params())?.with_precision(self.precision))
    }
}

/// A 2-D convolution (PyTorch's `nn.Conv2d`, `groups = 1`): input `[n, c, h, w]`, weight
/// `[o, c, kh, kw]`, bias `[o]`, output `[n, o, oh, ow]`.
///
/// Default initialisation (PyTorch's): `W, b ~ U(-1/√fan_in, 1/√fan_in)` with
/// `fan_in = c · kh · kw`. Parameters: `weight`, `bias`.
///
/// A clone shares the parameters (the same `Var`s); its training mode is a copy.
#[derive(Module, Clone)]
pub struct Conv2d<B: Backend> {
    weight: Var<B>,
    bias: Option<Var<B>>,
    #[module(skip)]
    params: Conv2dParams,
    mode: TrainingMode,
    #[module(skip)]
    precision: Precision,
}

impl<B: Backend> Conv2d<B> {
    /// A layer with the given `weight: [o, c, kh, kw]`, optional `bias: [o]` and parameters.
    pub fn from_tensors(
        weight: Tensor<B>,
        bias: Option<Tensor<B>>,
        params: Conv2dParams,
    ) -> Result<Self> {
        if weight.rank() != 4 {
            return Err(Error::InvalidArgument {
                op: "Conv2d",
                msg: format!(
                    "weight must be [o, c, kh, kw], got shape {}",
                    weight.shape()
                ),
            });
        }
        if let Some(b) = &bias {
            if b.dims() != [weight.dims()[0]] || b.dtype() != weight.dtype() {
                return Err(Error::InvalidArgument {
                    op: "Conv2d",
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
        let zero = |(a, b): (usize, usize)| a == 0 || b == 0;
        if zero(params.stride) || zero(params.dilation) {
            return Err(Error::InvalidArgument {
                op: "Conv2d",
                msg: format!("stride and dilation must be positive, got {params:?}"),
            });
        }
        Ok(Conv2d {
            weight: Var::param(weight),
            bias: bias.map(Var::param),
            params,
            mode: TrainingMode::new(),
            precision: Precision::F32,
        })
    }

    /// The same layer computing under `precision`: for a 16-bit policy, the input, weight and
    /// bias are cast (differentiably) to the compute dtype, convolved there, and the output is
    /// cast back to the input's dtype. The parameters themselves are not converted.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self
    }

    /// The policy the layer computes under.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The weight `[o, c, kh, kw]`.
    pub fn weight(&self) -> &Var<B> {
        &self.weight
    }

    /// The bias `[o]`, if the layer has one.
    pub fn bias(&self) -> Option<&Var<B>> {
        self.bias.as_ref()
    }

    /// Stride, padding and dilation.
    pub fn params(&self) -> Conv2dParams {
        self.params
    }
}

impl<B: Backend> Forward<B> for Conv2d<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let p = self.precision;
        let bias = self.bias.as_ref().map(|b| p.to_compute(b)).transpose()?;
        let y =
            p.to_compute(x)?
                .conv2d(&p.to_compute(&self.weight)?, bias.as_ref(), self.params)?;
        p.from_compute(y, x.dtype())
    }
}
