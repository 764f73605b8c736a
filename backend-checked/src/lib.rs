//! # backend-checked
//!
//! [`Checked<B, R>`](Checked): a Tessera backend that runs every op on a backend under test `B`
//! and on a reference `R` (normally `tessera_cpu::Cpu`), compares the two results with the op's
//! [`Tolerance`], and returns a typed [`tessera_core::Error::Divergence`] at the first
//! disagreement. It turns "my loss curve looks wrong on the GPU" into "`matmul` on inputs
//! `[64, 784], [784, 512]` is off by 3e-2 at element [3, 17]".
//!
//! The tolerances it applies are defined in [`tolerance`], shared with the conformance harness
//! of the `tests` crate, which checks backends op by op on random inputs.
//!
//! This is its own crate, not a module of `tests`, because the `train` command (in `nn`) offers
//! checked backends: `nn` depends on this crate and only on `tensor-core`, not on the test
//! harness and its proptest dependency.

#![warn(missing_docs)]

mod attention;
mod backend;
mod checked;
mod composites;
mod cross_entropy;
mod divergence;
mod layer_norm;
mod matmul_bias;
mod settle;
pub mod storage;
pub mod tolerance;

pub use checked::Checked;
pub use storage::CheckedStorage;
pub use tolerance::Tolerance;
