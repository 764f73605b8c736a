//! Parameter-free element-wise activations as modules: [`ReLU`], [`LeakyReLU`], [`GELU`] (exact
//! or tanh-approximated), [`SiLU`], [`Sigmoid`], [`Tanh`] and [`Softmax`].

use crate::module::{Forward, TrainingMode};
use crate::Module;
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result};

/// Implements `Forward` for a parameter-free activation whose forward is `$forward(self, x)`.
macro_rules! activation_module {
    ($name:ident, |$this:ident, $x:ident| $forward:expr) => {
        impl<B: Backend> Forward<B> for $name {
            fn forward(&self, $x: &Var<B>) -> Result<Var<B>> {
                let $this = self;
                $forward
            }
        }
    };
}

/// `max(x, 0)` (PyTorch's `nn.ReLU`).
#[derive(Module, Clone, Debug, Default)]
pub struct ReLU {
    mode: TrainingMode,
}

impl ReLU {
    /// The activation.
    pub fn new() -> Self {
        Self::default()
    }
}

activation_module!(ReLU, |_this, x| x.relu());

/// `x` where positive, `negative_slope · x` elsewhere (PyTorch's `nn.LeakyReLU`).
#[derive(Module, Clone, Debug)]
pub struct LeakyReLU {
    #[module(skip)]
    negative_slope: f64,
    mode: TrainingMode,
}

impl LeakyReLU {
    /// PyTorch's default slope, 0.01.
    pub const DEFAULT_SLOPE: f64 = 0.01;

    /// The activation with `negative_slope`, which must be finite.
    pub fn new(negative_slope: f64) -> Result<Self> {
        if !negative_slope.is_finite() {
            return Err(Error::InvalidArgument {
                op: "LeakyReLU",
                msg: format!("negative slope must be finite, got {negative_slope}"),
            });
        }
        Ok(LeakyReLU {
            negative_slope,
            mode: TrainingMode::new(),
        })
    }

    /// The slope applied to negative inputs.
    pub fn negative_slope(&self) -> f64 {
        self.negative_slope
    }
}

impl Default for LeakyReLU {
    fn default() -> Self {
        LeakyReLU {
            negative_slope: Self::DEFAULT_SLOPE,
            mode: TrainingMode::new(),
        }
    }
}

activation_module!(LeakyReLU, |this, x| x.leaky_relu(this.negative_slope));

/// How [`GELU`] computes `Φ(x)` (PyTorch's `approximate` argument).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GeluApproximation {
    /// The exact `0.5 · (1 + erf(x / √2))` (`approximate='none'`).
    #[default]
    None,
    /// `0.5 · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))` (`approximate='tanh'`; GPT-2's
    /// `gelu_new`).
    Tanh,
}

/// GELU, `x · Φ(x)`: exact by default (PyTorch's `nn.GELU()`), or with the tanh approximation
/// GPT-2 was trained with ([`GELU::tanh`], `nn.GELU(approximate='tanh')`).
#[derive(Module, Clone, Debug, Default)]
pub struct GELU {
    #[module(skip)]
    approximation: GeluApproximation,
    mode: TrainingMode,
}

impl GELU {
    /// The exact activation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The tanh approximation.
    pub fn tanh() -> Self {
        Self::with_approximation(GeluApproximation::Tanh)
    }

    /// The activation computed as `approximation` says.
    pub fn with_approximation(approximation: GeluApproximation) -> Self {
        GELU {
            approximation,
            mode: TrainingMode::new(),
        }
    }

    /// How `Φ` is computed.
    pub fn approximation(&self) -> GeluApproximation {
        self.approximation
    }
}

/// `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))`, composed of differentiable ops.
fn gelu_tanh<B: Backend>(x: &Var<B>) -> Result<Var<B>> {
    const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
    let inner = x
        .add(&x.square()?.mul(x)?.mul_scalar(0.044_715)?)?
        .mul_scalar(SQRT_2_OVER_PI)?;
    x.mul(&inner.tanh()?.add_scalar(1.0)?)?.mul_scalar(0.5)
}

activation_module!(GELU, |this, x| match this.approximation {
    GeluApproximation::None => x.gelu(),
    GeluApproximation::Tanh => gelu_tanh(x),
});

/// SiLU (swish), `x · sigmoid(x)` (PyTorch's `nn.SiLU`; the gate of Llama's SwiGLU MLP).
#[derive(Module, Clone, Debug, Default)]
pub struct SiLU {
    mode: TrainingMode,
}

impl SiLU {
    /// The activation.
    pub fn new() -> Self {
        Self::default()
    }
}

activation_module!(SiLU, |_this, x| x.mul(&x.sigmoid()?));

/// `1 / (1 + e^-x)` (PyTorch's `nn.Sigmoid`).
#[derive(Module, Clone, Debug, Default)]
pub struct Sigmoid {
    mode: TrainingMode,
}

impl Sigmoid {
    /// The activation.
    pub fn new() -> Self {
        Self::default()
    }
}

activation_module!(Sigmoid, |_this, x| x.sigmoid());

/// Hyperbolic tangent (PyTorch's `nn.Tanh`).
#[derive(Module, Clone, Debug, Default)]
pub struct Tanh {
    mode: TrainingMode,
}

impl Tanh {
    /// The activation.
    pub fn new() -> Self {
        Self::default()
    }
}

activation_module!(Tanh, |_this, x| x.tanh());

/// Softmax along one axis (PyTorch's `nn.Softmax(dim)`); negative axes count from the end.
#[derive(Module, Clone, Debug)]
pub struct Softmax {
    #[module(skip)]
    axis: isize,
    mode: TrainingMode,
}

impl Softmax {
    /// Softmax along `axis`.
    pub fn new(axis: isize) -> Self {
        Softmax {
            axis,
            mode: TrainingMode::new(),
        }
    }

    /// The axis normalised over.
    pub fn axis(&self) -> isize {
        self.axis
    }
}

activation_module!(Softmax, |this, x| x.softmax(this.axis));
