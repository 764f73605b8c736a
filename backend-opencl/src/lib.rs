//! # backend-opencl
//!
//! Tessera on any OpenCL 1.2+ device, [`OpenCl`]: GPUs, and CPUs through PoCL (Debian's
//! `pocl-opencl-icd`), which is how CI proves the kernels' logic without a GPU.
//!
//! * **Devices**: [`list_devices`] lists every device of every platform; [`OpenCl::new`] takes
//!   the one named by `TESSERA_OPENCL_DEVICE=platform:device` (or an ordinal), else the first
//!   GPU, else the first device. Without an OpenCL runtime every constructor returns
//!   [`tessera_core::Error::NoDevice`] saying what to install; the crate links nothing at build
//!   time (`libOpenCL.so.1` is loaded at run time through `opencl3`'s `dynamic` feature).
//! * **Kernels** are the shared sources of [`tessera_core::kernels`], written once for OpenCL C
//!   and CUDA C; each program is built at run time once per dtype and cached per device.
//!   f32, i64 and bool everywhere, f64 where the device has `cl_khr_fp64`.
//! * **Speed**: buffers come from a size-class pool (no buffer creation per op in steady state);
//!   one in-order queue per device, and no host synchronisation between ops: only reading back
//!   waits ([`OpenCl::stats`] counts the waits). Matrix products use a tiled GEMM with local
//!   memory and register blocking whose tile sizes are timed once per device and cached on disk
//!   ([`autotune`]); reductions are trees in local memory; softmax over the last axis is fused;
//!   conv2d (and its weight gradient) is one im2col kernel plus the GEMM.
//! * **Errors** from asynchronous work, i.e. out-of-range indices in `index_select`, `gather` and
//!   `scatter_add`, are recorded on the device and reported by the next read-back or
//!   [`tessera_core::Backend::synchronize`] as [`tessera_core::Error::IndexOutOfRange`].
//!
//! Every op's host-side logic is `gpu-engine`'s, shared with `backend-cuda`; this crate is the
//! OpenCL driver under it (device selection, context, queue, program cache, buffer pool,
//! autotuned GEMM tiles).
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
mod backend;
mod buffer;
mod counters;
mod device;
mod driver;
mod error;
mod pool;
mod storage;
#[cfg(feature = "testing")]
pub mod testing;

pub use backend::OpenCl;
pub use counters::RuntimeStats;
pub use device::{list_devices, DeviceInfo, DeviceKind, DeviceSelector, DEVICE_ENV_VAR};
pub use error::INSTALL_HINT;
pub use storage::OpenClStorage;

/// A tensor on an OpenCL device.
pub type OpenClTensor = tessera_core::Tensor<OpenCl>;
