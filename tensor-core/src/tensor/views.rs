//! Views: new layouts over the same storage, plus `contiguous` and copying `reshape`.

use super::{check_output, Tensor};
use crate::{Backend, BackendStorage, Error, Layout, Result, Shape};

impl<B: Backend> Tensor<B> {
    /// A contiguous tensor with the same elements: `self` when already contiguous, a copy
    /// otherwise.
    pub fn contiguous(&self) -> Result<Self> {
        if self.is_contiguous() {
            return Ok(self.clone());
        }
        check_output("contiguous", self.shape(), self.dtype())?;
        let storage = self.backend.copy_strided(self.operand("contiguous")?)?;
        Ok(Self::from_output(
            &self.backend,
            storage,
            self.shape().clone(),
        ))
    }

    /// These elements, contiguous, in a storage of their own size: a view of a larger storage
    /// (a slice, a narrowed share of a flat vector) is copied, so that the rest of that storage
    /// is freed once nothing else holds it; a tensor that is its whole storage already is
    /// returned as it is. What to keep from a slice of a large tensor for long (where
    /// [`Tensor::contiguous`] would return the slice itself, holding all of its storage).
    ///
    /// ```
    /// # use tessera_core::{Backend, BackendStorage};
    /// # fn check<B: Backend>(dev: &B) -> tessera_core::Result<()> {
    /// use tessera_core::{DType, Tensor};
    /// let large = Tensor::<B>::zeros([1000], DType::F32, dev)?;
    /// let slice = large.narrow(0, 10, 5)?;
    /// assert_eq!(slice.contiguous()?.storage().len(), 1000);
    /// assert_eq!(slice.compact()?.storage().len(), 5);
    /// # Ok(()) }
    /// ```
    pub fn compact(&self) -> Result<Self> {
        if self.is_contiguous() && self.storage.len() == self.numel() {
            return Ok(self.clone());
        }
        check_output("compact", self.shape(), self.dtype())?;
        self.contiguous_copy()
    }

    /// The same elements with a new shape; a view when the strides allow it, a copy otherwise
    /// (like PyTorch's `reshape`). See [`Tensor::reshape_infer`] for an inferred dimension.
    pub fn reshape(&self, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        match self.layout.reshape(&shape)? {
            Some(layout) => Ok(self.with_layout(layout)),
            None => {
                let copy = self.contiguous()?;
                let layout = copy.layout.reshape(&shape)?.ok_or_else(|| Error::Backend {
                    backend: self.backend.name(),
                    op: "reshape",
                    msg: "copy_strided returned a non-contiguous layout".into(),
                })?;
                Ok(copy.with_layout(layout))
            }
        }
    }

    /// Reshape where at most one dimension is `-1`, inferred from the element count.
    pub fn reshape_infer(&self, dims: &[isize]) -> Result<Self> {
        let unknown = dims.iter().filter(|&&d| d == -1).count();
        let bad = dims.iter().any(|&d| d < -1) || unknown > 1;
        // `None` when the known dims overflow: then no tensor has that many elements.
        let known = dims
            .iter()
            .filter(|&&d| d >= 0)
            .try_fold(1usize, |acc, &d| acc.checked_mul(d as usize));
        let inferred = match known {
            Some(k) if unknown == 1 && k > 0 && self.numel() % k == 0 => self.numel() / k,
            _ if unknown == 0 => 0,
            _ => usize::MAX,
        };
        if bad || inferred == usize::MAX {
            return Err(Error::InvalidArgument {
                op: "reshape",
                msg: format!(
                    "cannot infer {dims:?} for a tensor of shape {}",
                    self.shape()
                ),
            });
        }
        let resolved: Vec<usize> = dims
            .iter()
            .map(|&d| if d == -1 { inferred } else { d as usize })
            .collect();
        self.reshape(resolved)
    }

    /// A view with a new shape; an error instead of a copy when the strides don't allow it.
    pub fn view(&self, shape: impl Into<Shape>) -> Result<Self> {
        let shape = shape.into();
        match self.layout.reshape(&shape)? {
            Some(layout) => Ok(self.with_layout(layout)),
            None => Err(Error::InvalidArgument {
                op: "view",
                msg: format!(
                    "a tensor of shape {} with strides {:?} cannot be viewed as {}; use reshape",
                    self.shape(),
                    self.layout.strides(),
                    shape
                ),
            }),
        }
    }

    /// Reorders the axes: output axis `i` is input axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Result<Self> {
        Ok(self.with_layout(self.layout.permute(perm)?))
    }

    /// Swaps two axes (negative counts from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Self> {
        Ok(self.with_layout(self.layout.transpose(a, b)?))
    }

    /// Swaps the last two axes (the matrix transpose of each batch element).
    pub fn t(&self) -> Result<Self> {
        if self.rank() < 2 {
            return Err(Error::InvalidArgument {
                op: "t",
                msg: format!("needs rank >= 2, got shape {}", self.shape()),
            });
        }
        self.transpose(-2, -1)
    }

    /// Broadcasts to `shape` (NumPy rules) as a zero-stride view.
    pub fn broadcast_to(&self, shape: impl Into<Shape>) -> Result<Self> {
        Ok(self.with_layout(self.layout.broadcast_to(&shape.into())?))
    }

    /// Alias of [`Tensor::broadcast_to`] (PyTorch's `expand`).
    pub fn expand(&self, shape: impl Into<Shape>) -> Result<Self> {
        self.broadcast_to(shape)
    }

    /// Elements `start..start + len` along `axis`.
    pub fn narrow(&self, axis: isize, start: usize, len: usize) -> Result<Self> {
        Ok(self.with_layout(self.layout.narrow(axis, start, len)?))
    }

    /// Elements `start, start + step, ...` below `end` along `axis`.
    pub fn slice(&self, axis: isize, start: usize, end: usize, step: usize) -> Result<Self> {
        Ok(self.with_layout(self.layout.slice(axis, start, end, step)?))
    }

    /// Removes `axis`, which must have size 1.
    pub fn squeeze(&self, axis: isize) -> Result<Self> {
        Ok(self.with_layout(self.layout.squeeze(axis)?))
    }

    /// Removes every axis of size 1.
    pub fn squeeze_all(&self) -> Result<Self> {
        let mut layout = self.layout.clone();
        while let Some(axis) = layout.dims().iter().rposition(|&d| d == 1) {
            layout = layout.squeeze(axis as isize)?;
        }
        Ok(self.with_layout(layout))
    }

    /// Inserts an axis of size 1 at `axis` (`0..=rank`, negative counts from the end).
    pub fn unsqueeze(&self, axis: isize) -> Result<Self> {
        Ok(self.with_layout(self.layout.unsqueeze(axis)?))
    }

    /// Merges axes `start..=end` into one (a view when possible).
    pub fn flatten(&self, start: isize, end: isize) -> Result<Self> {
        if self.rank() == 0 {
            return self.reshape([1]);
        }
        let s = self.shape().axis("flatten", start)?;
        let e = self.shape().axis("flatten", end)?;
        if s > e {
            return Err(Error::InvalidArgument {
                op: "flatten",
                msg: format!("start axis {s} is after end axis {e}"),
            });
        }
        let dims = self.dims();
        let mut new_dims = dims[..s].to_vec();
        new_dims.push(dims[s..=e].iter().product());
        new_dims.extend_from_slice(&dims[e + 1..]);
        self.reshape(new_dims)
    }

    /// A view with explicit shape, strides and offset into this tensor's storage, checked to stay
    /// inside it. Used for sliding windows (im2col, pooling); the result may alias elements, so it
    /// must only be read.
    pub fn as_strided(
        &self,
        shape: impl Into<Shape>,
        strides: Vec<isize>,
        offset: usize,
    ) -> Result<Self> {
        use crate::BackendStorage;
        let layout = Layout::strided(shape, strides, offset, self.storage.len())?;
        Ok(self.with_layout(layout))
    }
}
