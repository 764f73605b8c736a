//! [`OpenClStorage`]: a pooled device buffer holding elements of one dtype.

use crate::buffer::DeviceBuffer;
use crate::runtime::Runtime;
use opencl3::types::cl_mem;
use std::fmt;
use std::sync::Arc;
use tensor_core::{BackendStorage, DType};

/// Device memory for `len` elements of one dtype (booleans as bytes). Dropping it returns the
/// buffer to its device's pool.
pub struct OpenClStorage {
    buffer: Option<DeviceBuffer>,
    dtype: DType,
    len: usize,
    runtime: Arc<Runtime>,
}

impl OpenClStorage {
    /// Wraps `buffer` (None for an empty storage).
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        buffer: Option<DeviceBuffer>,
        dtype: DType,
        len: usize,
    ) -> Self {
        OpenClStorage {
            buffer,
            dtype,
            len,
            runtime,
        }
    }

    /// The OpenCL handle, or None when the storage is empty.
    pub(crate) fn mem(&self) -> Option<cl_mem> {
        self.buffer.as_ref().map(DeviceBuffer::mem)
    }

    /// The runtime (device) the buffer belongs to.
    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.runtime
    }
}

impl BackendStorage for OpenClStorage {
    fn dtype(&self) -> DType {
        self.dtype
    }

    fn len(&self) -> usize {
        self.len
    }
}

impl fmt::Debug for OpenClStorage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenClStorage")
            .field("dtype", &self.dtype)
            .field("len", &self.len)
            .field("device", &self.runtime.info.ordinal)
            .finish()
    }
}

impl Drop for OpenClStorage {
    fn drop(&mut self) {
        if let Some(buffer) = self.buffer.take() {
            self.runtime.recycle(buffer);
        }
    }
}
