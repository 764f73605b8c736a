//! [`Var<B>`]: a tensor that remembers how it was computed, so gradients can flow back to it.

use crate::grad_mode::is_grad_enabled;
use crate::graph::{BackwardFn, GradFn, Node};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use tessera_core::{Backend, DType, Error, Result, Shape, Tensor};

/// Source of the unique ids that identify graph nodes during `backward`.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A tensor in the autograd graph.
///
/// A `Var` is either a **leaf** (made by [`Var::leaf`], [`Var::param`] or [`Var::constant`]: a
/// parameter or an input) or the result of an op on other `Var`s, which records a backward rule
/// and its parents. Cloning is cheap (an `Arc`); clones are the same node. `Var` is `Send + Sync`.
///
/// Gradients flow only into leaves that require grad; the result of an op requires grad when
/// recording is on (see [`crate::no_grad`]) and at least one operand requires grad. Otherwise the
/// op records nothing and returns a constant.
///
/// ```
/// # fn demo<B: tessera_core::Backend>(dev: &B) -> tessera_core::Result<()> {
/// use tessera_autograd::Var;
/// use tessera_core::Tensor;
/// let x = Var::param(Tensor::from_vec(vec![1.0f64, 2.0, 3.0], [3], dev)?);
/// let y = x.mul(&x)?.sum_all()?; // y = sum(x^2)
/// y.backward()?;
/// assert_eq!(x.grad().unwrap().to_vec::<f64>()?, vec![2.0, 4.0, 6.0]);
/// # Ok(()) }
/// ```
pub struct Var<B: Backend> {
    pub(crate) inner: Arc<VarInner<B>>,
}

/// The shared state of one graph node.
pub(crate) struct VarInner<B: Backend> {
    /// Unique across the process; keys the per-node bookkeeping of `backward`.
    pub(crate) id: u64,
    /// Fixed at creation: `set_value` may not change them.
    pub(crate) shape: Shape,
    pub(crate) dtype: DType,
    pub(crate) requires_grad: bool,
    pub(crate) value: RwLock<Tensor<B>>,
    /// Accumulated gradient; only leaves that require grad ever hold one.
    pub(crate) grad: Mutex<Option<Tensor<B>>>,
    /// How this node was made: a leaf, an op (until its graph is freed), or a freed op.
    pub(crate) grad_fn: Mutex<GradFn<B>>,
    /// Called once the leaf's gradient of a `backward` pass is complete (see
    /// [`Var::set_grad_ready_hook`]).
    pub(crate) grad_hook: Mutex<Option<crate::grad_hook::GradReadyHook<B>>>,
}

/// Locks a mutex, recovering the data if another thread panicked while holding it (the values
/// kept here are always left consistent, so poisoning carries no information).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl<B: Backend> Clone for Var<B> {
    fn clone(&self) -> Self {
        Var {
            inner: self.inner.clone(),
        }
    }
}

impl<B: Backend> fmt::Debug for Var<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Var")
            .field("id", &self.inner.id)
            .field("shape", &self.inner.shape)
            .field("dtype", &self.inner.dtype)
            .field("requires_grad", &self.inner.requires_grad)
            .field("is_leaf", &self.is_leaf())
            .finish()
    }
}

impl<B: Backend> Var<B> {
    fn new(value: Tensor<B>, requires_grad: bool, grad_fn: GradFn<B>) -> Self {
        Var {
            inner: Arc::new(VarInner {
                id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
                shape: value.shape().clone(),
                dtype: value.dtype(),
                requires_grad,
                value: RwLock::new(value),
                grad: Mutex::new(None),
                grad_fn: Mutex::new(grad_fn),
                grad_hook: Mutex::new(None),
            }),
        }
    }

    // ----- construction -----

    /// A leaf holding `value`. Only floating-point tensors can require grad: for other dtypes
    /// (indices, masks) `requires_grad` is ignored and the leaf is a constant.
    pub fn leaf(value: Tensor<B>, requires_grad: bool) -> Self {
        let requires_grad = requires_grad && value.dtype().is_float();
        Self::new(value, requires_grad, GradFn::Leaf)
    }

    /// A trainable leaf: `Var::leaf(value, true)`.
    pub fn param(value: Tensor<B>) -> Self {
        Self::leaf(value, true)
    }

    /// A leaf that never receives a gradient: `Var::leaf(value, false)`.
    pub fn constant(value: Tensor<B>) -> Self {
        Self::leaf(value, false)
    }

    /// Records the result of a custom differentiable op.
    ///
    /// `backward` receives the gradient of the loss with respect to `value` and returns one entry
    /// per parent, in order: the gradient with respect to that parent (same shape and dtype as
    /// the parent's value), or `None` when it contributes nothing (e.g. for parents that do not
    /// require grad). It runs at most once per `backward` call and must capture tensors, never
    /// `Var`s. When recording is off or no parent requires grad, nothing is recorded and the
    /// result is a constant.
    pub fn from_op(
        value: Tensor<B>,
        parents: Vec<Var<B>>,
        backward: impl Fn(&Tensor<B>) -> Result<Vec<Option<Tensor<B>>>> + Send + Sync + 'static,
    ) -> Self {
        if !is_grad_enabled() || !parents.iter().any(Var::requires_grad) {
            return Self::constant(value);
        }
        let backward: BackwardFn<B> = Box::new(backward);
        Self::new(
            value,
            true,
            GradFn::Op(Arc::new(Node { backward, parents })),
        )
    }

    /// A new leaf with the same value, cut from the graph: no gradient flows through it.
    pub fn detach(&self) -> Self {
        Self::constant(self.value())
    }

    // ----- inspection -----

    /// The current value (a cheap clone sharing storage).
    pub fn value(&self) -> Tensor<B> {
        self.inner
            .value
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Whether gradients flow into (or through) this node.
    pub fn requires_grad(&self) -> bool {
        self.inner.requires_grad
    }

    /// True for Vars made by a constructor rather than by an op.
    pub fn is_leaf(&self) -> bool {
        matches!(*lock(&self.inner.grad_fn), GradFn::Leaf)
    }

    /// The shape (fixed for the life of the Var).
    pub fn shape(&self) -> &Shape {
        &self.inner.shape
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.inner.shape.dims()
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.inner.shape.rank()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.inner.shape.numel()
    }

    /// The element type (fixed for the life of the Var).
    pub fn dtype(&self) -> DType {
        self.inner.dtype
    }

    /// A process-unique identifier of this node (clones share it).
    pub fn id(&self) -> u64 {
        self.inner.id
    }

    // ----- gradients -----

    /// The gradient accumulated by `backward` calls since the last [`Var::zero_grad`], if any.
    /// Only leaves that require grad hold one; it is always contiguous, with the Var's shape and
    /// dtype.
    pub fn grad(&self) -> Option<Tensor<B>> {
        lock(&self.inner.grad).clone()
    }

    /// Forgets the accumulated gradient (the next `backward` starts from nothing).
    pub fn zero_grad(&self) {
        *lock(&self.inner.grad) = None;
    }

    /// Replaces the accumulated gradient. Nothing is checked here; a gradient whose shape or dtype
    /// differs from the Var's makes the next accumulation into it fail with an error.
    pub fn set_grad(&self, grad: Option<Tensor<B>>) {
        *lock(&self.inner.grad) = grad;
    }

    /// Replaces the value of a leaf (what an optimizer step does). The new value must have the
    /// same shape and dtype; graphs recorded before keep the value they saw.
    pub fn set_value(&self, value: Tensor<B>) -> Result<()> {
        const OP: &str = "set_value";
        if !self.is_leaf() {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: "only leaf Vars can be assigned a new value".into(),
            });
        }
        if value.shape() != self.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().clone(),
                rhs: value.shape().clone(),
            });
        }
        if value.dtype() != self.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: self.dtype(),
                rhs: value.dtype(),
            });
        }
        *self
            .inner
            .value
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = value;
        Ok(())
    }

    /// Adds `grad` into this leaf's accumulated gradient (stored contiguous).
    pub(crate) fn accumulate_grad(&self, grad: &Tensor<B>) -> Result<()> {
        let mut slot = lock(&self.inner.grad);
        let total = match slot.as_ref() {
            None => grad.contiguous()?,
            Some(old) => {
                if old.shape() != grad.shape() {
                    return Err(Error::ShapeMismatch {
                        op: "accumulate_grad",
                        lhs: old.shape().clone(),
                        rhs: grad.shape().clone(),
                    });
                }
                old.add(grad)?
            }
        };
        *slot = Some(total);
        Ok(())
    }
}
