//! Defensive checks run at the entry of every primitive: the storage belongs to this device and
//! the layout stays inside it (a kernel reading outside a buffer would be undefined behaviour).

use crate::driver::Driver;
use crate::runtime::Runtime;
use crate::storage::GpuStorage;
use std::sync::Arc;
use tensor_core::{BackendStorage, DType, Error, Layout, Result};

/// Errors unless `storage` lives on `rt` and every element `layout` reaches is inside it.
pub(crate) fn check_operand<D: Driver>(
    op: &'static str,
    rt: &Arc<Runtime<D>>,
    storage: &GpuStorage<D>,
    layout: &Layout,
) -> Result<()> {
    if !Arc::ptr_eq(rt, storage.runtime()) {
        return Err(Error::DeviceMismatch {
            op,
            lhs: rt.info().to_string(),
            rhs: storage.runtime().info().to_string(),
        });
    }
    check_layout(op, layout, storage.len())
}

/// Errors unless every element `layout` reaches lies inside a storage of `len` elements, no
/// stride is negative and every offset fits in an i64 (checked arithmetic throughout).
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
            .filter(|&l| i64::try_from(l).is_ok())
            .ok_or_else(|| bad(format!("layout {layout:?} overflows the address space")))?;
    }
    if last >= len {
        return Err(bad(format!(
            "layout {layout:?} reaches element {last} of a storage of {len} elements"
        )));
    }
    Ok(())
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

/// Errors unless the two storages have the same dtype.
pub(crate) fn check_same_dtype<D: Driver>(
    op: &'static str,
    lhs: &GpuStorage<D>,
    rhs: &GpuStorage<D>,
) -> Result<()> {
    if lhs.dtype() != rhs.dtype() {
        return Err(Error::DTypeMismatch {
            op,
            lhs: lhs.dtype(),
            rhs: rhs.dtype(),
        });
    }
    Ok(())
}

/// Errors unless `storage` has `dtype`.
pub(crate) fn check_dtype<D: Driver>(
    op: &'static str,
    storage: &GpuStorage<D>,
    dtype: DType,
) -> Result<()> {
    if storage.dtype() != dtype {
        return Err(Error::DTypeMismatch {
            op,
            lhs: storage.dtype(),
            rhs: dtype,
        });
    }
    Ok(())
}

/// Errors unless `axis < layout.rank()`.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_reaching_past_the_storage_are_rejected() {
        let l = Layout::contiguous([2, 3]);
        assert!(check_layout("t", &l, 6).is_ok());
        let err = check_layout("t", &l, 5).unwrap_err();
        assert!(err.to_string().contains("reaches element 5"), "{err}");
        assert!(check_layout("t", &Layout::contiguous([0, 3]), 0).is_ok());
    }
}
