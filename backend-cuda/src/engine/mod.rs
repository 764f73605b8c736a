//! The backend's device-independent half: the primitives written once over a [`driver::Driver`] (the
//! handful of raw device operations), so that the same host-side logic drives CUDA and, in this
//! crate's tests, an OpenCL device.
//!
//! * [`driver`]: the [`driver::Driver`] trait and what passes through it (kernel arguments, launches,
//!   BLAS calls).
//! * [`runtime`]: per-device state over a driver: memory, launches, the error flag, the log of
//!   queued kernels, counters.
//! * [`gpu`]: a handle (runtime + options) with every primitive at the storage level;
//!   [`backend_impl`] turns such a handle into a `tensor_core::Backend`.
//! * [`ops`]: the primitives themselves; [`view`]: strided operands as kernels see them.

pub(crate) mod backend_impl;
pub(crate) mod checks;
pub(crate) mod counters;
pub(crate) mod driver;
pub(crate) mod error_flag;
pub(crate) mod gpu;
pub(crate) mod launch_log;
pub(crate) mod ops;
pub(crate) mod runtime;
pub(crate) mod storage;
pub(crate) mod view;
