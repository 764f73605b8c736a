//! The NVIDIA side: the CUDA [`driver::CudaDriver`] (context, stream, memory, launches), the
//! run-time loaders of NVRTC ([`nvrtc`]) and cuBLAS ([`cublas`]) and
//! the device [`registry`].

pub(crate) mod cublas;
pub(crate) mod driver;
pub(crate) mod driver_error;
pub(crate) mod memset;
pub(crate) mod nvrtc;
pub(crate) mod registry;
