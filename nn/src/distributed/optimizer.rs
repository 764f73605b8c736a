//! [`DistributedOptimizer`]: an optimizer that averages the gradients over the ranks before
//! each step.

use crate::distributed::reducer::GradientReducer;
use crate::optim::{ConsolidatedVisitor, LocalShards, Optimizer, StateSource};
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, Result, Tensor};

/// Wraps an optimizer so that [`Optimizer::step`] first replaces every gradient by its mean
/// over the ranks ([`GradientReducer::all_reduce_gradients`]), then steps. Everything else
/// (learning rate, state for checkpoints) is the inner optimizer's. Made by
/// [`crate::distributed::DistributedDataParallel::wrap_optimizer`].
pub struct DistributedOptimizer<B: Backend, O> {
    inner: O,
    reducer: Arc<GradientReducer<B>>,
}

impl<B: Backend, O: Optimizer<B>> DistributedOptimizer<B, O> {
    /// `inner`, averaging the gradients of `reducer`'s parameters before each step.
    pub fn new(inner: O, reducer: Arc<GradientReducer<B>>) -> Self {
        DistributedOptimizer { inner, reducer }
    }

    /// The wrapped optimizer.
    pub fn inner(&self) -> &O {
        &self.inner
    }

    /// The wrapped optimizer, unwrapped.
    pub fn into_inner(self) -> O {
        self.inner
    }
}

impl<B: Backend, O: Optimizer<B>> Optimizer<B> for DistributedOptimizer<B, O> {
    fn step(&mut self) -> Result<()> {
        self.reducer.all_reduce_gradients()?;
        self.inner.step()
    }

    fn zero_grad(&mut self) {
        self.inner.zero_grad()
    }

    fn learning_rate(&self) -> f64 {
        self.inner.learning_rate()
    }

    fn set_learning_rate(&mut self, lr: f64) {
        self.inner.set_learning_rate(lr)
    }

    fn state(&self) -> Vec<(String, Tensor<B>)> {
        self.inner.state()
    }

    fn load_state(&mut self, state: &[(String, Tensor<B>)]) -> Result<()> {
        self.inner.load_state(state)
    }

    fn prepare_checkpoint(&self) -> Result<()> {
        self.inner.prepare_checkpoint()
    }

    fn finish_checkpoint(&self) {
        self.inner.finish_checkpoint()
    }

    fn visit_consolidated_state(&self, visit: &mut ConsolidatedVisitor<'_, B>) -> Result<()> {
        self.inner.visit_consolidated_state(visit)
    }

    fn local_shards(&self) -> Result<Option<LocalShards<B>>> {
        self.inner.local_shards()
    }

    fn load_state_from(&mut self, source: &dyn StateSource<B>) -> Result<()> {
        self.inner.load_state_from(source)
    }

    fn gradient_norm(&self, params: &[Var<B>]) -> Result<f64> {
        self.inner.gradient_norm(params)
    }
}
