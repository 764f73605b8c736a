//! # backend-cpu
//!
//! Tessera's CPU backend, [`Cpu`]: the reference every other backend is checked against, and a
//! fast one.
//!
//! * **Element-wise ops, casts and copies** walk arbitrary strided layouts through a small
//!   strided-iteration engine (`strided`): dimensions that are jointly contiguous across all
//!   operands are merged, size-1 dimensions dropped, and the innermost run is processed by a
//!   monomorphised loop per op (contiguous slices, broadcast scalars or stepped access).
//! * **Reductions** split kept and reduced axes into two plans and pick a slice, row-wise or
//!   strided inner loop; f32 sums are pairwise (see `kernels::reducer`).
//! * **Matrix products** call `matrixmultiply`'s strided sgemm/dgemm once per batch element.
//! * **Parallelism**: outputs above 32768 elements are split across `rayon`'s pool; below that
//!   everything runs on the calling thread.
//! * **Memory**: freed tensor memory stays in the process for the next tensor of that size
//!   (glibc `mallopt` tuning, an explicit opt-in: [`tune_allocator`]).
//!
//! ```
//! use tessera_cpu::{Cpu, CpuTensor};
//! # fn main() -> tessera_core::Result<()> {
//! let a = CpuTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Cpu::new())?;
//! let b = a.matmul(&a.t()?)?;
//! assert_eq!(b.to_vec::<f32>()?, vec![5.0, 11.0, 11.0, 25.0]);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod attention_ops;
mod backend;
mod checks;
mod fused_ops;
mod kernels;
mod malloc_tuning;
mod nn_ops;
mod parallel;
mod storage;
mod strided;

pub use backend::Cpu;
pub use malloc_tuning::{tune_allocator, MALLOC_TUNING_ENV_VAR};
pub use storage::{CpuElement, CpuStorage};

/// A tensor on the CPU backend.
pub type CpuTensor = tessera_core::Tensor<Cpu>;
