//! Shape ops (views and copies that only move elements) and `to_dtype`.
//!
//! Their gradients move the upstream gradient back: reshape it, permute it with the inverse
//! permutation, sum it over broadcast axes, or place it into zeros at the selected region.

use super::sum_to_dims;
use crate::Var;
use tessera_core::shape::resolve_axis;
use tessera_core::{Backend, DType, Result, Shape, Tensor};

/// The gradient of a `slice(axis, start, .., step)` of an input with `dims`: `grad` placed into
/// zeros at the selected positions.
fn unslice<B: Backend>(
    grad: &Tensor<B>,
    dims: &[usize],
    axis: usize,
    start: usize,
    step: usize,
) -> Result<Tensor<B>> {
    let mut zeros = Tensor::zeros(dims, grad.dtype(), grad.backend())?;
    if step == 1 {
        // In place: the zeros are fresh and this function's own.
        zeros.narrow_assign_in_place(axis as isize, start, grad)?;
        return Ok(zeros);
    }
    // Positions `start + i * step` along `axis`, broadcast over the other axes.
    let len = grad.dims()[axis];
    let positions: Vec<f64> = (0..len).map(|i| (start + i * step) as f64).collect();
    let mut index_dims = vec![1; grad.rank()];
    index_dims[axis] = len;
    let indices = Tensor::from_f64_values(&positions, index_dims, DType::I64, grad.backend())?
        .broadcast_to(grad.shape())?;
    zeros.scatter_add(axis as isize, &indices, grad)
}

impl<B: Backend> Var<B> {
    /// Records a view whose gradient is the upstream gradient reshaped to this Var's shape.
    fn reshaped_view(&self, value: Tensor<B>) -> Var<B> {
        let dims = self.dims().to_vec();
        self.unary_op(value, move |g| g.reshape(dims.as_slice()))
    }

    /// The same elements with a new shape (a view when possible).
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Var<B>> {
        Ok(self.reshaped_view(self.value().reshape(shape)?))
    }

    /// Reshape with at most one dimension given as `-1` (inferred).
    pub fn reshape_infer(&self, dims: &[isize]) -> Result<Var<B>> {
        Ok(self.reshaped_view(self.value().reshape_infer(dims)?))
    }

    /// A view with a new shape; an error when the strides would require a copy.
    pub fn view(&self, shape: impl Into<Shape>) -> Result<Var<B>> {
        Ok(self.reshaped_view(self.value().view(shape)?))
    }

    /// Merges axes `start..=end` into one.
    pub fn flatten(&self, start: isize, end: isize) -> Result<Var<B>> {
        Ok(self.reshaped_view(self.value().flatten(start, end)?))
    }

    /// Removes `axis`, which must have size 1.
    pub fn squeeze(&self, axis: isize) -> Result<Var<B>> {
        Ok(self.reshaped_view(self.value().squeeze(axis)?))
    }

    /// Removes every axis of size 1.
    pub fn squeeze_all(&self) -> Result<Var<B>> {
        Ok(self.reshaped_view(self.value().squeeze_all()?))
    }

    /// Inserts an axis of size 1 at `axis`.
    pub fn unsqueeze(&self, axis: isize) -> Result<Var<B>> {
        Ok(self.reshaped_view(self.value().unsqueeze(axis)?))
    }

    /// A contiguous copy (or the same tensor when already contiguous).
    pub fn contiguous(&self) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().contiguous()?, |g| Ok(g.clone())))
    }

    /// Reorders the axes: output axis `i` is input axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Result<Var<B>> {
        let value = self.value().permute(perm)?;
        let mut inverse = vec![0; perm.len()];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i;
        }
        Ok(self.unary_op(value, move |g| g.permute(&inverse)))
    }

    /// Swaps two axes.
    pub fn transpose(&self, a: isize, b: isize) -> Result<Var<B>> {
        let value = self.value().transpose(a, b)?;
        Ok(self.unary_op(value, move |g| g.transpose(a, b)))
    }

    /// Swaps the last two axes.
    pub fn t(&self) -> Result<Var<B>> {
        Ok(self.unary_op(self.value().t()?, |g| g.t()))
    }

    /// Broadcasts to `shape`; the gradient is summed over the broadcast axes.
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Result<Var<B>> {
        let value = self.value().broadcast_to(shape)?;
        let dims = self.dims().to_vec();
        Ok(self.unary_op(value, move |g| sum_to_dims(g, &dims)))
    }

    /// Alias of [`Var::broadcast_to`].
    pub fn expand(&self, shape: impl Into<Shape>) -> Result<Var<B>> {
        self.broadcast_to(shape)
    }

    /// Elements `start..start + len` along `axis`.
    pub fn narrow(&self, axis: isize, start: usize, len: usize) -> Result<Var<B>> {
        // Saturating, as `Tensor::narrow`: an end past `usize::MAX` is past every axis.
        self.slice(axis, start, start.saturating_add(len), 1)
    }

    /// Elements `start, start + step, ...` below `end` along `axis`.
    pub fn slice(&self, axis: isize, start: usize, end: usize, step: usize) -> Result<Var<B>> {
        let value = self.value().slice(axis, start, end, step)?;
        let axis = resolve_axis("slice", axis, self.rank())?;
        let dims = self.dims().to_vec();
        Ok(self.unary_op(value, move |g| unslice(g, &dims, axis, start, step)))
    }

    /// Converts to `dtype`. Between float dtypes the gradient is converted back; a conversion to
    /// a non-float dtype is not differentiable and returns a constant.
    pub fn to_dtype(&self, dtype: DType) -> Result<Var<B>> {
        let value = self.value().to_dtype(dtype)?;
        if !dtype.is_float() {
            return Ok(Var::constant(value));
        }
        let source = self.dtype();
        Ok(self.unary_op(value, move |g| g.to_dtype(source)))
    }
}
