//! # tensor-core
//!
//! The foundation of Tessera: shapes and layouts, dtypes, the error type, the [`Backend`]
//! contract and the backend-generic [`Tensor`] API.
//!
//! ## The model
//! A [`Tensor<B>`] is a reference-counted device storage (`B::Storage`), a [`Layout`] (shape,
//! strides, offset) and the backend value `B` it lives on. Views (reshape, permute, transpose,
//! broadcast, narrow, slice, squeeze, unsqueeze, flatten) only build a new layout over the same
//! storage. Every other op validates its inputs here (shapes, dtypes, devices, axes) and then calls
//! one backend primitive, so a backend never sees an ill-formed request and a user always gets a
//! typed [`Error`] naming the problem, never a panic.
//!
//! ## What is guaranteed
//! For every public function of this crate, called with any arguments, in debug and release
//! builds alike (no check relies on overflow checks or debug assertions):
//! * **No undefined behaviour**: the crate has no `unsafe` code.
//! * **No panic**: bad input is a typed [`Error`] naming the problem: a shape, dtype or device
//!   mismatch, an axis or index out of range, an invalid argument (a stride of 0, a window that
//!   does not fit, a gradient whose `grad_out` no forward pass produces), or
//!   [`Error::SizeOverflow`] for a shape beyond the size limits of [`limits`] (rank above 64,
//!   more than `isize::MAX` elements or bytes). Shape and layout arithmetic is checked or
//!   saturating everywhere, so no size wraps.
//! * **No abort on allocation**: host-side buffers of tensor size (`arange`, `linspace`,
//!   conversions to host vectors) are allocated fallibly, giving [`Error::OutOfMemory`];
//!   device allocations are the backend's (the CPU and example backends allocate fallibly).
//! * **Every `Ok` tensor obeys its invariants**: its shape is within the limits, its element
//!   count exact, its layout inside its storage (checked again for layouts from outside by
//!   [`Tensor::from_parts`] and [`Layout::strided`]).
//!
//! Not covered: Rust's own small allocations (shapes, error messages, bookkeeping of the size
//! of a rank) abort on exhaustion like any Rust program; a backend that breaks the contract of
//! [`backend`] can return wrong results; requests that are valid but enormous (a broadcast view
//! of 2^40 elements reduced to a sum) take the time they take.
//!
//! ## Writing a backend
//! Implement [`Backend`]: its required methods are the primitives (memory, cast, unary, binary,
//! compare, where, reduce, arg-reduce, matmul, index_select, gather, scatter_add, random); each
//! receives storages plus layouts that may be non-contiguous and returns a fresh contiguous
//! storage. The provided methods (concat, softmax, log_softmax, logsumexp, conv2d, pooling and
//! their gradients) have default implementations in [`composite`] and may be overridden with
//! faster kernels. See the [`backend`] module for the exact rules.
//!
//! ```
//! # fn demo<B: tessera_core::Backend>(dev: &B) -> tessera_core::Result<()> {
//! use tessera_core::{Tensor, DType};
//! let a = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], dev)?;
//! let b = a.transpose(0, 1)?;            // a view: [3, 2], no copy
//! let c = a.matmul(&b)?;                 // [2, 2]
//! let s = (&c + 1.0)?.sum_all()?;        // scalar tensor
//! assert_eq!(s.dtype(), DType::F32);
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

pub mod attention;
pub mod backend;
pub mod composite;
pub mod cross_entropy;
pub mod direct;
pub mod dispatch;
pub mod dtype;
pub mod error;
pub mod layer_norm;
pub mod layout;
mod layout_checks;
pub mod limits;
pub mod matmul_bias;
pub mod operand;
pub mod ops;
pub mod random;
pub mod shape;
pub mod tensor;

pub use attention::{
    AttentionDropout, AttentionGrads, AttentionInputs, AttentionOptions, AttentionOutput,
    AttentionParams,
};
pub use backend::{Backend, BackendStorage, Conv2dParams, Device, HostData, Pool2dParams};
pub use dtype::{DType, Element, FloatElement, UnknownDType};
pub use error::{CommFailure, Error, Result};
/// The 16-bit float element types (from the `half` crate), so that users need not depend on it.
pub use half::{bf16, f16};
pub use layer_norm::{LayerNormGrads, LayerNormOutput};
pub use layout::{Layout, StridedOffsets};
pub use ops::{ArgReduceOp, AssignMode, BinaryOp, CmpOp, Distribution, ReduceOp, UnaryOp};
pub use random::Generator;
pub use shape::Shape;
pub use tensor::Tensor;
