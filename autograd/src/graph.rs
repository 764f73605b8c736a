//! The recorded graph and reverse-mode propagation: nodes, scheduling, `backward`.
//!
//! Every op result holds a [`Node`]: its backward closure and its parent `Var`s. `backward`
//! counts the consumers of each node reachable from the output through Vars that require grad
//! (an iterative depth-first search, so graphs thousands of nodes deep are fine), then runs each
//! node once all of its consumers have run, the most recently created first (PyTorch's order),
//! summing the gradients arriving at each node and calling each closure exactly once; a leaf's
//! gradient is complete as soon as its last consumer has run. The totals are added into the
//! leaves' `grad` at the end.
//!
//! Unless [`Var::backward_retain`] is used, `backward` frees every node it visits (closure, saved
//! tensors and parent links) as soon as that node's rule has run, so memory is returned during the
//! pass; running `backward` again through a freed node is an error, as in PyTorch. Leaf gradients
//! are only written once the whole pass has succeeded: a failing `backward` changes no `grad`
//! (but may have freed part of the graph), except on leaves with a gradient-ready hook
//! ([`Var::set_grad_ready_hook`]), which get theirs, and run the hook, as soon as their last
//! consumer has run. Dropping the last handle on a long chain
//! is iterative too, so it cannot overflow the stack.

use crate::var::{lock, Var, VarInner};
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::sync::Arc;
use tessera_core::{Backend, Error, Result, Tensor};

/// A backward rule: from the gradient of the output to one optional gradient per parent.
pub type BackwardFn<B> =
    Box<dyn Fn(&Tensor<B>) -> Result<Vec<Option<Tensor<B>>>> + Send + Sync + 'static>;

/// The op that produced a Var, and what it needs to propagate gradients.
pub(crate) struct Node<B: Backend> {
    pub(crate) backward: BackwardFn<B>,
    pub(crate) parents: Vec<Var<B>>,
}

/// How a Var came to be.
pub(crate) enum GradFn<B: Backend> {
    /// Made by a constructor: gradients stop (and accumulate) here.
    Leaf,
    /// Made by an op whose graph is still recorded. Shared so that `backward` can run the rule
    /// without holding this Var's lock.
    Op(Arc<Node<B>>),
    /// Made by an op whose graph a `backward` call has freed.
    Freed,
}

impl<B: Backend> VarInner<B> {
    /// Detaches the parents of an op node, leaving it freed (used by the iterative drop).
    fn take_parents(&mut self) -> Vec<Var<B>> {
        let grad_fn = self
            .grad_fn
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match std::mem::replace(grad_fn, GradFn::Freed) {
            // Only a `backward` running on another thread can hold another reference; its
            // scheduled nodes keep their ancestors alive, so dropping its handle is shallow.
            GradFn::Op(node) => Arc::try_unwrap(node)
                .map(|node| node.parents)
                .unwrap_or_default(),
            leaf @ GradFn::Leaf => {
                *grad_fn = leaf;
                Vec::new()
            }
            GradFn::Freed => Vec::new(),
        }
    }
}

impl<B: Backend> Drop for VarInner<B> {
    /// Unlinks the chain of ancestors that only this node kept alive one by one, instead of
    /// letting nested `Arc` drops recurse once per graph level.
    fn drop(&mut self) {
        let mut pending = self.take_parents();
        while let Some(var) = pending.pop() {
            if let Ok(mut inner) = Arc::try_unwrap(var.inner) {
                pending.extend(inner.take_parents());
            }
        }
    }
}

fn freed_graph_error() -> Error {
    Error::InvalidArgument {
        op: "backward",
        msg: "the graph was already freed by a previous backward; use backward_retain to \
              run backward through it more than once"
            .into(),
    }
}

/// The parents of `var` that require grad, or an error if its graph was freed.
fn parents_requiring_grad<B: Backend>(var: &Var<B>) -> Result<Vec<Var<B>>> {
    match &*lock(&var.inner.grad_fn) {
        GradFn::Leaf => Ok(Vec::new()),
        GradFn::Op(node) => Ok(node
            .parents
            .iter()
            .filter(|p| p.requires_grad())
            .cloned()
            .collect()),
        GradFn::Freed => Err(freed_graph_error()),
    }
}

/// How many edges of the graph of Vars that require grad reachable from `root` consume each
/// node, by id (an op using a Var twice counts twice). Iterative depth-first search; an error
/// if it reaches a node whose graph was freed.
fn count_consumers<B: Backend>(root: &Var<B>) -> Result<HashMap<u64, usize>> {
    let mut visited = HashSet::new();
    let mut consumers: HashMap<u64, usize> = HashMap::new();
    let mut stack = vec![root.clone()];
    visited.insert(root.id());
    while let Some(var) = stack.pop() {
        for parent in parents_requiring_grad(&var)? {
            *consumers.entry(parent.id()).or_default() += 1;
            if visited.insert(parent.id()) {
                stack.push(parent);
            }
        }
    }
    Ok(consumers)
}

/// An op node whose consumers have all run, ordered by id: the most recently created runs
/// first (PyTorch's order), so the backward pass goes back through the forward pass in step.
struct Ready<B: Backend>(Var<B>);

impl<B: Backend> PartialEq for Ready<B> {
    fn eq(&self, other: &Self) -> bool {
        self.0.id() == other.0.id()
    }
}

impl<B: Backend> Eq for Ready<B> {}

impl<B: Backend> PartialOrd for Ready<B> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl<B: Backend> Ord for Ready<B> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.id().cmp(&other.0.id())
    }
}

/// Checks that a gradient produced for `var` has its shape and dtype.
fn check_grad_matches<B: Backend>(var: &Var<B>, grad: &Tensor<B>) -> Result<()> {
    if grad.shape() != var.shape() {
        return Err(Error::ShapeMismatch {
            op: "backward",
            lhs: var.shape().clone(),
            rhs: grad.shape().clone(),
        });
    }
    if grad.dtype() != var.dtype() {
        return Err(Error::DTypeMismatch {
            op: "backward",
            lhs: var.dtype(),
            rhs: grad.dtype(),
        });
    }
    Ok(())
}

/// Adds `grad` to the running total kept for node `id`.
fn accumulate<B: Backend>(
    totals: &mut HashMap<u64, Tensor<B>>,
    id: u64,
    grad: Tensor<B>,
) -> Result<()> {
    let total = match totals.remove(&id) {
        None => grad,
        Some(previous) => previous.add(&grad)?,
    };
    totals.insert(id, total);
    Ok(())
}

/// A leaf's gradient of this pass is complete: with a gradient-ready hook it is added now and
/// the hook runs; otherwise it waits in `pending` for the end of the pass.
fn complete_leaf<B: Backend>(
    leaf: &Var<B>,
    grad: Option<Tensor<B>>,
    pending: &mut Vec<(Var<B>, Tensor<B>)>,
) -> Result<()> {
    match (leaf.grad_ready_hook(), grad) {
        (Some(hook), grad) => {
            if let Some(grad) = grad {
                leaf.accumulate_grad(&grad)?;
            }
            hook(leaf)
        }
        (None, Some(grad)) => {
            pending.push((leaf.clone(), grad));
            Ok(())
        }
        (None, None) => Ok(()),
    }
}

/// Propagates `seed` (the gradient of the loss with respect to `root`) back through the graph.
fn run_backward<B: Backend>(root: &Var<B>, seed: Tensor<B>, retain_graph: bool) -> Result<()> {
    if !root.requires_grad() {
        return Err(Error::InvalidArgument {
            op: "backward",
            msg: "this Var does not require grad: no leaf it depends on requires grad, or it \
                  was computed with recording off (no_grad)"
                .into(),
        });
    }
    check_grad_matches(root, &seed)?;
    let mut consumers = count_consumers(root)?;
    let mut totals: HashMap<u64, Tensor<B>> = HashMap::new();
    totals.insert(root.id(), seed);
    let mut leaf_grads = Vec::new();
    let mut ready = BinaryHeap::new();
    if root.is_leaf() {
        complete_leaf(root, totals.remove(&root.id()), &mut leaf_grads)?;
    } else {
        ready.push(Ready(root.clone()));
    }
    while let Some(Ready(var)) = ready.pop() {
        let node = match &*lock(&var.inner.grad_fn) {
            GradFn::Op(node) => node.clone(),
            // Only op nodes are scheduled; a freed one was checked by `count_consumers`.
            GradFn::Leaf | GradFn::Freed => return Err(freed_graph_error()),
        };
        let parent_grads = match totals.remove(&var.id()) {
            // Nothing flowed into this node: its parents get nothing from it.
            None => vec![None; node.parents.len()],
            Some(grad) => (node.backward)(&grad)?,
        };
        if parent_grads.len() != node.parents.len() {
            return Err(Error::InvalidArgument {
                op: "backward",
                msg: format!(
                    "a backward rule returned {} gradients for {} parents",
                    parent_grads.len(),
                    node.parents.len()
                ),
            });
        }
        for (parent, parent_grad) in node.parents.iter().zip(parent_grads) {
            if !parent.requires_grad() {
                continue;
            }
            if let Some(g) = parent_grad {
                check_grad_matches(parent, &g)?;
                accumulate(&mut totals, parent.id(), g)?;
            }
            let left = consumers.get_mut(&parent.id()).map(|n| {
                *n = n.saturating_sub(1);
                *n
            });
            if left == Some(0) {
                // Every consumer has run: the parent's gradient is complete.
                match parent.is_leaf() {
                    true => complete_leaf(parent, totals.remove(&parent.id()), &mut leaf_grads)?,
                    false => ready.push(Ready(parent.clone())),
                }
            }
        }
        if !retain_graph {
            // Free the closure and its saved tensors now rather than at the end: this bounds
            // peak memory to what is still needed.
            *lock(&var.inner.grad_fn) = GradFn::Freed;
        }
    }
    for (leaf, grad) in &leaf_grads {
        leaf.accumulate_grad(grad)?;
    }
    Ok(())
}

impl<B: Backend> Var<B> {
    /// Back-propagates from this one-element Var (seeded with 1) into every leaf that requires
    /// grad, adding to their `grad`. The graph is freed afterwards: a second `backward` through it
    /// returns an error (use [`Var::backward_retain`] to keep it).
    pub fn backward(&self) -> Result<()> {
        run_backward(self, self.unit_seed()?, false)
    }

    /// Like [`Var::backward`] but keeps the graph, so `backward` can run through it again.
    pub fn backward_retain(&self) -> Result<()> {
        run_backward(self, self.unit_seed()?, true)
    }

    /// Back-propagates a given gradient of the loss with respect to this Var (same shape and
    /// dtype), for non-scalar outputs. Frees the graph like [`Var::backward`].
    pub fn backward_with(&self, grad: &Tensor<B>) -> Result<()> {
        run_backward(self, grad.clone(), false)
    }

    /// [`Var::backward_with`] that keeps the graph.
    pub fn backward_with_retain(&self, grad: &Tensor<B>) -> Result<()> {
        run_backward(self, grad.clone(), true)
    }

    /// Ones of this Var's shape: the seed of a scalar loss.
    fn unit_seed(&self) -> Result<Tensor<B>> {
        if self.numel() != 1 {
            return Err(Error::InvalidArgument {
                op: "backward",
                msg: format!(
                    "backward() needs a one-element Var, got shape {}; use backward_with",
                    self.shape()
                ),
            });
        }
        self.value().ones_like()
    }
}
