//! Parameter-free element-wise activations as modules: [`ReLU`], [`LeakyReLU`], [`GELU`],
//! [`Sigmoid`], [`Tanh`] and [`Softmax`].

use crate::module::{Module, TrainingMode};
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result};

/// Implements `Module` for a parameter-free activation whose forward is `$forward(self, x)`.
macro_rules! activation_module {
    ($name:ident, |$this:ident, $x:ident| $forward:expr) => {
        impl<B: Backend> Module<B> for $name {
            fn forward(&self, $x: &Var<B>) -> Result<Var<B>> {
                let $this = self;
                $forward
            }

            fn visit_parameters(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &Var<B>)) {}

            fn set_training(&self, training: bool) {
                self.mode.set(training);
            }

            fn is_training(&self) -> bool {
                self.mode.get()
            }
        }
    };
}

/// `max(x, 0)` (PyTorch's `nn.ReLU`).
#[derive(Debug, Default)]
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
#[derive(Debug)]
pub struct LeakyReLU {
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

/// Exact GELU, `0.5 · x · (1 + erf(x / √2))` (PyTorch's `nn.GELU()`).
#[derive(Debug, Default)]
pub struct GELU {
    mode: TrainingMode,
}

impl GELU {
    /// The activation.
    pub fn new() -> Self {
        Self::default()
    }
}

activation_module!(GELU, |_this, x| x.gelu());

/// `1 / (1 + e^-x)` (PyTorch's `nn.Sigmoid`).
#[derive(Debug, Default)]
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
#[derive(Debug, Default)]
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
#[derive(Debug)]
pub struct Softmax {
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
