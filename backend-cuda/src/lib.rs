//! # backend-cuda
//!
//! Tessera on NVIDIA GPUs, [`Cuda`]:
//!
//! * **Driver** through `cust` 0.3 (initialisation, primary context, one stream per device,
//!   modules) and its raw bindings (memory, copies, launches). `cust` links `libcuda`; where no
//!   driver is installed, `build.rs` generates a link stub (soname `libcuda.so.1`, every `cu*`
//!   function answering `CUDA_ERROR_NO_DEVICE`) so that the crate builds and its tests start and
//!   skip. A binary built against the stub loads the real driver where one is installed.
//!   Without a driver or device, [`Cuda::new`] returns [`tessera_core::Error::NoDevice`].
//! * **Kernels** are the shared sources of [`tessera_core::kernels`] (the same as the OpenCL
//!   backend's), compiled at run time by NVRTC (loaded with `libloading`) for the device's
//!   architecture and cached per context, or taken from a folder of precompiled images
//!   ([`kernels::KERNELS_DIR_ENV_VAR`]); a compile error carries NVRTC's log. [`kernels`] also
//!   checks every kernel with NVRTC and `ptxas` without a GPU.
//! * **GEMM**: cuBLAS strided-batched (loaded at run time when present; [`GemmEngine::Blas`])
//!   or the shared tiled kernel, chosen per handle ([`GemmEngine`], [`CudaOptions`]).
//! * **Memory and streams**: a caching allocator with size classes per device (on
//!   out-of-memory it frees its cache and retries once, then returns
//!   [`tessera_core::Error::OutOfMemory`]); one stream per device and no host synchronisation
//!   between ops, only on read-back. An error raised by queued work surfaces at the next
//!   synchronisation, naming the kernels queued since the previous one
//!   ([`LAUNCH_BLOCKING_ENV_VAR`] names it exactly).
//!
//! The host-side logic of every op is `gpu-engine`'s, written once over its `Driver` trait and
//! shared with `backend-opencl`; this crate is the CUDA driver under it. Its tests run the
//! engine with CUDA's options and launch geometry on `backend-opencl`'s driver (PoCL on the CPU)
//! so that the CUDA path is checked on machines without an NVIDIA GPU.
//!
//! ```no_run
//! use tessera_cuda::{Cuda, CudaTensor};
//! # fn main() -> tessera_core::Result<()> {
//! let dev = Cuda::new(0)?; // Err(NoDevice) without a driver or GPU
//! let a = CudaTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev)?;
//! let b = a.matmul(&a.t()?)?; // queued, not waited for
//! assert_eq!(b.to_vec::<f32>()?, vec![5.0, 11.0, 11.0, 25.0]); // waits here
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod backend;
mod cuda;
#[cfg(test)]
mod emulation;
pub mod kernels;
mod options;
mod storage;

#[cfg(test)]
#[path = "../build/stub_source.rs"]
#[allow(dead_code)]
mod stub_source;

pub use backend::{Cuda, MemoryUsage};
pub use cuda::driver_error::INSTALL_HINT;
pub use cuda::registry::device_count;
pub use options::{CudaOptions, DEFAULT_TILES, GEMM_ENV_VAR, TILES_ENV_VAR};
pub use storage::CudaStorage;
pub use tessera_gpu::{GemmEngine, RuntimeStats, LAUNCH_BLOCKING_ENV_VAR};

/// A tensor on an NVIDIA GPU.
pub type CudaTensor = tessera_core::Tensor<Cuda>;
