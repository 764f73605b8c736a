//! Everything the NCCL communicator takes from `tessera-cuda`, in one place: the CUDA backend
//! type, a tensor's device address, the device's stream, whether it is idle, and NVIDIA's
//! library search. (When the GPU crates change shape, only this file should need to follow.)

use std::ffi::c_void;
use tessera_core::{Result, Tensor};

pub(crate) use tessera_cuda::dynamic_library::{DynamicLibrary, LibrarySpec};
pub use tessera_cuda::Cuda;

/// The device address of `tensor`'s first element (its layout's offset included), after
/// making it contiguous; returns the tensor actually addressed (which must be kept until the
/// work using the address is queued). `None` for an empty tensor.
pub(crate) fn device_address(tensor: &Tensor<Cuda>) -> Result<(Tensor<Cuda>, Option<u64>)> {
    let contiguous = tensor.contiguous()?;
    let Some(base) = tessera_cuda::device_address(contiguous.storage()) else {
        return Ok((contiguous, None));
    };
    let offset = contiguous.layout().offset() * contiguous.dtype().size_in_bytes();
    if contiguous.numel() == 0 {
        return Ok((contiguous, None));
    }
    Ok((contiguous, Some(base + offset as u64)))
}

/// The device's stream (`cudaStream_t`), with its context made current on this thread.
pub(crate) fn stream(device: &Cuda) -> Result<*mut c_void> {
    device.driver().raw_stream()
}

/// Whether all work queued on the device's stream has completed.
pub(crate) fn stream_is_idle(device: &Cuda) -> Result<bool> {
    device.driver().stream_is_idle()
}

/// The CUDA device ordinal of `device`.
pub(crate) fn ordinal(device: &Cuda) -> usize {
    tessera_core::Backend::device(device).ordinal
}

/// A fresh tensor of `like`'s shape and dtype on `device`, for a collective to write into.
pub(crate) fn output_like(like: &Tensor<Cuda>) -> Result<Tensor<Cuda>> {
    like.zeros_like()
}
