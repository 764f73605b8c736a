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

pub mod attention;
pub mod backend;
pub mod composite;
pub mod dtype;
pub mod error;
pub mod kernels;
pub mod layout;
mod layout_checks;
pub mod ops;
pub mod random;
pub mod shape;
pub mod tensor;

pub use attention::{
    AttentionDropout, AttentionGrads, AttentionOptions, AttentionOutput, AttentionParams,
};
pub use backend::{Backend, BackendStorage, Conv2dParams, Device, HostData, Pool2dParams};
pub use dtype::{DType, Element, FloatElement};
pub use error::{Error, Result};
pub use layout::{Layout, StridedOffsets};
pub use ops::{ArgReduceOp, AssignMode, BinaryOp, CmpOp, Distribution, ReduceOp, UnaryOp};
pub use random::Generator;
pub use shape::Shape;
pub use tensor::Tensor;
