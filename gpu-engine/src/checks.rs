//! Defensive checks run at the entry of every primitive: the storage belongs to this device and
//! the layout stays inside it (a kernel reading outside a buffer would be undefined behaviour).

use crate::driver::Driver;
use crate::runtime::Runtime;
use crate::storage::GpuStorage;
use std::sync::Arc;
use tessera_core::{BackendStorage, DType, Error, Layout, Result};

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
    layout.check_fits(op, storage.len())
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
