//! # autograd
//!
//! Reverse-mode automatic differentiation for Tessera, generic over any
//! [`tessera_core::Backend`].
//!
//! * [`Var<B>`] wraps a [`tessera_core::Tensor`] and records, for every op applied to it, a
//!   backward rule and its parents. Every differentiable `Tensor` op exists on `Var` with the same
//!   name and arguments (unary maps, broadcasting binary ops, views, reductions, softmax family,
//!   matmul, conv2d, pooling, indexing, cat/stack, `to_dtype`) and returns `Result<Var<B>>`;
//!   `std::ops` work on `&Var` too.
//! * [`Var::backward`] propagates from a scalar into the leaves' [`Var::grad`], where gradients
//!   accumulate until [`Var::zero_grad`]. The graph is freed afterwards unless
//!   [`Var::backward_retain`] is used.
//! * [`Var::set_grad_ready_hook`] runs a function on a leaf as soon as its gradient of a pass
//!   is complete (data-parallel wrappers reduce gradients during the pass with it).
//! * [`no_grad`] switches recording off for a block (evaluation, optimizer updates).
//! * [`gradcheck`] compares analytic gradients with finite differences.
//!
//! Non-differentiable results (argmax, comparisons, masks) are computed on plain tensors taken
//! from [`Var::value`].
//!
//! ```
//! # fn demo<B: tessera_core::Backend>(dev: &B) -> tessera_core::Result<()> {
//! use tessera_autograd::{no_grad, Var};
//! use tessera_core::{DType, Tensor};
//! let w = Var::param(Tensor::randn([3, 2], DType::F64, 0, dev)?);
//! let x = Var::constant(Tensor::ones([4, 3], DType::F64, dev)?);
//! let loss = x.matmul(&w)?.tanh()?.square()?.mean_all()?;
//! loss.backward()?;
//! let step = w.grad().unwrap().mul_scalar(0.1)?;
//! no_grad(|| w.set_value(w.value().sub(&step)?))?;
//! w.zero_grad();
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod grad_hook;
mod grad_mode;
mod gradcheck;
mod graph;
mod ops;
mod std_ops;
mod var;

pub use grad_hook::GradReadyHook;
pub use grad_mode::{enable_grad, is_grad_enabled, no_grad, GradModeGuard};
pub use gradcheck::{gradcheck, GradcheckOptions, GradcheckReport};
pub use graph::BackwardFn;
pub use var::Var;
