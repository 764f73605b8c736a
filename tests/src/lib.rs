//! # Tessera conformance harness
//!
//! Checks a [`tensor_core::Backend`] against an independent naive f64 reference:
//!
//! * [`reference`]: a tiny n-d array ([`reference::RefArray`]) and every op of `tensor-core`
//!   written from its definition with nested index loops;
//! * [`strategies`]: proptest strategies for shapes (zero-size dimensions included), values
//!   (NaN, infinities and `-0.0` at a controlled rate) and layout recipes that build transposed,
//!   sliced and broadcast tensors;
//! * [`compare`]: element-wise comparison with documented per-dtype tolerances, returning a
//!   description of the first mismatch instead of panicking, so that failures shrink;
//! * [`checks`]: one module per op family with its case strategy and a `check`/`run` pair that
//!   is generic over the backend;
//! * [`runner`]: runs a property with proptest's default 256 cases.
//!
//! The integration tests in `tests/` instantiate every family for `backend_cpu::Cpu`; another
//! backend runs the same `checks::*::run` functions with its own device value.

pub mod checks;
pub mod compare;
pub mod reference;
pub mod runner;
pub mod strategies;

pub use compare::{assert_close, assert_close_scaled, Tolerance};
pub use reference::RefArray;
pub use runner::check_property;
pub use strategies::{TensorCase, ValueProfile};
