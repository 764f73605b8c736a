//! Defensive checks run at the entry of every primitive: the storage belongs to this device (the
//! operand types of `tessera_core::operand` guarantee that layouts stay inside storages); and
//! the checked element count of outputs, which no multiplication may wrap.

use crate::driver::Driver;
use crate::runtime::Runtime;
use crate::storage::GpuStorage;
use std::sync::Arc;
use tessera_core::{BackendStorage, DType, Error, Result};

/// Errors unless `storage` lives on `rt` (a kernel given another device's buffer would be
/// undefined behaviour; that its layout fits is the operand type's guarantee).
pub(crate) fn check_device<D: Driver>(
    op: &'static str,
    rt: &Arc<Runtime<D>>,
    storage: &GpuStorage<D>,
) -> Result<()> {
    if !Arc::ptr_eq(rt, storage.runtime()) {
        return Err(Error::DeviceMismatch {
            op,
            lhs: rt.info().to_string(),
            rhs: storage.runtime().info().to_string(),
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

/// The product of `factors` (0 when any is 0): the element count of an output. When it does
/// not fit in a `usize`, [`Error::OutOfMemory`] naming `usize::MAX` bytes: no device holds it.
pub(crate) fn element_count<D: Driver>(
    rt: &Runtime<D>,
    factors: impl IntoIterator<Item = usize>,
) -> Result<usize> {
    let mut count = Some(1usize);
    for factor in factors {
        if factor == 0 {
            return Ok(0);
        }
        count = count.and_then(|c| c.checked_mul(factor));
    }
    count.ok_or_else(|| Error::OutOfMemory {
        device: rt.info().to_string(),
        requested_bytes: usize::MAX,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_driver::FakeDriver;

    #[test]
    fn element_counts_are_checked_and_zero_wins() {
        let rt = Runtime::new(FakeDriver::new(1 << 20, u64::MAX, usize::MAX)).unwrap();
        assert_eq!(element_count(&rt, [3, 4, 5]).unwrap(), 60);
        assert_eq!(element_count(&rt, []).unwrap(), 1);
        assert_eq!(element_count(&rt, [1 << 40, 1 << 40, 0]).unwrap(), 0);
        assert_eq!(
            element_count(&rt, [1 << 40, 1 << 40]).unwrap_err(),
            Error::OutOfMemory {
                device: "fake:0 (fake device)".into(),
                requested_bytes: usize::MAX
            }
        );
    }
}
