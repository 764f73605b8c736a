//! Indexing: index_select, gather, scatter_add, concatenation and stacking.

use super::{check_output, Tensor};
use crate::dispatch;
use crate::operand::{Gather, IndexSelect, ScatterAdd};
use crate::{Backend, DType, Error, Result, Shape};

impl<B: Backend> Tensor<B> {
    fn check_indices(&self, op: &'static str, indices: &Self) -> Result<()> {
        self.check_same_device(op, indices)?;
        if indices.dtype() != DType::I64 {
            return Err(Error::DTypeMismatch {
                op,
                lhs: indices.dtype(),
                rhs: DType::I64,
            });
        }
        Ok(())
    }

    /// Selects slices along `axis` by a rank-1 `i64` index tensor.
    pub fn index_select(&self, axis: isize, indices: &Self) -> Result<Self> {
        const OP: &str = "index_select";
        let a = self.shape().axis(OP, axis)?;
        self.check_indices(OP, indices)?;
        if indices.rank() != 1 {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!("indices must have rank 1, got shape {}", indices.shape()),
            });
        }
        let mut dims = self.dims().to_vec();
        dims[a] = indices.numel();
        let dims = Shape::new(dims);
        check_output(OP, &dims, self.dtype())?;
        let xs = IndexSelect::new(self.operand(OP)?, a, indices.operand(OP)?)?;
        let storage = dispatch::index_select(&self.backend, xs)?;
        Ok(Self::from_output(&self.backend, storage, dims))
    }

    /// Checks that `indices` has this rank and is no larger than `self` off `axis`.
    fn check_gather_shape(&self, op: &'static str, a: usize, indices: &Self) -> Result<()> {
        let fits = indices.rank() == self.rank()
            && indices
                .dims()
                .iter()
                .zip(self.dims())
                .enumerate()
                .all(|(d, (&i, &s))| d == a || i <= s);
        if !fits {
            return Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "indices of shape {} do not fit a tensor of shape {} off axis {a}",
                    indices.shape(),
                    self.shape()
                ),
            });
        }
        Ok(())
    }

    /// PyTorch's `gather`: along `axis`, picks `self[.., indices[..], ..]`; the result has the
    /// shape of `indices`.
    pub fn gather(&self, axis: isize, indices: &Self) -> Result<Self> {
        const OP: &str = "gather";
        let a = self.shape().axis(OP, axis)?;
        self.check_indices(OP, indices)?;
        self.check_gather_shape(OP, a, indices)?;
        check_output(OP, indices.shape(), self.dtype())?;
        let xs = Gather::new(self.operand(OP)?, a, indices.operand(OP)?)?;
        let storage = dispatch::gather(&self.backend, xs)?;
        Ok(Self::from_output(
            &self.backend,
            storage,
            indices.shape().clone(),
        ))
    }

    /// PyTorch's `scatter_add`: a copy of `self` with `src` added at the positions `indices`
    /// names along `axis`. `indices` and `src` have one shape.
    pub fn scatter_add(&self, axis: isize, indices: &Self, src: &Self) -> Result<Self> {
        const OP: &str = "scatter_add";
        let a = self.shape().axis(OP, axis)?;
        self.check_indices(OP, indices)?;
        self.check_same_device(OP, src)?;
        self.check_same_dtype(OP, src)?;
        if indices.shape() != src.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: indices.shape().clone(),
                rhs: src.shape().clone(),
            });
        }
        self.check_gather_shape(OP, a, indices)?;
        check_output(OP, self.shape(), self.dtype())?;
        let xs = ScatterAdd::new(self.operand(OP)?, a, indices.operand(OP)?, src.operand(OP)?)?;
        let storage = dispatch::scatter_add(&self.backend, xs)?;
        Ok(Self::from_output(
            &self.backend,
            storage,
            self.shape().clone(),
        ))
    }

    /// Joins tensors along `axis`: same rank, dtype and device, equal sizes off `axis`.
    pub fn cat(tensors: &[&Self], axis: isize) -> Result<Self> {
        const OP: &str = "cat";
        let first = tensors.first().ok_or_else(|| Error::InvalidArgument {
            op: OP,
            msg: "needs at least one tensor".into(),
        })?;
        let a = first.shape().axis(OP, axis)?;
        concat_shape(tensors, a)?;
        first.backend.concat(tensors, a)
    }

    /// Stacks same-shaped tensors along a new axis.
    pub fn stack(tensors: &[&Self], axis: isize) -> Result<Self> {
        let first = tensors.first().ok_or_else(|| Error::InvalidArgument {
            op: "stack",
            msg: "needs at least one tensor".into(),
        })?;
        for t in &tensors[1..] {
            if t.shape() != first.shape() {
                return Err(Error::ShapeMismatch {
                    op: "stack",
                    lhs: first.shape().clone(),
                    rhs: t.shape().clone(),
                });
            }
        }
        let unsqueezed = tensors
            .iter()
            .map(|t| t.unsqueeze(axis))
            .collect::<Result<Vec<_>>>()?;
        Self::cat(&unsqueezed.iter().collect::<Vec<_>>(), axis)
    }

    /// A copy of `self` with `src` written (or added, with `accumulate`) into the region of
    /// `axis` starting at `start`. `src` must match `self` off `axis`.
    pub fn narrow_assign(
        &self,
        axis: isize,
        start: usize,
        src: &Self,
        accumulate: bool,
    ) -> Result<Self> {
        const OP: &str = "narrow_assign";
        let a = self.shape().axis(OP, axis)?;
        self.check_same_device(OP, src)?;
        self.check_same_dtype(OP, src)?;
        let region = self.narrow(a as isize, start, src.dims().get(a).copied().unwrap_or(0))?;
        if region.shape() != src.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: region.shape().clone(),
                rhs: src.shape().clone(),
            });
        }
        check_output(OP, self.shape(), self.dtype())?;
        let mut out = self.contiguous_copy()?;
        let dst_layout = out.layout.narrow(a as isize, start, src.dims()[a])?;
        out.assign_into(&dst_layout, src, accumulate)?;
        Ok(out)
    }

    /// A fresh contiguous copy that owns its storage (safe to write into).
    pub(crate) fn contiguous_copy(&self) -> Result<Self> {
        let storage = self.backend.copy_strided(self.operand("copy")?)?;
        Ok(Self::from_output(
            &self.backend,
            storage,
            self.shape().clone(),
        ))
    }

    /// Writes `src` into the elements `dst_layout` selects of this tensor's storage, which must be
    /// uniquely owned (a fresh output) and `dst_layout` injective. Crate-internal building block
    /// of concat, padding and the col2im-style gradients.
    pub(crate) fn assign_into(
        &mut self,
        dst_layout: &crate::Layout,
        src: &Self,
        accumulate: bool,
    ) -> Result<()> {
        let mode = if accumulate {
            crate::AssignMode::Accumulate
        } else {
            crate::AssignMode::Overwrite
        };
        let storage =
            std::sync::Arc::get_mut(&mut self.storage).ok_or_else(|| Error::InvalidArgument {
                op: "assign",
                msg: "destination storage is shared".into(),
            })?;
        dispatch::assign(
            &self.backend,
            (storage, dst_layout),
            (&src.storage, &src.layout),
            mode,
        )
    }
}

/// The shape of `tensors` joined along `axis`, after checking what [`Tensor::cat`] requires
/// of them: at least one tensor, `axis` an axis of the first, the same device, rank and dtype,
/// equal sizes off `axis`, and a result within [`crate::limits`].
pub fn concat_shape<B: Backend>(tensors: &[&Tensor<B>], axis: usize) -> Result<Shape> {
    const OP: &str = "cat";
    let first = tensors.first().ok_or_else(|| Error::InvalidArgument {
        op: OP,
        msg: "needs at least one tensor".into(),
    })?;
    first.layout().check_axis(OP, axis)?;
    let mut joined = 0usize;
    for t in tensors {
        first.check_same_device(OP, t)?;
        first.check_same_dtype(OP, t)?;
        let same_elsewhere = t.rank() == first.rank()
            && t.dims()
                .iter()
                .zip(first.dims())
                .enumerate()
                .all(|(d, (x, y))| d == axis || x == y);
        if !same_elsewhere {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: first.shape().clone(),
                rhs: t.shape().clone(),
            });
        }
        joined = joined.saturating_add(t.dims()[axis]);
    }
    let mut dims = first.dims().to_vec();
    dims[axis] = joined;
    let shape = Shape::new(dims);
    check_output(OP, &shape, first.dtype())?;
    Ok(shape)
}
