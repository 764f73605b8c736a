//! [`Flatten`]: merges a range of axes into one.

use crate::module::{Module, TrainingMode};
use tessera_autograd::Var;
use tessera_core::{Backend, Result};

/// Merges axes `start..=end` into one (PyTorch's `nn.Flatten`, default `start = 1`,
/// `end = -1`: `[n, c, h, w] → [n, c·h·w]`). No parameters.
#[derive(Debug)]
pub struct Flatten {
    start: isize,
    end: isize,
    mode: TrainingMode,
}

impl Flatten {
    /// PyTorch's default: every axis but the first (the batch).
    pub fn new() -> Self {
        Self::with_axes(1, -1)
    }

    /// Merges axes `start..=end` (negative axes count from the end).
    pub fn with_axes(start: isize, end: isize) -> Self {
        Flatten {
            start,
            end,
            mode: TrainingMode::new(),
        }
    }
}

impl Default for Flatten {
    fn default() -> Self {
        Self::new()
    }
}

impl<B: Backend> Module<B> for Flatten {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        x.flatten(self.start, self.end)
    }

    fn visit_parameters(&self, _prefix: &str, _f: &mut dyn FnMut(&str, &Var<B>)) {}

    fn set_training(&self, training: bool) {
        self.mode.set(training);
    }

    fn is_training(&self) -> bool {
        self.mode.get()
    }
}
