//! # gpu-engine
//!
//! Tessera's device-independent GPU engine: [`Gpu<D>`](Gpu), the [`tessera_core::Backend`] of
//! every GPU backend, written once over a [`Driver`]: a dozen raw device operations (allocate,
//! free, write, read, fill, launch a kernel, synchronise, an optional BLAS GEMM, a description
//! of the device). The engine holds the host-side logic of every op (operand checks, strided
//! views as kernels see them, element-wise maps, tree reductions, indexing with an asynchronous
//! error flag, fused softmax, im2col convolution, counter-based random numbers, batched GEMM
//! through a vendor BLAS or the shared tiled kernel, transfers) and the caching buffer pool
//! every device allocates through.
//!
//! The backends are type aliases, in the style of burn's `type Cuda = CubeBackend<CudaRuntime>`:
//! `tessera_opencl::OpenCl` is `Gpu<OpenClDriver>` and `tessera_cuda::Cuda` is
//! `Gpu<CudaDriver>`; their constructors ([`Gpu::new`], [`Gpu::select`],
//! [`Gpu::from_ordinal`]) come from the driver's [`DeviceRegistry`], what only one driver knows
//! from [`Gpu::driver`].
//!
//! The kernels are the shared sources of [`kernels`] (OpenCL C, and CUDA C through a dialect
//! prelude); a driver builds each [`ModuleKey`] it is asked to launch from them.
//!
//! ## Adding a GPU-like backend
//!
//! 1. Implement [`Driver`] for your device (see its documentation for what each method must
//!    do: one in-order queue, only `read` and `synchronize` wait, `allocate` answers
//!    `OutOfMemory` when the device is full).
//! 2. Implement [`DeviceRegistry`]: how a device is designated and the one [`Runtime`] per
//!    device and process (so that tensors of different handles can meet in one op).
//! 3. `pub type MyGpu = tessera_gpu::Gpu<MyDriver>;` is the whole [`tessera_core::Backend`]
//!    contract, with `MyGpu::new()`, `MyGpu::select(..)` and `MyGpu::from_ordinal(n)`. Run the
//!    conformance suite of the `tests` crate on it.
//!
//! Without a registry (a test driver), [`Runtime::new`] and [`Gpu::from_runtime`] make a handle
//! directly. `tessera_opencl::testing::emulator` (its `testing` feature) runs the engine under
//! any driver's description (block sizes, grid limits, backend name) on an OpenCL device such
//! as PoCL, with the host-computed vendor BLAS of this crate's `testing` feature: how
//! `backend-cuda` checks its host path without a GPU.
//!
//! What the device did is counted in [`RuntimeStats`]; errors raised by queued work surface at
//! the next read-back or synchronisation, naming the kernels queued since the previous one
//! ([`LAUNCH_BLOCKING_ENV_VAR`] names it exactly).

#![warn(missing_docs)]

mod attention_route;
mod backend;
mod checks;
mod counters;
mod driver;
mod error_flag;
#[cfg(test)]
mod fake_driver;
mod gemm;
mod gpu;
pub mod kernels;
mod launch_log;
mod ops;
mod pool;
mod registry;
mod runtime;
mod storage;
#[cfg(feature = "testing")]
pub mod testing;
pub mod tuning;
mod view;

// `kernels/mod.rs` names the dtype as `crate::DType` (it moved here from tensor-core).
use tessera_core::DType;

pub use attention_route::{AttentionRoute, ATTENTION_ENV_VAR, DEFAULT_CHUNK_SCORES};
pub use counters::RuntimeStats;
pub use driver::{
    BlasGemm, BlasOperand, BlasTranspose, Driver, DriverArg, DriverInfo, Launch, ModuleKey,
};
pub use gemm::{GemmConfig, GemmEngine, GemmKernel, GemmOptions};
pub use gpu::Gpu;
pub use launch_log::LAUNCH_BLOCKING_ENV_VAR;
pub use pool::MemoryUsage;
pub use registry::DeviceRegistry;
pub use runtime::{has_kernels, Runtime};
pub use storage::GpuStorage;
pub use view::View;
