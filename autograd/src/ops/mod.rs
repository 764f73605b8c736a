//! The differentiable ops of [`crate::Var`], one file per family, and the helpers their backward
//! rules share.
//!
//! Each op computes its value with the matching `Tensor` method, then records a backward rule
//! that captures only the tensors it needs (never `Var`s) and computes gradients only for the
//! operands that require grad.

mod attention;
mod binary;
mod indexing;
mod layer_norm;
mod linalg;
mod nn;
mod reduce;
mod unary;
mod views;

use crate::Var;
use tessera_core::shape::resolve_axis;
use tessera_core::{Backend, Error, Result, Tensor};

/// `Some(f())` when `needed`, `None` otherwise: a parent's gradient, computed only if used.
pub(crate) fn grad_if<B: Backend>(
    needed: bool,
    f: impl FnOnce() -> Result<Tensor<B>>,
) -> Result<Option<Tensor<B>>> {
    if needed {
        f().map(Some)
    } else {
        Ok(None)
    }
}

/// Sums a gradient of a broadcast result back to an operand's `dims`: over the leading axes the
/// operand lacked and over the axes where it had size 1.
pub(crate) fn sum_to_dims<B: Backend>(grad: &Tensor<B>, dims: &[usize]) -> Result<Tensor<B>> {
    if grad.dims() == dims {
        return Ok(grad.clone());
    }
    if grad.rank() < dims.len() {
        return Err(Error::BroadcastIncompatible {
            op: "sum_to",
            lhs: grad.shape().clone(),
            rhs: dims.into(),
        });
    }
    let lead = grad.rank() - dims.len();
    let mut axes: Vec<isize> = (0..lead as isize).collect();
    for (i, &d) in dims.iter().enumerate() {
        if d == 1 && grad.dims()[lead + i] != 1 {
            axes.push((lead + i) as isize);
        }
    }
    let summed = if axes.is_empty() {
        grad.clone()
    } else {
        grad.sum(&axes, true)?
    };
    summed.reshape(dims)
}

/// Resolves reduction axes like `Tensor::sum` does: negative axes count from the end, an empty
/// list means every axis; the result is sorted and free of duplicates.
pub(crate) fn resolve_axes(op: &'static str, axes: &[isize], rank: usize) -> Result<Vec<usize>> {
    if axes.is_empty() {
        return Ok((0..rank).collect());
    }
    let mut resolved = axes
        .iter()
        .map(|&a| resolve_axis(op, a, rank))
        .collect::<Result<Vec<_>>>()?;
    resolved.sort_unstable();
    resolved.dedup();
    Ok(resolved)
}

/// `dims` with every axis in `axes` set to 1 (the `keepdim = true` shape of a reduction).
pub(crate) fn kept_dims(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    dims.iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect()
}

impl<B: Backend> Var<B> {
    /// Records a one-input op whose gradient is `rule(upstream)`.
    pub(crate) fn unary_op(
        &self,
        value: Tensor<B>,
        rule: impl Fn(&Tensor<B>) -> Result<Tensor<B>> + Send + Sync + 'static,
    ) -> Var<B> {
        Var::from_op(value, vec![self.clone()], move |g| Ok(vec![Some(rule(g)?)]))
    }
}
