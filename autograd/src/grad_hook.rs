//! Gradient-ready hooks: a function `backward` calls on a leaf as soon as that leaf's gradient
//! for the pass is complete (PyTorch's `register_post_accumulate_grad_hook`). Data-parallel
//! wrappers use them to reduce a bucket of gradients while the rest of the pass still runs.

use crate::var::{lock, Var};
use std::sync::Arc;
use tessera_core::{Backend, Error, Result};

/// A gradient-ready hook: called with the leaf once `backward` has added the leaf's complete
/// gradient of this pass into [`Var::grad`]. An error stops the `backward` pass and is returned
/// from it.
pub type GradReadyHook<B> = Arc<dyn Fn(&Var<B>) -> Result<()> + Send + Sync + 'static>;

impl<B: Backend> Var<B> {
    /// Sets (or with `None` removes) this leaf's gradient-ready hook. During every `backward`
    /// pass that reaches the leaf, the hook runs once, as soon as the last op that consumes the
    /// leaf has propagated its gradient: the leaf's [`Var::grad`] then already holds the pass's
    /// contribution (it stays `None` when no gradient flowed into it, e.g. through an op that
    /// returned none). A leaf with a hook gets its gradient at that point, not at the end of the
    /// pass: if the pass fails later, it keeps it. A leaf that does not require grad takes no
    /// hook (an error).
    ///
    /// ```
    /// # fn demo<B: tessera_core::Backend>(dev: &B) -> tessera_core::Result<()> {
    /// use std::sync::{Arc, Mutex};
    /// use tessera_autograd::Var;
    /// use tessera_core::Tensor;
    /// let w = Var::param(Tensor::from_vec(vec![1.0f64, 2.0], [2], dev)?);
    /// let seen = Arc::new(Mutex::new(Vec::new()));
    /// let log = seen.clone();
    /// w.set_grad_ready_hook(Some(Arc::new(move |leaf: &Var<B>| {
    ///     log.lock().unwrap().push(leaf.grad().unwrap().to_vec::<f64>()?);
    ///     Ok(())
    /// })))?;
    /// w.mul(&w)?.sum_all()?.backward()?;
    /// assert_eq!(*seen.lock().unwrap(), vec![vec![2.0, 4.0]]);
    /// # Ok(()) }
    /// ```
    pub fn set_grad_ready_hook(&self, hook: Option<GradReadyHook<B>>) -> Result<()> {
        if hook.is_some() && !(self.is_leaf() && self.requires_grad()) {
            return Err(Error::InvalidArgument {
                op: "set_grad_ready_hook",
                msg: "only a leaf that requires grad takes a gradient-ready hook".into(),
            });
        }
        *lock(&self.inner.grad_hook) = hook;
        Ok(())
    }

    /// This leaf's gradient-ready hook, if any.
    pub fn grad_ready_hook(&self) -> Option<GradReadyHook<B>> {
        lock(&self.inner.grad_hook).clone()
    }
}
