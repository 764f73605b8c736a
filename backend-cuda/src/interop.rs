//! What a library that queues its own work on a [`Cuda`] device needs (NCCL, in
//! `tessera-distributed`): a storage's device address, the device's stream with its context
//! current and whether that stream is idle (NVIDIA's libraries are loaded with
//! [`crate::dynamic_library`]). Work queued on the stream is ordered with Tessera's own ops,
//! and the caching allocator only reuses a freed buffer for work queued later on the same
//! stream, so a buffer read or written by such work stays valid until that work has run.

use crate::cuda::driver::{Block, CudaDriver};
use crate::cuda::driver_error::check;
use crate::CudaStorage;
use cust::sys as cu;
use std::ffi::c_void;
use tessera_core::Result;

impl CudaDriver {
    /// Makes the device's context current on the calling thread and returns the `CUstream`
    /// every op of this device is queued on (as `cudaStream_t`, the same handle). Reach it
    /// from a backend value with `cuda.driver().raw_stream()`.
    pub fn raw_stream(&self) -> Result<*mut c_void> {
        self.activate()?;
        Ok(self.stream().cast())
    }

    /// Whether every command queued on the device's stream so far has completed
    /// (`cuStreamQuery`); never waits. An error of queued work is returned as `Err`.
    pub fn stream_is_idle(&self) -> Result<bool> {
        self.activate()?;
        // SAFETY: the stream is live for as long as the driver, which `self` keeps.
        let code = unsafe { cu::cuStreamQuery(self.stream()) };
        if code == cu::cudaError_enum::CUDA_ERROR_NOT_READY {
            return Ok(false);
        }
        check("stream query", code).map(|()| true)
    }
}

impl Block {
    /// The device address of the block's first byte.
    pub fn address(&self) -> u64 {
        self.address
    }
}

/// The device address of a storage's first element, or `None` for an empty storage. The
/// memory holds [`tessera_core::BackendStorage::len`] elements and stays allocated while the
/// storage (or work queued before its release) exists.
pub fn device_address(storage: &CudaStorage) -> Option<u64> {
    storage.buffer().map(Block::address)
}
