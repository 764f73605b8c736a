//! Modules: [`Module`] (what a model is made of), [`ToBackend`] (moving it to another backend)
//! and [`Forward`] (applying a one-input layer), with `#[derive(Module)]` writing the first two.
//!
//! # Deriving
//! A model is a struct of layers; `#[derive(Module)]` writes the plumbing:
//!
//! ```
//! use tessera_nn::layers::{Linear, LinearConfig, LayerNorm, LayerNormConfig};
//! use tessera_nn::{Forward, Module, ToBackend};
//! use tessera_autograd::Var;
//! use tessera_core::{Backend, Generator, Result};
//!
//! #[derive(Module)]
//! struct Mlp<B: Backend> {
//!     fc1: Linear<B>,
//!     norm: LayerNorm<B>,
//!     fc2: Linear<B>,
//!     #[module(skip)]
//!     hidden: usize,
//! }
//!
//! impl<B: Backend> Mlp<B> {
//!     fn new(backend: &B, g: &mut Generator) -> Result<Self> {
//!         Ok(Mlp {
//!             fc1: LinearConfig::new(4, 8).init(backend, g)?,
//!             norm: LayerNormConfig::new(vec![8]).init(backend)?,
//!             fc2: LinearConfig::new(8, 2).init(backend, g)?,
//!             hidden: 8,
//!         })
//!     }
//!
//!     fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
//!         self.fc2.forward(&self.norm.forward(&self.fc1.forward(x)?.relu()?)?)
//!     }
//! }
//!
//! # fn main() -> tessera_core::Result<()> {
//! let dev = tessera_cpu::Cpu::new();
//! let model = Mlp::new(&dev, &mut Generator::new(0))?;
//! let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["fc1.weight", "fc1.bias", "norm.weight", "norm.bias", "fc2.weight", "fc2.bias"]);
//! model.eval(); // every layer inside switches
//! assert!(!model.fc1.is_training());
//! let copy = model.to_backend(&tessera_cpu::Cpu::new())?; // any other backend type works too
//! assert_eq!(copy.hidden, 8);
//! # Ok(()) }
//! ```
//!
//! The fields of a derived struct are, by their type:
//! * a **sub-module** (any `Module`): its names are prefixed with the field name (`fc1.weight`);
//! * a **parameter**, `Var<B>`: named after the field (`weight`);
//! * a **buffer**, `#[module(buffer)] field: Var<B>` (or `Option<Var<B>>`): saved and moved with
//!   the model, never trained (running statistics);
//! * an `Option`, `Vec`, array or `Box` of modules: `Vec`/array elements are named `field.0`,
//!   `field.1`, ... (PyTorch's `ModuleList`), an `Option` adds nothing to the name;
//! * `#[module(skip)]`: not part of the module (hyper-parameters, caches); cloned when the model
//!   moves, so its type must be `Clone` and must not name the backend.
//!
//! A field of any other type is a compile error at that field. Tuples of modules are modules
//! too (elements named `0`, `1`, ...), which is how [`crate::layers::Sequential`] is built.
//!
//! # Naming
//! Names are PyTorch's `state_dict` keys for the same architecture, so a PyTorch checkpoint of the
//! same model loads with [`Module::load`].

mod containers;
pub(crate) mod persistence;
pub(crate) mod placeholder;
mod random_stream;
mod training_mode;

pub use persistence::LoadOptions;
pub use random_stream::RandomStream;
pub use training_mode::TrainingMode;

use crate::checkpoint::{LoadMode, LoadReport, NamedTensors};
use std::path::Path;
use tessera_autograd::Var;
use tessera_core::{Backend, Result};

/// Receives every parameter and buffer of a module with its full dotted name (see
/// [`Module::visit`]).
pub trait ModuleVisitor<B: Backend> {
    /// A trainable parameter.
    fn visit_parameter(&mut self, name: &str, parameter: &Var<B>);
    /// A non-trainable state tensor that belongs in a checkpoint (running statistics).
    fn visit_buffer(&mut self, name: &str, buffer: &Var<B>);
    /// A random stream the module draws from (dropout masks): not a tensor, but part of a
    /// run's state (see [`crate::run`]). Ignored unless a visitor asks for streams.
    fn visit_random_stream(&mut self, name: &str, stream: &RandomStream) {
        let _ = (name, stream);
    }
}

/// A layer or a model: named trainable parameters, named buffers, sub-modules and a
/// training/evaluation mode. Written by `#[derive(Module)]` (see the [module docs](self)).
///
/// Implementors hold their parameters as [`Var::param`]s and their buffers as
/// [`Var::constant`]s, so checkpoints read both with [`Var::value`] and restore both with
/// [`Var::set_value`]. Mode changes take `&self` (interior mutability) so that a model shared
/// with an optimizer can still be switched.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a Tessera module",
    label = "not a module, a `Var<B>` parameter or a container of those",
    note = "a hyper-parameter or cache field of a #[derive(Module)] struct needs #[module(skip)]"
)]
pub trait Module<B: Backend>: Send + Sync {
    /// Calls `visitor` with every parameter and buffer and its dotted name, in a stable order,
    /// each name starting with `prefix` (an empty prefix adds no leading dot).
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>);

    /// Switches training (`true`) or evaluation (`false`) mode, for this module and every
    /// module inside it.
    fn set_training(&self, training: bool);

    /// The mode of the first module inside this one that has one (layers do; a bare parameter
    /// does not), or `None`.
    fn training_mode(&self) -> Option<bool>;

    /// Whether the module is in training mode (the default after construction).
    fn is_training(&self) -> bool {
        self.training_mode().unwrap_or(true)
    }

    /// Shorthand for `set_training(true)`.
    fn train(&self) {
        self.set_training(true);
    }

    /// Shorthand for `set_training(false)`.
    fn eval(&self) {
        self.set_training(false);
    }

    /// Calls `f` for every trainable parameter, named like [`Module::visit`].
    fn visit_parameters(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        self.visit(prefix, &mut OnlyParameters(f));
    }

    /// Calls `f` for every buffer, named like [`Module::visit`].
    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        self.visit(prefix, &mut OnlyBuffers(f));
    }

    /// Calls `f` for every random stream (dropout masks), named like [`Module::visit`].
    fn visit_random_streams(&self, prefix: &str, f: &mut dyn FnMut(&str, &RandomStream)) {
        self.visit(prefix, &mut OnlyRandomStreams(f));
    }

    /// Every trainable parameter with its dotted name, in visiting order, each [`Var`] once:
    /// a parameter shared by two layers (weight tying) is listed under the first name it is
    /// visited with, like PyTorch's `named_parameters()`, so an optimizer updates it once.
    /// [`Module::state_dict`] lists it under every name.
    fn parameters(&self) -> Vec<(String, Var<B>)> {
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        self.visit_parameters("", &mut |name, var| {
            if seen.insert(var.id()) {
                out.push((name.to_string(), var.clone()))
            }
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

    /// The total number of trainable scalars (a shared parameter counted once).
    fn num_parameters(&self) -> usize {
        self.parameters().iter().map(|(_, var)| var.numel()).sum()
    }

    /// Clears the gradient of every parameter.
    fn zero_grad(&self) {
        self.visit_parameters("", &mut |_, var| var.zero_grad());
    }

    /// Every parameter and buffer by name: PyTorch's `state_dict()`.
    fn state_dict(&self) -> NamedTensors<B> {
        persistence::state_dict(self)
    }

    /// Sets parameters and buffers from `tensors` (moved to this module's backend by the
    /// caller). [`LoadMode::Strict`] fails naming every missing, unexpected and mis-shaped
    /// tensor and changes nothing; [`LoadMode::NonStrict`] loads what matches and reports the
    /// rest (a mis-shaped tensor is always an error, as in PyTorch).
    fn load_state_dict(&self, tensors: &NamedTensors<B>, mode: LoadMode) -> Result<LoadReport> {
        persistence::load_state_dict(self, tensors, mode)
    }

    /// Saves every parameter and buffer to a safetensors file at `path` (atomically; readable
    /// by PyTorch's `safetensors.torch.load_file`).
    fn save(&self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        persistence::save(self, path.as_ref())
    }

    /// Loads every parameter and buffer from the safetensors file `path`, strictly: a missing,
    /// extra or mis-shaped tensor is an error naming it, and then nothing is changed.
    fn load(&self, path: impl AsRef<Path>) -> Result<()>
    where
        Self: Sized,
    {
        persistence::load(self, path.as_ref(), LoadOptions::default()).map(|_| ())
    }

    /// [`Module::load`] with options (non-strict loading returns the report of what was
    /// missing or skipped).
    fn load_with(&self, path: impl AsRef<Path>, options: LoadOptions) -> Result<LoadReport>
    where
        Self: Sized,
    {
        persistence::load(self, path.as_ref(), options)
    }
}

/// Moving a whole module to another backend (written by `#[derive(Module)]`): `On<B2>` is the
/// same module type on `B2`.
///
/// Every parameter and buffer is copied to the target backend (through the host; see
/// [`tessera_core::Tensor::to_backend`]), keeping names, values, dtypes, whether it requires a
/// gradient, and the training mode. Gradients are not copied.
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be moved to another backend as a module",
    label = "not a module, a `Var<B>` parameter or a container of those",
    note = "a hyper-parameter or cache field of a #[derive(Module)] struct needs #[module(skip)]"
)]
pub trait ToBackend<B: Backend>: Module<B> {
    /// This module's type on backend `B2`.
    type On<B2: Backend>: ToBackend<B2>;

    /// A copy of this module on `backend`.
    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Self::On<B2>>;
}

/// A module applied to one input: the layers chained by [`crate::layers::Sequential`] and most
/// built-in layers.
pub trait Forward<B: Backend>: Module<B> {
    /// Applies the module to `x`.
    fn forward(&self, x: &Var<B>) -> Result<Var<B>>;
}

/// A field marked `#[module(buffer)]`: a `Var<B>` (or an `Option` of one) visited as a buffer.
pub trait BufferField<B: Backend> {
    /// Visits the buffer(s) under `name`.
    fn visit_buffers(&self, name: &str, visitor: &mut dyn ModuleVisitor<B>);
}

impl<B: Backend> BufferField<B> for Var<B> {
    fn visit_buffers(&self, name: &str, visitor: &mut dyn ModuleVisitor<B>) {
        visitor.visit_buffer(name, self);
    }
}

impl<B: Backend> BufferField<B> for Option<Var<B>> {
    fn visit_buffers(&self, name: &str, visitor: &mut dyn ModuleVisitor<B>) {
        if let Some(var) = self {
            visitor.visit_buffer(name, var);
        }
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

/// Forwards only parameters to a closure.
struct OnlyParameters<'a, B: Backend>(&'a mut dyn FnMut(&str, &Var<B>));

impl<B: Backend> ModuleVisitor<B> for OnlyParameters<'_, B> {
    fn visit_parameter(&mut self, name: &str, parameter: &Var<B>) {
        (self.0)(name, parameter)
    }
    fn visit_buffer(&mut self, _: &str, _: &Var<B>) {}
}

/// Forwards only random streams to a closure.
struct OnlyRandomStreams<'a>(&'a mut dyn FnMut(&str, &RandomStream));

impl<B: Backend> ModuleVisitor<B> for OnlyRandomStreams<'_> {
    fn visit_parameter(&mut self, _: &str, _: &Var<B>) {}
    fn visit_buffer(&mut self, _: &str, _: &Var<B>) {}
    fn visit_random_stream(&mut self, name: &str, stream: &RandomStream) {
        (self.0)(name, stream)
    }
}

/// Forwards only buffers to a closure.
struct OnlyBuffers<'a, B: Backend>(&'a mut dyn FnMut(&str, &Var<B>));

impl<B: Backend> ModuleVisitor<B> for OnlyBuffers<'_, B> {
    fn visit_parameter(&mut self, _: &str, _: &Var<B>) {}
    fn visit_buffer(&mut self, name: &str, buffer: &Var<B>) {
        (self.0)(name, buffer)
    }
}

/// The model's parameters and buffers, each under every name it is visited with (a tied
/// weight under each of its names).
pub(crate) fn model_vars<B: Backend, M: Module<B> + ?Sized>(model: &M) -> Vec<(String, Var<B>)> {
    let mut out = Vec::new();
    model.visit_parameters("", &mut |name, var| {
        out.push((name.to_string(), var.clone()))
    });
    model.visit_buffers("", &mut |name, var| {
        out.push((name.to_string(), var.clone()))
    });
    out
}
