//! The naive f64 reference: a tiny n-d array ([`RefArray`]) and, for every op of `tensor-core`,
//! a straightforward implementation written from the definition with nested index loops.
//!
//! Nothing here calls `tensor-core`'s computations; only its op tags and parameter structs
//! (`UnaryOp`, `Conv2dParams`, ...) are reused so a check can name the op it compares.

mod array;
pub mod attention;
pub mod conv;
pub mod elementwise;
pub mod fused;
pub mod indexing;
pub mod linalg;
pub mod pool;
pub mod reduce;
pub mod softmax;
pub mod views;

pub use array::{all_indices, for_each_index, numel, unravel, RefArray};
