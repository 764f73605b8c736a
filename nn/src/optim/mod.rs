//! Optimizers with PyTorch's exact update rules: [`Sgd`] (momentum, dampening, Nesterov,
//! weight decay), [`Adam`] and [`AdamW`] (bias-corrected, optional AMSGrad).
//!
//! An optimizer owns handles to named parameters (typically `model.parameters()`); each
//! [`Optimizer::step`] reads their gradients, updates its per-parameter state and writes new
//! values with [`tessera_autograd::Var::set_value`], under [`tessera_autograd::no_grad`]. Parameters without a
//! gradient are skipped, as in PyTorch. The update of one parameter is a short chain of
//! element-wise tensor ops with the scalar coefficients computed on the host in f64.
//!
//! [`Optimizer::state`] exports the per-parameter state as named tensors
//! (`"<param>.<key>"`, e.g. `"0.weight.exp_avg"`, `"0.weight.step"`) for checkpoints, and
//! [`Optimizer::load_state`] restores it. The learning rate is not part of that state: it is
//! a hyper-parameter a schedule or the training script sets.

mod adam;
mod adamw;
mod local_shards;
mod named_params;
mod sgd;
mod state_source;

pub use adam::{Adam, AdamConfig};
pub use adamw::{AdamW, AdamWConfig};
pub use local_shards::{LocalShards, TensorPiece};
pub use sgd::{Sgd, SgdConfig};
pub use state_source::{Prefixed, StateSource};

use tessera_autograd::Var;
use tessera_core::{Backend, Result, Tensor};

/// What [`Optimizer::visit_consolidated_state`] hands each part of the state to.
pub type ConsolidatedVisitor<'a, B> = dyn FnMut(Vec<(String, Tensor<B>)>) -> Result<()> + 'a;

/// A first-order optimizer over a fixed set of named parameters.
pub trait Optimizer<B: Backend> {
    /// Applies one update to every parameter that has a gradient.
    fn step(&mut self) -> Result<()>;

    /// Clears the gradient of every parameter.
    fn zero_grad(&mut self);

    /// The current learning rate.
    fn learning_rate(&self) -> f64;

    /// Sets the learning rate used by the next steps (what a schedule calls).
    fn set_learning_rate(&mut self, lr: f64);

    /// The per-parameter state as `("<param name>.<key>", tensor)` pairs, for checkpoints.
    /// Parameters that have not been updated yet have no entries.
    fn state(&self) -> Vec<(String, Tensor<B>)>;

    /// Restores a state exported by [`Optimizer::state`] of an optimizer of the same kind over
    /// the same parameters. Parameters without entries start fresh; an unknown key, a missing
    /// key of a parameter that has some, or a tensor of the wrong shape or dtype is an error
    /// and leaves the optimizer unchanged.
    fn load_state(&mut self, state: &[(String, Tensor<B>)]) -> Result<()>;

    /// [`Optimizer::load_state`] from a source read on demand (the files of a sharded
    /// checkpoint): keys as [`Optimizer::state`] names them when whole. By default every
    /// tensor is read whole; an optimizer that keeps a share of the state
    /// ([`crate::distributed::ShardedOptimizer`]) reads only its share.
    fn load_state_from(&mut self, source: &dyn StateSource<B>) -> Result<()> {
        let state = source
            .keys()
            .into_iter()
            .map(|key| source.read(&key).map(|t| (key, t)))
            .collect::<Result<Vec<_>>>()?;
        self.load_state(&state)
    }

    /// Makes [`Optimizer::state`] return the whole state on every rank until
    /// [`Optimizer::finish_checkpoint`]: a collective for an optimizer whose state is spread
    /// over ranks ([`crate::distributed::ShardedOptimizer`] gathers its shares), which every
    /// rank calls before one of them writes a checkpoint. Nothing to do for the others.
    fn prepare_checkpoint(&self) -> Result<()> {
        Ok(())
    }

    /// Frees what [`Optimizer::prepare_checkpoint`] gathered.
    fn finish_checkpoint(&self) {}

    /// Hands the whole state (what [`Optimizer::state`] returns after
    /// [`Optimizer::prepare_checkpoint`]) to `visit` in parts on rank 0, so that no rank holds
    /// all of it at once: a [`crate::distributed::ShardedOptimizer`] gathers one bucket at a
    /// time to rank 0 (a collective: every rank calls it; the other ranks are visited as many
    /// times, with only the entries they hold whole, such as step counts, and receive no
    /// gathered data). By default one part, [`Optimizer::state`], on every rank. An error of
    /// `visit` is returned after the last part (the collectives still run on every rank) and
    /// `visit` is not called again after it.
    fn visit_consolidated_state(&self, visit: &mut ConsolidatedVisitor<'_, B>) -> Result<()> {
        visit(self.state())
    }

    /// This rank's part of the parameters and state, for an optimizer whose state is spread
    /// over ranks ([`crate::distributed::ShardedOptimizer`]): what each rank writes into a
    /// sharded checkpoint ([`crate::run::save_sharded_checkpoint`]) instead of gathering the
    /// whole state. `None` (the default) for an optimizer whose [`Optimizer::state`] is whole
    /// on every rank. Not a collective.
    fn local_shards(&self) -> Result<Option<LocalShards<B>>> {
        Ok(None)
    }

    /// The global L2 norm of the gradients this optimizer applies, for logs (a collective for
    /// optimizers whose gradients are spread over ranks, so every rank calls it); by default
    /// the norm of `params`' own gradients ([`crate::clip::grad_norm`]).
    fn gradient_norm(&self, params: &[Var<B>]) -> Result<f64> {
        crate::clip::grad_norm(params)
    }
}

/// A boxed optimizer (`Box<dyn Optimizer<B>>`, chosen at run time) is an optimizer, so that
/// wrappers such as [`crate::distributed::DistributedOptimizer`] take it.
impl<B: Backend, O: Optimizer<B> + ?Sized> Optimizer<B> for Box<O> {
    fn step(&mut self) -> Result<()> {
        (**self).step()
    }

    fn zero_grad(&mut self) {
        (**self).zero_grad()
    }

    fn learning_rate(&self) -> f64 {
        (**self).learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        (**self).set_learning_rate(lr)
    }

    fn state(&self) -> Vec<(String, Tensor<B>)> {
        (**self).state()
    }

    fn load_state(&mut self, state: &[(String, Tensor<B>)]) -> Result<()> {
        (**self).load_state(state)
    }

    fn prepare_checkpoint(&self) -> Result<()> {
        (**self).prepare_checkpoint()
    }

    fn finish_checkpoint(&self) {
        (**self).finish_checkpoint()
    }

    fn visit_consolidated_state(&self, visit: &mut ConsolidatedVisitor<'_, B>) -> Result<()> {
        (**self).visit_consolidated_state(visit)
    }

    fn local_shards(&self) -> Result<Option<LocalShards<B>>> {
        (**self).local_shards()
    }

    fn load_state_from(&mut self, source: &dyn StateSource<B>) -> Result<()> {
        (**self).load_state_from(source)
    }

    fn gradient_norm(&self, params: &[Var<B>]) -> Result<f64> {
        (**self).gradient_norm(params)
    }
}
