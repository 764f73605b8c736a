//! [`GpuStorage`]: a device buffer holding elements of one dtype, given back to its device's
//! allocator when dropped.

use crate::driver::Driver;
use crate::runtime::Runtime;
use std::fmt;
use std::sync::Arc;
use tessera_core::{BackendStorage, DType};

/// Device memory for `len` elements of one dtype (booleans as bytes), given back to the
/// driver ([`Driver::release`]) when dropped.
pub struct GpuStorage<D: Driver> {
    buffer: Option<D::Buffer>,
    dtype: DType,
    len: usize,
    runtime: Arc<Runtime<D>>,
}

impl<D: Driver> GpuStorage<D> {
    /// Wraps `buffer` (None for an empty storage).
    pub(crate) fn new(
        runtime: Arc<Runtime<D>>,
        buffer: Option<D::Buffer>,
        dtype: DType,
        len: usize,
    ) -> Self {
        GpuStorage {
            buffer,
            dtype,
            len,
            runtime,
        }
    }

    /// The device buffer, or None when the storage is empty.
    pub fn buffer(&self) -> Option<&D::Buffer> {
        self.buffer.as_ref()
    }

    /// The device the buffer belongs to.
    pub fn runtime(&self) -> &Arc<Runtime<D>> {
        &self.runtime
    }

    /// Bytes of the elements.
    pub fn bytes(&self) -> usize {
        self.len * self.dtype.size_in_bytes()
    }
}

impl<D: Driver> BackendStorage for GpuStorage<D> {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl<D: Driver> fmt::Debug for GpuStorage<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GpuStorage")
            .field("dtype", &self.dtype)
            .field("len", &self.len)
            .field("device", &self.runtime.info().to_string())
            .finish()
    }
}

impl<D: Driver> Drop for GpuStorage<D> {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.runtime.driver().release(buffer);
        }
    }
}
