//! Indexing ops: `index_select`, `gather`, `scatter_add`, `narrow_assign`, `cat` and `stack`.
//! Indices are plain `i64` tensors (not differentiable); the gradient of a selection adds the
//! upstream gradient back at the selected positions with `scatter_add`, so repeated indices
//! accumulate.

use super::grad_if;
use crate::Var;
use tessera_core::shape::resolve_axis;
use tessera_core::{Backend, Error, Result, Tensor};

impl<B: Backend> Var<B> {
    /// Selects slices along `axis` by a rank-1 `i64` index tensor.
    pub fn index_select(&self, axis: isize, indices: &Tensor<B>) -> Result<Var<B>> {
        let x = self.value();
        let value = x.index_select(axis, indices)?;
        let axis = resolve_axis("index_select", axis, self.rank())?;
        let dims = self.dims().to_vec();
        let indices = indices.clone();
        Ok(self.unary_op(value, move |g| {
            // The index of every element of `g` along `axis`, broadcast over the other axes.
            let mut index_dims = vec![1; g.rank()];
            index_dims[axis] = indices.numel();
            let spread = indices
                .reshape(index_dims.as_slice())?
                .broadcast_to(g.shape())?;
            Tensor::zeros(dims.as_slice(), g.dtype(), g.backend())?.scatter_add(
                axis as isize,
                &spread,
                g,
            )
        }))
    }

    /// PyTorch's `gather` along `axis`: the result has the shape of `indices`.
    pub fn gather(&self, axis: isize, indices: &Tensor<B>) -> Result<Var<B>> {
        let x = self.value();
        let value = x.gather(axis, indices)?;
        let dims = self.dims().to_vec();
        let indices = indices.clone();
        Ok(self.unary_op(value, move |g| {
            Tensor::zeros(dims.as_slice(), g.dtype(), g.backend())?.scatter_add(axis, &indices, g)
        }))
    }

    /// PyTorch's `scatter_add`: a copy of `self` with `src` added at the positions `indices`
    /// names along `axis`. Gradients: the upstream gradient for `self`, its `gather` at `indices`
    /// for `src`.
    pub fn scatter_add(&self, axis: isize, indices: &Tensor<B>, src: &Var<B>) -> Result<Var<B>> {
        let value = self.value().scatter_add(axis, indices, &src.value())?;
        let need = [self.requires_grad(), src.requires_grad()];
        let indices = indices.clone();
        Ok(Var::from_op(
            value,
            vec![self.clone(), src.clone()],
            move |g| {
                Ok(vec![
                    grad_if(need[0], || Ok(g.clone()))?,
                    grad_if(need[1], || g.gather(axis, &indices))?,
                ])
            },
        ))
    }

    /// A copy of `self` with `src` written (or added, with `accumulate`) into the region of
    /// `axis` starting at `start`. Gradients: `src` gets the region of the upstream gradient;
    /// `self` gets the rest (and the region too when accumulating).
    pub fn narrow_assign(
        &self,
        axis: isize,
        start: usize,
        src: &Var<B>,
        accumulate: bool,
    ) -> Result<Var<B>> {
        let value = self
            .value()
            .narrow_assign(axis, start, &src.value(), accumulate)?;
        let need = [self.requires_grad(), src.requires_grad()];
        let len = src.dims()[resolve_axis("narrow_assign", axis, src.rank())?];
        Ok(Var::from_op(
            value,
            vec![self.clone(), src.clone()],
            move |g| {
                let region = g.narrow(axis, start, len)?;
                Ok(vec![
                    grad_if(need[0], || {
                        if accumulate {
                            Ok(g.clone())
                        } else {
                            g.narrow_assign(axis, start, &region.zeros_like()?, false)
                        }
                    })?,
                    grad_if(need[1], || Ok(region.clone()))?,
                ])
            },
        ))
    }

    /// Joins Vars along `axis` (same rank, dtype and device; equal sizes off `axis`); each input
    /// receives its slice of the gradient.
    pub fn cat(vars: &[&Var<B>], axis: isize) -> Result<Var<B>> {
        let values: Vec<Tensor<B>> = vars.iter().map(|v| v.value()).collect();
        let value = Tensor::cat(&values.iter().collect::<Vec<_>>(), axis)?;
        let axis = resolve_axis("cat", axis, value.rank())?;
        let need: Vec<bool> = vars.iter().map(|v| v.requires_grad()).collect();
        let lengths: Vec<usize> = vars.iter().map(|v| v.dims()[axis]).collect();
        let parents = vars.iter().map(|&v| v.clone()).collect();
        Ok(Var::from_op(value, parents, move |g| {
            let mut start = 0;
            let mut grads = Vec::with_capacity(lengths.len());
            for (&len, &needed) in lengths.iter().zip(&need) {
                grads.push(if needed {
                    Some(g.narrow(axis as isize, start, len)?)
                } else {
                    None
                });
                start += len;
            }
            Ok(grads)
        }))
    }

    /// Stacks same-shaped Vars along a new axis.
    pub fn stack(vars: &[&Var<B>], axis: isize) -> Result<Var<B>> {
        let first = vars.first().ok_or_else(|| Error::InvalidArgument {
            op: "stack",
            msg: "needs at least one Var".into(),
        })?;
        if let Some(other) = vars.iter().find(|v| v.shape() != first.shape()) {
            return Err(Error::ShapeMismatch {
                op: "stack",
                lhs: first.shape().clone(),
                rhs: other.shape().clone(),
            });
        }
        let unsqueezed = vars
            .iter()
            .map(|v| v.unsqueeze(axis))
            .collect::<Result<Vec<_>>>()?;
        Var::cat(&unsqueezed.iter().collect::<Vec<_>>(), axis)
    }
}
