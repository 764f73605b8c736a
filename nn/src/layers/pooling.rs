//! Pooling layers: [`MaxPool2d`] and [`AvgPool2d`] over `[n, c, h, w]` inputs.

use crate::module::{Module, TrainingMode};
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

/// Max pooling (PyTorch's `nn.MaxPool2d`): each output is the maximum of its window; padding
/// counts as `-inf`. No parameters.
pub struct MaxPool2d {
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

impl<B: Backend> Module<B> for MaxPool2d {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        x.max_pool2d(self.params)
    }

    fn visit_parameters(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &Var<B>)) {}

    fn set_training(&self, training: bool) {
        self.mode.set(training);
    }

    fn is_training(&self) -> bool {
        self.mode.get()
    }
}

/// Average pooling (PyTorch's `nn.AvgPool2d` with `count_include_pad = True`): each output is
/// the mean of its window, padding counting as zeros. No parameters.
pub struct AvgPool2d {
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

impl<B: Backend> Module<B> for AvgPool2d {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        x.avg_pool2d(self.params)
    }

    fn visit_parameters(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &Var<B>)) {}

    fn set_training(&self, training: bool) {
        self.mode.set(training);
    }

    fn is_training(&self) -> bool {
        self.mode.get()
    }
}
