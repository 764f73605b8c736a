//! # backend-example
//!
//! A complete, deliberately simple [`tessera_core::Backend`]: single-threaded, naive loops, no
//! fused kernels. It exists to be copied. `docs/BACKENDS.md` walks through it step by step, and
//! it passes the whole conformance suite of `tessera-conformance` (folder `tests/`), every dtype
//! included:
//!
//! ```ignore
//! // tests/conformance_example.rs of tessera-conformance
//! tessera_conformance::conformance_suite!(tessera_backend_example::ExampleBackend, tessera_backend_example::ExampleBackend::new);
//! ```
//!
//! How it is built (one concept per file):
//!
//! * [`storage`]: the device buffer. Here "device memory" is a host vector per dtype
//!   ([`ExampleStorage`] wraps [`tessera_core::HostData`]); a GPU backend would hold a device
//!   pointer and a length instead.
//! * `strided`: reading a storage through a [`tessera_core::Layout`] (any strides, broadcast
//!   zeros, an offset) into a contiguous vector, and the index arithmetic every kernel shares.
//!   Every kernel first reads its inputs this way, so no kernel ever deals with strides: the
//!   simplest correct way to honour the layout rules.
//! * `floats`: float kernels compute in f64 and round once to the output dtype.
//! * `elementwise`, `reduce`, `matmul`, `indexing`, `memory`: the primitives, each a plain
//!   loop over contiguous data.
//! * [`backend`]: the `Backend` impl, which only dispatches.
//!
//! The composites (softmax, convolution, pooling, concat) keep the default implementations of
//! `tessera_core::composite`, which are written in terms of the primitives.

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod alloc;
pub mod backend;
mod elementwise;
mod floats;
mod indexing;
mod matmul;
mod memory;
mod reduce;
pub mod storage;
mod strided;

pub use backend::ExampleBackend;
pub use storage::ExampleStorage;
