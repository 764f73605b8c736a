//! The recorded graph and reverse-mode propagation: nodes, topological order, `backward`.
//!
//! Every op result holds a [`Node`]: its backward closure and its parent `Var`s. `backward`
//! collects the nodes reachable from the output through Vars that require grad (an iterative
//! depth-first search, so graphs thousands of nodes deep are fine), visits them from the output
//! towards the leaves, sums the gradients arriving at each node, calls each closure exactly once,
//! and finally adds the totals into the leaves' `grad`.
//!
//! Unless [`Var::backward_retain`] is used, `backward` frees every node it visits (closure, saved
//! tensors and parent links) as soon as that node's rule has run, so memory is returned during the
//! pass; running `backward` again through a freed node is an error, as in PyTorch. Leaf gradients
//! are only written once the whole pass has succeeded: a failing `backward` changes no `grad`
//! (but may have freed part of the graph). Dropping the last handle on a long chain
//! is iterative too, so it cannot overflow the stack.

use crate::var::{lock, Var, VarInner};
use std::collections::{HashMap, HashSet};
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
            // topological order keeps the ancestors alive, so dropping its handle is shallow.
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

/// The Vars that require grad reachable from `root`, each after all of its consumers: the order
/// in which gradients can be propagated. Iterative post-order DFS, reversed.
fn topological_order<B: Backend>(root: &Var<B>) -> Result<Vec<Var<B>>> {
    let mut post_order = Vec::new();
    let mut visited = HashSet::new();
    // (var, parents_done): a Var is emitted when popped the second time, after its parents.
    let mut stack = vec![(root.clone(), false)];
    while let Some((var, parents_done)) = stack.pop() {
        if parents_done {
            post_order.push(var);
            continue;
        }
        if !visited.insert(var.id()) {
            continue;
        }
        let parents = parents_requiring_grad(&var)?;
        stack.push((var, true));
        for parent in parents {
            if !visited.contains(&parent.id()) {
                stack.push((parent, false));
            }
        }
    }
    post_order.reverse();
    Ok(post_order)
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
    let order = topological_order(root)?;
    let mut totals: HashMap<u64, Tensor<B>> = HashMap::new();
    totals.insert(root.id(), seed);
    let mut leaf_grads = Vec::new();
    for var in &order {
        let Some(grad) = totals.remove(&var.id()) else {
            continue; // nothing flowed into this node
        };
        let node = match &*lock(&var.inner.grad_fn) {
            GradFn::Leaf => None,
            GradFn::Op(node) => Some(node.clone()),
            GradFn::Freed => return Err(freed_graph_error()),
        };
        let Some(node) = node else {
            leaf_grads.push((var.clone(), grad));
            continue;
        };
        let parent_grads = (node.backward)(&grad)?;
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
            if let (true, Some(g)) = (parent.requires_grad(), parent_grad) {
                check_grad_matches(parent, &g)?;
                accumulate(&mut totals, parent.id(), g)?;
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
    if !retain_graph {
        // Nodes nothing flowed into were skipped above; free them too.
        for var in &order {
            let mut grad_fn = lock(&var.inner.grad_fn);
            if matches!(*grad_fn, GradFn::Op(_)) {
                *grad_fn = GradFn::Freed;
            }
        }
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
