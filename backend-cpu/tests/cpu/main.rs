//! Kernel tests of the CPU backend against naive f64 references written here.
//!
//! Every kernel path is exercised: contiguous, strided (transposed, sliced with a step),
//! broadcast (stride 0), empty, rank 0, special values, and sizes above the parallel threshold.

mod attention;
mod common;
mod conv_pool;
mod elementwise;
mod fused;
mod half;
mod indexing;
mod matmul;
mod memory;
mod perf;
mod reduce;
mod softmax;
