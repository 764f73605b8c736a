//! Pooling layers: [`MaxPool2d`] and [`AvgPool2d`] over `[n, c, h, w]` inputs.

use crate::module::{Forward, TrainingMode};
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Pool2dParams, Result};

/// Errors unless the window and stride are non-empty.
fn check_window(op: &'static str, params: Pool2dParams) -> Result<Pool2dParams> {
    let zero = |(a, b): (usize, usize)| a == 0 || b == 0;
    if zero(params.kernel) || zero(params.stride) {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("kernel and stride must be positive, got {params:?}"),
        });
    }
    Ok(params)
}

/// The window of a pooling layer (PyTorch's `MaxPool2d` / `AvgPool2d` arguments: `stride`
/// defaults to the kernel size, padding to 0). Pairs are `(height, width)`.
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::Pool2dConfig;
/// let pool = Pool2dConfig::new((2, 2)).init_max()?;
/// assert_eq!(pool.params().stride, (2, 2));
/// # Ok(()) }
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pool2dConfig {
    /// The window size.
    pub kernel_size: (usize, usize),
    /// The step between windows; `None` is the kernel size.
    #[config(default = None)]
    pub stride: Option<(usize, usize)>,
    /// Implicit padding on each side (at most half the window).
    #[config(default = (0, 0))]
    pub padding: (usize, usize),
}

impl Pool2dConfig {
    /// Window, stride and padding as the ops take them.
    pub fn params(&self) -> Pool2dParams {
        Pool2dParams {
            kernel: self.kernel_size,
            stride: self.stride.unwrap_or(self.kernel_size),
            padding: self.padding,
        }
    }

    /// A max-pooling layer with this window.
    pub fn init_max(&self) -> Result<MaxPool2d> {
        MaxPool2d::new(self.params())
    }

    /// An average-pooling layer with this window.
    pub fn init_avg(&self) -> Result<AvgPool2d> {
        AvgPool2d::new(self.params())
    }
}

/// Max pooling (PyTorch's `nn.MaxPool2d`): each output is the maximum of its window; padding
/// counts as `-inf`. No parameters.
#[derive(Module, Debug)]
pub struct MaxPool2d {
    #[module(skip)]
    params: Pool2dParams,
    mode: TrainingMode,
}

impl MaxPool2d {
    /// Pooling with explicit window, stride and padding.
    pub fn new(params: Pool2dParams) -> Result<Self> {
        Ok(MaxPool2d {
            params: check_window("MaxPool2d", params)?,
            mode: TrainingMode::new(),
        })
    }

    /// A `k × k` window with stride `k` (PyTorch's `MaxPool2d(k)`).
    pub fn square(k: usize) -> Result<Self> {
        Self::new(Pool2dParams::square(k))
    }

    /// Window, stride and padding.
    pub fn params(&self) -> Pool2dParams {
        self.params
    }
}

impl<B: Backend> Forward<B> for MaxPool2d {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        x.max_pool2d(self.params)
    }
}

/// Average pooling (PyTorch's `nn.AvgPool2d` with `count_include_pad = True`): each output is
/// the mean of its window, padding counting as zeros. No parameters.
#[derive(Module, Debug)]
pub struct AvgPool2d {
    #[module(skip)]
    params: Pool2dParams,
    mode: TrainingMode,
}

impl AvgPool2d {
    /// Pooling with explicit window, stride and padding.
    pub fn new(params: Pool2dParams) -> Result<Self> {
        Ok(AvgPool2d {
            params: check_window("AvgPool2d", params)?,
            mode: TrainingMode::new(),
        })
    }

    /// A `k × k` window with stride `k` (PyTorch's `AvgPool2d(k)`).
    pub fn square(k: usize) -> Result<Self> {
        Self::new(Pool2dParams::square(k))
    }

    /// Window, stride and padding.
    pub fn params(&self) -> Pool2dParams {
        self.params
    }
}

impl<B: Backend> Forward<B> for AvgPool2d {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        x.avg_pool2d(self.params)
    }
}
