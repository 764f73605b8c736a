//! Shared validation of index tensors (`index_select`, `gather`, `scatter_add`).

use crate::CpuStorage;
use tessera_core::{BackendStorage, DType, Error, Layout, Result};

/// The `i64` elements of an index storage, or a dtype error naming `op`.
pub(crate) fn index_values<'a>(op: &'static str, indices: &'a CpuStorage) -> Result<&'a [i64]> {
    indices.as_i64_slice().ok_or(Error::DTypeMismatch {
        op,
        lhs: indices.dtype(),
        rhs: DType::I64,
    })
}

/// `index` as a position in a dimension of `size`, or [`Error::IndexOutOfRange`].
#[inline]
pub(crate) fn checked_index(op: &'static str, index: i64, size: usize) -> Result<usize> {
    match usize::try_from(index) {
        Ok(i) if i < size => Ok(i),
        _ => Err(Error::IndexOutOfRange { op, index, size }),
    }
}

/// The strides of `layout` with `axis` set to 0: the positions of `[.., 0, ..]` along `axis`.
pub(crate) fn strides_without_axis(layout: &Layout, axis: usize) -> Vec<isize> {
    let mut strides = layout.strides().to_vec();
    strides[axis] = 0;
    strides
}
