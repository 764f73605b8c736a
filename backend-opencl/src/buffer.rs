//! [`DeviceBuffer`]: an owned `cl_mem` released on drop.

use crate::error::cl_error_as;
use opencl3::memory::{create_buffer, release_mem_object, CL_MEM_READ_WRITE};
use opencl3::types::{cl_context, cl_mem};
use std::ptr;
use tessera_core::Result;

/// A read-write device buffer, released when dropped: the
/// buffer type of [`crate::driver::OpenClDriver`].
#[derive(Debug)]
pub struct DeviceBuffer {
    mem: cl_mem,
}

// SAFETY: a cl_mem is a reference-counted handle that OpenCL allows any thread to use; this type
// only ever passes it to OpenCL calls and releases it once, on drop.
unsafe impl Send for DeviceBuffer {}
// SAFETY: as above; `&DeviceBuffer` only exposes the handle value.
unsafe impl Sync for DeviceBuffer {}

impl DeviceBuffer {
    /// Allocates `bytes` (> 0) bytes in `context` for a driver describing itself as `backend`
    /// (named by the errors).
    pub(crate) fn new(context: cl_context, bytes: usize, backend: &'static str) -> Result<Self> {
        // SAFETY: `context` is a live context (the runtime owns it for longer than any buffer);
        // no host pointer is passed, so OpenCL allocates and owns the memory.
        let mem = unsafe { create_buffer(context, CL_MEM_READ_WRITE, bytes, ptr::null_mut()) }
            .map_err(|code| cl_error_as(backend, "allocate", code, Some(bytes)))?;
        Ok(DeviceBuffer { mem })
    }

    /// The OpenCL handle.
    pub(crate) fn mem(&self) -> cl_mem {
        self.mem
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        // SAFETY: `mem` was created by `new` and is released exactly once. OpenCL defers the
        // actual free until queued commands that use the buffer have completed. A failure here
        // cannot be reported from `drop` and leaves at worst a leaked buffer.
        let _ = unsafe { release_mem_object(self.mem) };
    }
}
