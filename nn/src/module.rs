//! The [`Module`] trait: a differentiable function with named parameters, named buffers and a
//! training/evaluation mode, plus the small helpers layers share ([`TrainingMode`],
//! [`child_name`]).
//!
//! # Naming
//! Parameters and buffers get stable dotted names built from a prefix: a layer visited with
//! prefix `"fc1"` names its weight `"fc1.weight"`, a [`crate::layers::Sequential`] names its
//! children `"0"`, `"1"`, ... so its first layer's bias is `"0.bias"`. The names match
//! PyTorch's `state_dict` keys for the same architecture.

use std::sync::atomic::{AtomicBool, Ordering};
use tessera_autograd::Var;
use tessera_core::{Backend, Result};

/// A layer or a model: a function of one input with trainable parameters and non-trainable
/// buffers, which behaves differently in training and evaluation mode (dropout, batch norm).
///
/// Implementors hold their parameters as [`Var::param`]s and their buffers (e.g. batch-norm
/// running statistics) as [`Var::constant`]s, so a checkpoint can read both with
/// [`Var::value`] and restore both with [`Var::set_value`]. Mode changes take `&self`
/// (interior mutability) so a model shared with an optimizer can still be switched.
pub trait Module<B: Backend>: Send + Sync {
    /// Applies the module to `x`.
    fn forward(&self, x: &Var<B>) -> Result<Var<B>>;

    /// Calls `f` with the full dotted name and the variable of every trainable parameter, in a
    /// stable order, each name starting with `prefix` (an empty prefix adds no leading dot).
    fn visit_parameters(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>));

    /// Calls `f` for every non-trainable state tensor that belongs in a checkpoint (running
    /// statistics), named like [`Module::visit_parameters`]. Most layers have none.
    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        let _ = (prefix, f);
    }

    /// Switches training (`true`) or evaluation (`false`) mode, for this module and every
    /// module inside it.
    fn set_training(&self, training: bool);

    /// Whether the module is in training mode (the default after construction).
    fn is_training(&self) -> bool;

    /// Every trainable parameter with its dotted name, in visiting order.
    fn parameters(&self) -> Vec<(String, Var<B>)> {
        let mut out = Vec::new();
        self.visit_parameters("", &mut |name, var| {
            out.push((name.to_string(), var.clone()))
        });
        out
    }

    /// Every buffer with its dotted name, in visiting order.
    fn buffers(&self) -> Vec<(String, Var<B>)> {
        let mut out = Vec::new();
        self.visit_buffers("", &mut |name, var| {
            out.push((name.to_string(), var.clone()))
        });
        out
    }

    /// The total number of trainable scalars.
    fn num_parameters(&self) -> usize {
        let mut count = 0;
        self.visit_parameters("", &mut |_, var| count += var.numel());
        count
    }

    /// Clears the gradient of every parameter.
    fn zero_grad(&self) {
        self.visit_parameters("", &mut |_, var| var.zero_grad());
    }

    /// Shorthand for `set_training(true)`.
    fn train(&self) {
        self.set_training(true);
    }

    /// Shorthand for `set_training(false)`.
    fn eval(&self) {
        self.set_training(false);
    }
}

/// The dotted name of `name` inside `prefix`: `"fc1.weight"`, or just `"weight"` when the
/// prefix is empty.
pub fn child_name(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// A thread-safe training/evaluation flag for layers to embed; starts in training mode.
#[derive(Debug)]
pub struct TrainingMode(AtomicBool);

impl TrainingMode {
    /// A flag in training mode.
    pub fn new() -> Self {
        TrainingMode(AtomicBool::new(true))
    }

    /// Sets the mode (`true`: training).
    pub fn set(&self, training: bool) {
        self.0.store(training, Ordering::Relaxed);
    }

    /// Whether the flag says training.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

impl Default for TrainingMode {
    fn default() -> Self {
        Self::new()
    }
}

impl Clone for TrainingMode {
    fn clone(&self) -> Self {
        TrainingMode(AtomicBool::new(self.get()))
    }
}
