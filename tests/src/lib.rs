//! # Tessera conformance harness
//!
//! Checks any [`tessera_core::Backend`], in this workspace or in another crate, with one line:
//!
//! ```ignore
//! tessera_conformance::conformance_suite!(MyBackend, || MyBackend::new());
//! ```
//!
//! generates a test per op family that checks every op on every declared dtype against an
//! independent naive f64 reference, on random shapes (zero-size dimensions, rank 0),
//! non-contiguous and broadcast layouts and special values, plus gradients through autograd and
//! metamorphic laws. See `docs/BACKENDS.md` for the guide; the pieces:
//!
//! * [`suite`]: the families, the capability declaration ([`suite::Capabilities`]), the
//!   coverage matrix ([`suite::Coverage`]) and the macro [`conformance_suite!`];
//! * [`checks`]: one module per op family with its case strategy and a `check`/`run` pair that
//!   is generic over the backend (including [`checks::gradients`] and
//!   [`checks::metamorphic`]);
//! * [`reference`]: a tiny n-d array ([`reference::RefArray`]) and every op of `tensor-core`
//!   written from its definition with nested index loops;
//! * [`strategies`]: proptest strategies for shapes (zero-size dimensions included), values
//!   (NaN, infinities and `-0.0` at a controlled rate) and layout recipes that build transposed,
//!   sliced and broadcast tensors;
//! * [`compare`]: element-wise comparison with documented per-op, per-dtype tolerances
//!   ([`Tolerance`], shared with `tessera_checked::Checked`), returning a description of the
//!   first mismatch instead of panicking, so that failures shrink;
//! * [`runner`], [`seed`], [`minimize`]: running a property (256 cases or `PROPTEST_CASES`) from
//!   a reproducible seed, persisting failing seeds, and shrinking a failure to a minimal case.
//!
//! The integration tests in `tests/` run the suite on `tessera_cpu::Cpu`, on the example
//! backend, through `Checked<Cpu, Cpu>`, from an out-of-tree crate, and on planted bugs.

pub mod checks;
pub mod compare;
pub mod minimize;
pub mod reference;
pub mod runner;
pub mod seed;
pub mod strategies;
pub mod suite;

pub use compare::{assert_close, assert_close_scaled, Tolerance};
pub use reference::RefArray;
pub use runner::check_property;
pub use strategies::{TensorCase, ValueProfile};
