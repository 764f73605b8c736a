//! # backend-opencl
//!
//! Tessera on any OpenCL 1.2+ device, [`OpenCl`]: GPUs, and CPUs through PoCL (Debian's
//! `pocl-opencl-icd`), which is how CI proves the kernels' logic without a GPU.
//!
//! [`OpenCl`] is `tessera_gpu::Gpu<OpenClDriver>`: every op's host-side logic, the
//! [`tessera_core::Backend`] implementation and the caching buffer pool are `gpu-engine`'s,
//! shared with `backend-cuda`; this crate is the OpenCL driver under it (device selection,
//! context, queue, program cache, autotuned GEMM tiles).
//!
//! * **Devices**: [`list_devices`] lists every device of every platform; [`OpenCl::new`] takes
//!   the one named by `TESSERA_OPENCL_DEVICE=platform:device` (or an ordinal), else the first
//!   GPU, else the first device; [`OpenCl::select`] takes a [`DeviceSelector`] or an ordinal.
//!   What the device is: `dev.driver().device_info()` ([`DeviceInfo`]). Without an OpenCL
//!   runtime every constructor returns [`tessera_core::Error::NoDevice`] saying what to install;
//!   the crate links nothing at build time (`libOpenCL.so.1` is loaded at run time through
//!   `opencl3`'s `dynamic` feature).
//! * **Kernels** are the shared sources of [`tessera_gpu::kernels`], written once for OpenCL C
//!   and CUDA C; each program is built at run time once per dtype and cached per device.
//!   f32, i64 and bool everywhere, f64 where the device has `cl_khr_fp64` (with a non-zero
//!   `CL_DEVICE_DOUBLE_FP_CONFIG`): [`tessera_core::Backend::supports_dtype`] says which.
//! * **Speed**: buffers come from the engine's caching pool (no buffer creation per op in
//!   steady state; on out-of-memory the cache is freed and the allocation retried once, then
//!   [`tessera_core::Error::OutOfMemory`] names the bytes); one in-order queue per device, and
//!   no host synchronisation between ops: only reading back waits ([`OpenCl::stats`] counts the
//!   waits). Matrix products of f32 and f64 go to CLBlast when it is installed (Debian's
//!   `libclblast1`, loaded at run time; [`clblast`]; `TESSERA_OPENCL_GEMM=auto|clblast|tiled`,
//!   `dev.with_gemm(GemmEngine::..)`; `dev.driver().gemm_route(dev.options().engine)` says
//!   which route a handle takes), and otherwise (and for 16-bit dtypes) to a tiled GEMM with
//!   local memory and register blocking whose tile sizes are timed once per device and cached
//!   on disk ([`autotune`]); reductions are
//!   trees in local memory; softmax over the last axis is fused; conv2d (and its weight
//!   gradient) is one im2col kernel plus the GEMM.
//! * **Testing other drivers**: with the `testing` feature, [`testing::emulator`] is this
//!   driver under another driver's description (block sizes, grid limits, backend name) with an
//!   optional host-computed vendor BLAS: how `backend-cuda` checks its host path without a GPU.
//! * **Errors** from asynchronous work, i.e. out-of-range indices in `index_select`, `gather` and
//!   `scatter_add`, are recorded on the device and reported by the next read-back or
//!   [`tessera_core::Backend::synchronize`] as [`tessera_core::Error::IndexOutOfRange`].
//!
//! ```no_run
//! use tessera_opencl::{OpenCl, OpenClTensor};
//! # fn main() -> tessera_core::Result<()> {
//! let dev = OpenCl::new()?;
//! let a = OpenClTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev)?;
//! let b = a.matmul(&a.t()?)?; // enqueued, not waited for
//! assert_eq!(b.to_vec::<f32>()?, vec![5.0, 11.0, 11.0, 25.0]); // waits here
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod autotune;
mod buffer;
pub mod clblast;
mod device;
mod driver;
mod error;
mod registry;
#[cfg(feature = "testing")]
pub mod testing;

pub use buffer::DeviceBuffer;
pub use device::{list_devices, DeviceInfo, DeviceKind, DeviceSelector, DEVICE_ENV_VAR};
pub use driver::OpenClDriver;
pub use error::INSTALL_HINT;
pub use tessera_gpu::{AttentionRoute, GemmEngine, MemoryUsage, RuntimeStats, ATTENTION_ENV_VAR};

/// An OpenCL device: the engine over the OpenCL driver. Cheap to clone; every handle on one
/// device shares its context, queue, program cache and buffer pool.
///
/// Ops enqueue kernels on the device's in-order queue and return at once; only reading data
/// back ([`tessera_core::Tensor::to_vec`] and friends) and
/// [`tessera_core::Backend::synchronize`] wait for the device.
pub type OpenCl = tessera_gpu::Gpu<OpenClDriver>;

/// Device memory of an OpenCL tensor (the engine's storage over the OpenCL driver).
pub type OpenClStorage = tessera_gpu::GpuStorage<OpenClDriver>;

/// A tensor on an OpenCL device.
pub type OpenClTensor = tessera_core::Tensor<OpenCl>;
