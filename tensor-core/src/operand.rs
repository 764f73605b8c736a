//! The operands a [`crate::Backend`] primitive receives: storages with layouts that were checked
//! to fit them, and the groups of operands that travel together (element-wise operands of one
//! shape, an index operand with its axis, the two sides of a matrix product).
//!
//! Each type is built only through its check (`new`), so a backend never re-checks what the
//! type guarantees: every element an [`Operand`] reaches lies inside its storage, its shape is
//! within [`crate::limits`], its strides are non-negative and its offsets fit an `i64`;
//! [`SameShape`] operands share one shape; an index operand's axis is in range and its indices
//! are `I64` of a shape that fits. What remains a backend's job: that a storage lives on its
//! device, the dtypes its kernels take, index *values* (data-dependent), and allocation.
//!
//! ```
//! use tessera_core::operand::{Operand, SameShape};
//! use tessera_core::Layout;
//! # #[derive(Debug)] struct Buf(usize);
//! # impl tessera_core::BackendStorage for Buf {
//! #     fn dtype(&self) -> tessera_core::DType { tessera_core::DType::F32 }
//! #     fn len(&self) -> usize { self.0 }
//! # }
//! let (a, b) = (Buf(6), Buf(3));
//! let (wide, row) = (Layout::contiguous([2, 3]), Layout::contiguous([3]).broadcast_to(&[2, 3].into()).unwrap());
//! let lhs = Operand::new("add", &a, &wide).unwrap();
//! let rhs = Operand::new("add", &b, &row).unwrap();
//! let [x, y] = SameShape::new("add", [lhs, rhs]).unwrap().operands();
//! assert_eq!(x.dims(), y.dims());
//! // A layout reaching past its storage never becomes an operand.
//! assert!(Operand::new("add", &b, &wide).is_err());
//! ```

use crate::{BackendStorage, DType, Error, Layout, Result};

/// A storage and a layout checked to fit it ([`Layout::check_fits`]).
#[derive(Debug)]
pub struct Operand<'a, S> {
    storage: &'a S,
    layout: &'a Layout,
}

impl<S> Clone for Operand<'_, S> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S> Copy for Operand<'_, S> {}

impl<'a, S: BackendStorage> Operand<'a, S> {
    /// `layout` over `storage`, or the error of [`Layout::check_fits`] naming `op`.
    pub fn new(op: &'static str, storage: &'a S, layout: &'a Layout) -> Result<Self> {
        layout.check_fits(op, storage.len())?;
        Ok(Operand { storage, layout })
    }

    /// The storage read.
    pub fn storage(&self) -> &'a S {
        self.storage
    }

    /// The layout of the elements read, inside the storage.
    pub fn layout(&self) -> &'a Layout {
        self.layout
    }

    /// The dtype of the storage.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// The logical shape.
    pub fn dims(&self) -> &'a [usize] {
        self.layout.dims()
    }

    /// The same layout over another storage of at least the same length (a wrapper backend's
    /// inner storage, a widened copy), checked like [`Operand::new`].
    pub fn with_storage<'b, T: BackendStorage>(
        &self,
        op: &'static str,
        storage: &'b T,
    ) -> Result<Operand<'b, T>>
    where
        'a: 'b,
    {
        Operand::new(op, storage, self.layout)
    }
}

/// A storage written in place and a layout checked to fit it (the destination of
/// [`crate::Backend::assign`]).
#[derive(Debug)]
pub struct OperandMut<'a, S> {
    storage: &'a mut S,
    layout: &'a Layout,
}

impl<'a, S: BackendStorage> OperandMut<'a, S> {
    /// `layout` over `storage`, or the error of [`Layout::check_fits`] naming `op`.
    pub fn new(op: &'static str, storage: &'a mut S, layout: &'a Layout) -> Result<Self> {
        layout.check_fits(op, storage.len())?;
        Ok(OperandMut { storage, layout })
    }

    /// The storage written.
    pub fn storage(&mut self) -> &mut S {
        self.storage
    }

    /// The storage and the layout at once (a kernel writes the one through the other).
    pub fn parts(&mut self) -> (&mut S, &Layout) {
        (self.storage, self.layout)
    }

    /// The layout of the elements written, inside the storage.
    pub fn layout(&self) -> &'a Layout {
        self.layout
    }

    /// The dtype of the storage.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// The number of elements of the whole storage.
    pub fn storage_len(&self) -> usize {
        self.storage.len()
    }
}

/// `N` operands of one shape: the inputs of an element-wise primitive, broadcast already (a
/// broadcast dimension has stride 0).
#[derive(Debug)]
pub struct SameShape<'a, S, const N: usize> {
    operands: [Operand<'a, S>; N],
}

impl<S, const N: usize> Clone for SameShape<'_, S, N> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<S, const N: usize> Copy for SameShape<'_, S, N> {}

impl<'a, S: BackendStorage, const N: usize> SameShape<'a, S, N> {
    /// The operands, or [`Error::ShapeMismatch`] naming `op` and the first pair that differs.
    pub fn new(op: &'static str, operands: [Operand<'a, S>; N]) -> Result<Self> {
        if let Some(first) = operands.first() {
            for other in &operands[1..] {
                first.layout.check_same_shape(op, other.layout)?;
            }
        }
        Ok(SameShape { operands })
    }

    /// The operands, in the order given.
    pub fn operands(&self) -> [Operand<'a, S>; N] {
        self.operands
    }

    /// Their shared shape (empty for `N = 0`).
    pub fn dims(&self) -> &'a [usize] {
        self.operands.first().map_or(&[], |o| o.dims())
    }
}

/// The operands of [`crate::Backend::assign`]: a destination and a source of one shape.
#[derive(Debug)]
pub struct Assignment<'a, S> {
    /// The positions written (never two indices on one element: tensor-core guarantees it).
    pub dst: OperandMut<'a, S>,
    /// The values written or added.
    pub src: Operand<'a, S>,
}

impl<'a, S: BackendStorage> Assignment<'a, S> {
    /// The pair, or [`Error::ShapeMismatch`] when the shapes differ.
    pub fn new(op: &'static str, dst: OperandMut<'a, S>, src: Operand<'a, S>) -> Result<Self> {
        dst.layout.check_same_shape(op, src.layout)?;
        Ok(Assignment { dst, src })
    }
}

/// Errors unless `indices` holds `I64` elements.
fn check_index_dtype<S: BackendStorage>(op: &'static str, indices: &Operand<'_, S>) -> Result<()> {
    if indices.dtype() != DType::I64 {
        return Err(Error::DTypeMismatch {
            op,
            lhs: indices.dtype(),
            rhs: DType::I64,
        });
    }
    Ok(())
}

/// The operands of [`crate::Backend::index_select`]: `x`, an axis of it, and rank-1 `I64`
/// indices along it (their values are the backend's to check).
#[derive(Debug)]
pub struct IndexSelect<'a, S> {
    /// The tensor picked from.
    pub x: Operand<'a, S>,
    /// The axis picked along (`< x`'s rank).
    pub axis: usize,
    /// Rank-1 `I64` positions along `axis`.
    pub indices: Operand<'a, S>,
}

impl<'a, S: BackendStorage> IndexSelect<'a, S> {
    /// The operands, checked: axis in range, indices `I64` of rank 1.
    pub fn new(x: Operand<'a, S>, axis: usize, indices: Operand<'a, S>) -> Result<Self> {
        const OP: &str = "index_select";
        x.layout.check_axis(OP, axis)?;
        check_index_dtype(OP, &indices)?;
        if indices.layout.rank() != 1 {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "indices must have rank 1, got shape {}",
                    indices.layout.shape()
                ),
            });
        }
        Ok(IndexSelect { x, axis, indices })
    }

    /// The output shape: `x`'s with `axis` resized to the number of indices.
    pub fn output_dims(&self) -> Vec<usize> {
        let mut dims = self.x.dims().to_vec();
        dims[self.axis] = self.indices.layout.numel();
        dims
    }
}

/// The operands of [`crate::Backend::gather`]: `x`, an axis of it, and `I64` indices of `x`'s
/// rank, no larger than `x` off `axis` (their values are the backend's to check).
#[derive(Debug)]
pub struct Gather<'a, S> {
    /// The tensor read from.
    pub x: Operand<'a, S>,
    /// The axis the indices point along (`< x`'s rank).
    pub axis: usize,
    /// `I64` positions along `axis`; the output has their shape.
    pub indices: Operand<'a, S>,
}

impl<'a, S: BackendStorage> Gather<'a, S> {
    /// The operands, checked: axis in range, indices `I64` that fit `x` off `axis`.
    pub fn new(x: Operand<'a, S>, axis: usize, indices: Operand<'a, S>) -> Result<Self> {
        const OP: &str = "gather";
        x.layout.check_axis(OP, axis)?;
        check_index_dtype(OP, &indices)?;
        x.layout.check_indices_fit(OP, axis, indices.layout)?;
        Ok(Gather { x, axis, indices })
    }
}

/// The operands of [`crate::Backend::scatter_add`]: a `base`, an axis of it, `I64` indices that
/// fit it off `axis`, and a `src` of the indices' shape and the base's dtype.
#[derive(Debug)]
pub struct ScatterAdd<'a, S> {
    /// The tensor added into (not modified: the output is a copy).
    pub base: Operand<'a, S>,
    /// The axis the indices point along (`< base`'s rank).
    pub axis: usize,
    /// `I64` positions along `axis`, of `src`'s shape.
    pub indices: Operand<'a, S>,
    /// The values added.
    pub src: Operand<'a, S>,
}

impl<'a, S: BackendStorage> ScatterAdd<'a, S> {
    /// The operands, checked: axis in range, indices `I64` of `src`'s shape that fit `base` off
    /// `axis`, `src` of `base`'s dtype.
    pub fn new(
        base: Operand<'a, S>,
        axis: usize,
        indices: Operand<'a, S>,
        src: Operand<'a, S>,
    ) -> Result<Self> {
        const OP: &str = "scatter_add";
        base.layout.check_axis(OP, axis)?;
        check_index_dtype(OP, &indices)?;
        indices.layout.check_same_shape(OP, src.layout)?;
        base.layout.check_indices_fit(OP, axis, indices.layout)?;
        if base.dtype() != src.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: base.dtype(),
                rhs: src.dtype(),
            });
        }
        Ok(ScatterAdd {
            base,
            axis,
            indices,
            src,
        })
    }
}

/// The operands of [`crate::Backend::matmul`]: `lhs: [..batch, m, k]` and `rhs: [..batch, k, n]`
/// of rank at least 2 with identical batch dimensions and one dtype.
#[derive(Debug)]
pub struct MatmulOperands<'a, S> {
    /// `[..batch, m, k]`.
    pub lhs: Operand<'a, S>,
    /// `[..batch, k, n]`.
    pub rhs: Operand<'a, S>,
}

impl<'a, S: BackendStorage> MatmulOperands<'a, S> {
    /// The operands, checked: ranks, batch dimensions, inner sizes and dtypes agree.
    pub fn new(lhs: Operand<'a, S>, rhs: Operand<'a, S>) -> Result<Self> {
        const OP: &str = "matmul";
        let (l, r) = (lhs.dims(), rhs.dims());
        let rank = l.len();
        let fits = rank >= 2
            && r.len() == rank
            && l[..rank - 2] == r[..rank - 2]
            && l[rank - 1] == r[rank - 2];
        if !fits {
            return Err(Error::MatmulShape {
                lhs: lhs.layout.shape().clone(),
                rhs: rhs.layout.shape().clone(),
            });
        }
        if lhs.dtype() != rhs.dtype() {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: lhs.dtype(),
                rhs: rhs.dtype(),
            });
        }
        Ok(MatmulOperands { lhs, rhs })
    }

    /// `(batch, m, k, n)`: the product of the batch dimensions and the matrix sizes. The
    /// batch product saturates, which only a batch of zero elements can reach (the layouts are
    /// within the size limits), and a zero among the dimensions gives 0.
    pub fn sizes(&self) -> (usize, usize, usize, usize) {
        let (l, r) = (self.lhs.dims(), self.rhs.dims());
        let rank = l.len();
        let batch = l[..rank - 2]
            .iter()
            .fold(1usize, |acc, &d| acc.saturating_mul(d));
        (batch, l[rank - 2], l[rank - 1], r[rank - 1])
    }

    /// The output shape `[..batch, m, n]`.
    pub fn output_dims(&self) -> Vec<usize> {
        let mut dims = self.lhs.dims().to_vec();
        let rank = dims.len();
        dims[rank - 1] = self.rhs.dims()[rank - 1];
        dims
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Buf(DType, usize);

    impl BackendStorage for Buf {
        fn dtype(&self) -> DType {
            self.0
        }
        fn len(&self) -> usize {
            self.1
        }
    }

    fn f32s(n: usize) -> Buf {
        Buf(DType::F32, n)
    }

    #[test]
    fn an_operand_is_built_only_when_its_layout_fits() {
        let l = Layout::contiguous([2, 3]);
        assert!(Operand::new("t", &f32s(6), &l).is_ok());
        assert!(Operand::new("t", &f32s(5), &l).is_err());
        let mut s = f32s(5);
        assert!(OperandMut::new("t", &mut s, &l).is_err());
    }

    #[test]
    fn groups_check_what_they_promise() {
        let (a, b) = (f32s(6), f32s(6));
        let (l23, l32) = (Layout::contiguous([2, 3]), Layout::contiguous([3, 2]));
        let x = Operand::new("t", &a, &l23).unwrap();
        let y = Operand::new("t", &b, &l32).unwrap();
        assert!(SameShape::new("t", [x, x]).is_ok());
        assert!(matches!(
            SameShape::new("t", [x, y]),
            Err(Error::ShapeMismatch { .. })
        ));
        let m = MatmulOperands::new(x, y).unwrap();
        assert_eq!(m.sizes(), (1, 2, 3, 2));
        assert_eq!(m.output_dims(), vec![2, 2]);
        assert!(MatmulOperands::new(x, x).is_err());

        let idx = Buf(DType::I64, 2);
        let l2 = Layout::contiguous([2]);
        let i = Operand::new("t", &idx, &l2).unwrap();
        assert_eq!(IndexSelect::new(x, 1, i).unwrap().output_dims(), vec![2, 2]);
        assert!(matches!(
            IndexSelect::new(x, 2, i),
            Err(Error::AxisOutOfRange { .. })
        ));
        let floats = Operand::new("t", &a, &l2).unwrap();
        assert!(matches!(
            IndexSelect::new(x, 0, floats),
            Err(Error::DTypeMismatch { .. })
        ));
        assert!(Gather::new(x, 0, i).is_err(), "rank 1 indices for rank 2 x");
        let idx2 = Buf(DType::I64, 6);
        let i2 = Operand::new("t", &idx2, &l23).unwrap();
        assert!(Gather::new(x, 1, i2).is_ok());
        assert!(ScatterAdd::new(x, 1, i2, x).is_ok());
        assert!(ScatterAdd::new(x, 1, i2, y).is_err());
    }
}
