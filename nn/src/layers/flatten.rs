//! [`Flatten`]: merges a range of axes into one.

use crate::module::{Forward, TrainingMode};
use crate::Module;
use tessera_autograd::Var;
use tessera_core::{Backend, Result};

/// Merges axes `start..=end` into one (PyTorch's `nn.Flatten`, default `start = 1`,
/// `end = -1`: `[n, c, h, w] → [n, c·h·w]`). No parameters.
#[derive(Module, Debug)]
pub struct Flatten {
    #[module(skip)]
    start: isize,
    #[module(skip)]
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

impl<B: Backend> Forward<B> for Flatten {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        x.flatten(self.start, self.end)
    }
}
