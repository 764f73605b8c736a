//! The portable path: `matrixmultiply`'s strided sgemm/dgemm (its own packing and AVX2/FMA or
//! SSE kernels, chosen at run time), single-threaded; every CPU has it.

use super::{GemmElement, MatMut, MatRef};

/// `C = A·B + beta·C` through `matrixmultiply` on this thread.
///
/// # Safety
/// As [`super::try_gemm`].
pub(super) unsafe fn gemm<T: GemmElement>(
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) {
    // SAFETY: forwarded from the caller's contract.
    unsafe {
        T::portable_gemm(
            m, k, n, a.ptr, a.rs, a.cs, b.ptr, b.rs, b.cs, beta, c.ptr, c.rs, c.cs,
        )
    }
}
