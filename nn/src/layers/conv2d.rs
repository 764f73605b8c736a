//! [`Conv2d`]: 2-D convolution over `[n, c, h, w]` inputs.

use crate::init;
use crate::module::{child_name, Module, TrainingMode};
use tessera_autograd::Var;
use tessera_core::{Backend, Conv2dParams, DType, Error, Generator, Result, Tensor};

/// The hyper-parameters of a [`Conv2d`]; [`Conv2dConfig::new`] gives PyTorch's defaults
/// (stride 1, no padding, no dilation, with bias).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conv2dConfig {
    /// Input channels `c`.
    pub in_channels: usize,
    /// Output channels `o`.
    pub out_channels: usize,
    /// Kernel `(kh, kw)`.
    pub kernel_size: (usize, usize),
    /// Stride, padding and dilation.
    pub params: Conv2dParams,
    /// Whether the layer adds a bias.
    pub bias: bool,
}

impl Conv2dConfig {
    /// `in_channels → out_channels` with a `kernel_size` kernel and PyTorch's defaults.
    pub fn new(in_channels: usize, out_channels: usize, kernel_size: (usize, usize)) -> Self {
        Conv2dConfig {
            in_channels,
            out_channels,
            kernel_size,
            params: Conv2dParams::default(),
            bias: true,
        }
    }

    /// The same configuration with another stride.
    pub fn stride(mut self, stride: (usize, usize)) -> Self {
        self.params.stride = stride;
        self
    }

    /// The same configuration with another zero padding.
    pub fn padding(mut self, padding: (usize, usize)) -> Self {
        self.params.padding = padding;
        self
    }

    /// The same configuration with another dilation.
    pub fn dilation(mut self, dilation: (usize, usize)) -> Self {
        self.params.dilation = dilation;
        self
    }

    /// The same configuration with or without a bias.
    pub fn bias(mut self, bias: bool) -> Self {
        self.bias = bias;
        self
    }
}

/// A 2-D convolution (PyTorch's `nn.Conv2d`, `groups = 1`): input `[n, c, h, w]`, weight
/// `[o, c, kh, kw]`, bias `[o]`, output `[n, o, oh, ow]`.
///
/// Default initialisation (PyTorch's): `W, b ~ U(-1/√fan_in, 1/√fan_in)` with
/// `fan_in = c · kh · kw`. Parameters: `weight`, `bias`.
pub struct Conv2d<B: Backend> {
    weight: Var<B>,
    bias: Option<Var<B>>,
    params: Conv2dParams,
    mode: TrainingMode,
}

impl<B: Backend> Conv2d<B> {
    /// A layer for `config` with PyTorch's default initialisation drawn from `generator`.
    pub fn new(
        config: Conv2dConfig,
        dtype: DType,
        generator: &mut Generator,
        backend: &B,
    ) -> Result<Self> {
        let (kh, kw) = config.kernel_size;
        let weight_dims = [config.out_channels, config.in_channels, kh, kw];
        let weight = init::default_weight(weight_dims, dtype, generator, backend)?;
        let bias = if config.bias {
            // The weight exists, so this product is within the size limits.
            let fan_in = config.in_channels.saturating_mul(kh).saturating_mul(kw);
            Some(init::default_bias(
                config.out_channels,
                fan_in,
                dtype,
                generator,
                backend,
            )?)
        } else {
            None
        };
        Self::from_tensors(weight, bias, config.params)
    }

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
        })
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

impl<B: Backend> Module<B> for Conv2d<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        x.conv2d(&self.weight, self.bias.as_ref(), self.params)
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
