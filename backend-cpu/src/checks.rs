//! Defensive checks run at the entry of every primitive.
//!
//! `tensor-core` validates shapes and dtypes before calling a backend, but the [`tensor_core::Backend`]
//! methods are public, so a caller may hand the CPU backend a layout that does not fit its storage.
//! These checks turn such requests into errors; after them every kernel may index its slices
//! without further bounds reasoning (the indexing stays checked, so a bug would panic, never
//! read out of bounds).

use crate::CpuStorage;
use tensor_core::{BackendStorage, DType, Error, Layout, Result};

/// Errors unless every element `layout` reaches lies inside a storage of `len` elements and no
/// stride is negative. Uses checked arithmetic, so absurd layouts cannot overflow.
pub(crate) fn check_layout(op: &'static str, layout: &Layout, len: usize) -> Result<()> {
    let bad = |why: String| Error::InvalidArgument { op, msg: why };
    if layout.strides().len() != layout.rank() {
        return Err(bad(format!(
            "layout {layout:?} has a stride count unlike its rank"
        )));
    }
    if let Some(s) = layout.strides().iter().find(|&&s| s < 0) {
        return Err(bad(format!("negative stride {s} in layout {layout:?}")));
    }
    if layout.numel() == 0 {
        return Ok(());
    }
    let mut last = layout.offset();
    for (&d, &s) in layout.dims().iter().zip(layout.strides()) {
        last = (d - 1)
            .checked_mul(s as usize)
            .and_then(|extent| last.checked_add(extent))
            .ok_or_else(|| bad(format!("layout {layout:?} overflows the address space")))?;
    }
    if last >= len {
        return Err(bad(format!(
            "layout {layout:?} reaches element {last} of a storage of {len} elements"
        )));
    }
    Ok(())
}

/// [`check_layout`] against the length of `storage`.
pub(crate) fn check_storage(op: &'static str, storage: &CpuStorage, layout: &Layout) -> Result<()> {
    check_layout(op, layout, storage.len())
}

/// Errors unless the two layouts have the same shape.
pub(crate) fn check_same_shape(op: &'static str, lhs: &Layout, rhs: &Layout) -> Result<()> {
    if lhs.shape() != rhs.shape() {
        return Err(Error::ShapeMismatch {
            op,
            lhs: lhs.shape().clone(),
            rhs: rhs.shape().clone(),
        });
    }
    Ok(())
}

/// Errors unless `axis` is a valid axis of `layout`.
pub(crate) fn check_axis(op: &'static str, layout: &Layout, axis: usize) -> Result<()> {
    if axis >= layout.rank() {
        return Err(Error::AxisOutOfRange {
            op,
            axis: axis as isize,
            rank: layout.rank(),
        });
    }
    Ok(())
}

/// The error for two storages whose dtypes should match but do not.
pub(crate) fn dtype_mismatch(op: &'static str, lhs: &CpuStorage, rhs: &CpuStorage) -> Error {
    Error::DTypeMismatch {
        op,
        lhs: lhs.dtype(),
        rhs: rhs.dtype(),
    }
}

/// The error for an op that is not defined for `dtype`.
pub(crate) fn unsupported(op: &'static str, dtype: DType) -> Error {
    Error::UnsupportedDType { op, dtype }
}
