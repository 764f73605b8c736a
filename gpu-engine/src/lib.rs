//! # gpu-engine
//!
//! Tessera's device-independent GPU engine: the host-side logic of every op (operand checks,
//! strided views as kernels see them, element-wise maps, tree reductions, indexing with an
//! asynchronous error flag, fused softmax, im2col convolution, counter-based random numbers,
//! batched GEMM through a vendor BLAS or the shared tiled kernel, transfers) written once over a
//! [`Driver`]: a dozen raw device operations (allocate, release, write, read, fill, launch a
//! kernel, synchronise, an optional BLAS GEMM, a description of the device).
//!
//! The kernels are the shared sources of [`tessera_core::kernels`] (OpenCL C, and CUDA C through
//! a dialect prelude); a driver builds each [`ModuleKey`] it is asked to launch from them.
//! `backend-cuda` and `backend-opencl` are both drivers over this crate.
//!
//! ## Adding a GPU-like backend
//!
//! 1. Implement [`Driver`] for your device (see its documentation for what each method must
//!    do: one in-order queue, only `read` and `synchronize` wait).
//! 2. Wrap it: [`Runtime::new`] gives the per-device state (keep one per device and process so
//!    that tensors of different handles can meet); [`Gpu::new`] a handle with [`GemmOptions`].
//! 3. Define your backend type holding a [`Gpu`] (method `fn gpu(&self) -> &Gpu<YourDriver>`)
//!    and a storage type implementing [`StorageOf`], then invoke [`impl_gpu_backend!`] to get
//!    the whole [`tessera_core::Backend`] contract.
//!
//! What the device did is counted in [`RuntimeStats`]; errors raised by queued work surface at
//! the next read-back or synchronisation, naming the kernels queued since the previous one
//! ([`LAUNCH_BLOCKING_ENV_VAR`] names it exactly).

#![warn(missing_docs)]

mod backend_impl;
mod checks;
mod counters;
mod driver;
mod error_flag;
mod gemm;
mod gpu;
mod launch_log;
mod ops;
mod runtime;
mod storage;
pub mod tuning;
mod view;

pub use counters::RuntimeStats;
pub use driver::{
    BlasGemm, BlasOperand, BlasTranspose, Driver, DriverArg, DriverInfo, Launch, ModuleKey,
};
pub use gemm::{GemmConfig, GemmEngine, GemmKernel, GemmOptions};
pub use gpu::{Gpu, StorageOf};
pub use launch_log::LAUNCH_BLOCKING_ENV_VAR;
pub use runtime::Runtime;
pub use storage::GpuStorage;
pub use view::View;

/// What [`impl_gpu_backend!`] expands to refers to; not part of the API.
#[doc(hidden)]
pub mod __private {
    pub use crate::ops::attention::{backward as attention_backward, forward as attention_forward};
    pub use crate::ops::conv::{conv2d, conv2d_backward_weight};
    pub use crate::ops::softmax::RowOp;
}
