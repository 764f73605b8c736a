//! Reductions over axes and their gradients.
//!
//! Axes follow `Tensor`'s conventions: negative axes count from the end, an empty list means every
//! axis. For `max`/`min`, the gradient of each reduced group is split evenly among the elements
//! equal to its extremum (a unique extremum gets all of it), which is the symmetric choice of
//! PyTorch's full `max()`/`amax`, and keeps the gradient of ties correct for sums of them.

use super::{kept_dims, resolve_axes};
use crate::Var;
use tessera_core::{Backend, Result, Tensor};

impl<B: Backend> Var<B> {
    /// Sum over `axes` (empty: all); the gradient is broadcast back over the reduced axes.
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<Var<B>> {
        let value = self.value().sum(axes, keepdim)?;
        let dims = self.dims().to_vec();
        let kept = kept_dims(&dims, &resolve_axes("sum", axes, self.rank())?);
        Ok(self.unary_op(value, move |g| {
            g.reshape(kept.as_slice())?.broadcast_to(dims.as_slice())
        }))
    }

    /// Sum of every element, as a rank-0 Var.
    pub fn sum_all(&self) -> Result<Var<B>> {
        self.sum(&[], false)
    }

    /// Mean over `axes` (empty: all).
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<Var<B>> {
        let value = self.value().mean(axes, keepdim)?;
        let dims = self.dims().to_vec();
        let resolved = resolve_axes("mean", axes, self.rank())?;
        let count: usize = resolved.iter().map(|&a| dims[a]).product();
        let kept = kept_dims(&dims, &resolved);
        Ok(self.unary_op(value, move |g| {
            g.reshape(kept.as_slice())?
                .div_scalar(count as f64)?
                .broadcast_to(dims.as_slice())
        }))
    }

    /// Mean of every element, as a rank-0 Var.
    pub fn mean_all(&self) -> Result<Var<B>> {
        self.mean(&[], false)
    }

    /// Gradient of an extremum reduction: the upstream gradient shared evenly among the
    /// elements equal to the extremum of their group.
    fn extremum_op(&self, value: Tensor<B>, axes: &[isize], op: &'static str) -> Result<Var<B>> {
        let x = self.value();
        let resolved = resolve_axes(op, axes, self.rank())?;
        let axes_i: Vec<isize> = resolved.iter().map(|&a| a as isize).collect();
        let kept = kept_dims(self.dims(), &resolved);
        let extremum = value.reshape(kept.as_slice())?;
        Ok(self.unary_op(value, move |g| {
            let hits = x.eq(&extremum)?.to_dtype(x.dtype())?;
            let count = hits.sum(&axes_i, true)?;
            let share = g.reshape(kept.as_slice())?.div(&count)?;
            hits.mul(&share)
        }))
    }

    /// Maximum over `axes` (empty: all); ties share the gradient evenly.
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<Var<B>> {
        let value = self.value().max(axes, keepdim)?;
        self.extremum_op(value, axes, "max")
    }

    /// Minimum over `axes` (empty: all); ties share the gradient evenly.
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Result<Var<B>> {
        let value = self.value().min(axes, keepdim)?;
        self.extremum_op(value, axes, "min")
    }

    /// Variance over `axes` with `correction` subtracted from the count (1: unbiased);
    /// gradient `2 (x - mean) / (count - correction)`.
    pub fn var(&self, axes: &[isize], correction: usize, keepdim: bool) -> Result<Var<B>> {
        let x = self.value();
        let value = x.var(axes, correction, keepdim)?;
        let resolved = resolve_axes("var", axes, self.rank())?;
        let count: usize = resolved.iter().map(|&a| x.dims()[a]).product();
        let denom = count.saturating_sub(correction) as f64;
        let kept = kept_dims(x.dims(), &resolved);
        let axes = axes.to_vec();
        Ok(self.unary_op(value, move |g| {
            let centered = x.sub(&x.mean(&axes, true)?)?;
            centered
                .mul(&g.reshape(kept.as_slice())?)?
                .mul_scalar(2.0 / denom)
        }))
    }

    /// `log(sum(exp(x)))` along `axis`; gradient `softmax(x)` along `axis`.
    pub fn logsumexp(&self, axis: isize, keepdim: bool) -> Result<Var<B>> {
        let x = self.value();
        let value = x.logsumexp(axis, keepdim)?;
        let resolved = resolve_axes("logsumexp", &[axis], self.rank())?;
        let kept = kept_dims(x.dims(), &resolved);
        let lse = value.reshape(kept.as_slice())?;
        Ok(self.unary_op(value, move |g| {
            let weights = x.sub(&lse)?.exp()?;
            weights.mul(&g.reshape(kept.as_slice())?)
        }))
    }
}
