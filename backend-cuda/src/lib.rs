//! # backend-cuda
//!
//! Tessera on NVIDIA GPUs, [`Cuda`]: `tessera_gpu::Gpu<CudaDriver>`. Every op's host-side logic,
//! the [`tessera_core::Backend`] implementation and the caching buffer pool are `gpu-engine`'s,
//! shared with `backend-opencl`; this crate is the CUDA driver under it.
//!
//! * **Devices**: [`Cuda::new`] opens device 0, [`Cuda::select`] device `n`; without a driver
//!   or device both return [`tessera_core::Error::NoDevice`]. What only CUDA knows comes from
//!   the driver: `dev.driver().compute_capability()`, `dev.driver().cublas_library()`.
//! * **Driver** through `cust` 0.3 (initialisation, primary context, one stream per device,
//!   modules) and its raw bindings (memory, copies, launches). `cust` links `libcuda`; where no
//!   driver is installed, `build.rs` generates a link stub (soname `libcuda.so.1`, every `cu*`
//!   function answering `CUDA_ERROR_NO_DEVICE`) so that the crate builds and its tests start and
//!   skip. A binary built against the stub loads the real driver where one is installed.
//! * **Kernels** are the shared sources of [`tessera_gpu::kernels`] (the same as the OpenCL
//!   backend's), compiled at run time by NVRTC (loaded by [`dynamic_library`]) for the device's
//!   architecture and cached per context, or taken from a folder of precompiled images
//!   ([`kernels::KERNELS_DIR_ENV_VAR`]); a compile error carries NVRTC's log. [`kernels`] also
//!   checks every kernel with NVRTC and `ptxas` without a GPU.
//! * **GEMM**: cuBLAS strided-batched (loaded at run time when present; [`GemmEngine::Blas`])
//!   or the shared tiled kernel, chosen per handle (`dev.with_gemm(..)`, [`CudaOptions`]).
//!   f16 and bf16 products go to `cublasGemmStridedBatchedEx` with f32 compute; f32 products
//!   may use TF32 tensor cores when a handle allows it (`dev.with_tf32(true)`,
//!   [`CudaOptions::allow_tf32`], [`TF32_ENV_VAR`]), off by default as in PyTorch.
//! * **Memory and streams**: the engine's caching buffer pool with size classes per device
//!   (on out-of-memory it frees its cache and retries once, then returns
//!   [`tessera_core::Error::OutOfMemory`] naming the bytes); one stream per device and no host
//!   synchronisation between ops, only on read-back. An error raised by queued work surfaces at
//!   the next synchronisation, naming the kernels queued since the previous one
//!   ([`LAUNCH_BLOCKING_ENV_VAR`] names it exactly). f64 is supported on every device.
//!
//! * **Interop**: `cuda.driver().raw_stream()`, `cuda.driver().stream_is_idle()`,
//!   [`device_address`] and [`dynamic_library`] (NVIDIA's library search and typed symbol
//!   lookup) let another library queue work on the device's buffers and stream (NCCL in
//!   `tessera-distributed`).
//!
//! The crate's unit tests run the engine with CUDA's options and launch geometry on an OpenCL
//! device (PoCL on the CPU) through `tessera_gpu::testing`, with a host-computed "cuBLAS", so
//! that the CUDA host path is checked on machines without an NVIDIA GPU.
//!
//! ```no_run
//! use tessera_cuda::{Cuda, CudaTensor};
//! # fn main() -> tessera_core::Result<()> {
//! let dev = Cuda::new()?; // Err(NoDevice) without a driver or GPU
//! let a = CudaTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev)?;
//! let b = a.matmul(&a.t()?)?; // queued, not waited for
//! assert_eq!(b.to_vec::<f32>()?, vec![5.0, 11.0, 11.0, 25.0]); // waits here
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod cuda;
pub mod dynamic_library;
#[cfg(test)]
mod emulation;
mod interop;
pub mod kernels;
mod options;

#[cfg(test)]
#[path = "../build/stub_source.rs"]
#[allow(dead_code)]
mod stub_source;

pub use cuda::driver::{Block, CudaDriver};
pub use cuda::driver_error::INSTALL_HINT;
pub use cuda::registry::device_count;
pub use interop::device_address;
pub use options::{CudaOptions, DEFAULT_TILES, GEMM_ENV_VAR, TF32_ENV_VAR, TILES_ENV_VAR};
pub use tessera_gpu::{
    AttentionRoute, GemmEngine, MemoryUsage, RuntimeStats, ATTENTION_ENV_VAR,
    LAUNCH_BLOCKING_ENV_VAR,
};

/// An NVIDIA GPU: the engine over the CUDA driver. Cheap to clone; every handle on one device
/// shares its context, stream, buffer pool, kernel modules and cuBLAS handle.
///
/// Ops queue work on the device's one stream and return at once; only reading data back and
/// [`tessera_core::Backend::synchronize`] wait for the device. Errors raised by queued work (an
/// index out of range, a failed kernel) are reported there, naming the kernels that may have
/// raised them.
pub type Cuda = tessera_gpu::Gpu<CudaDriver>;

/// Device memory of a CUDA tensor (the engine's storage over the CUDA driver).
pub type CudaStorage = tessera_gpu::GpuStorage<CudaDriver>;

/// A tensor on an NVIDIA GPU.
pub type CudaTensor = tessera_core::Tensor<Cuda>;
