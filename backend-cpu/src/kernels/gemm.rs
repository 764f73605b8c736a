//! One strided GEMM `C = A·B + beta·C` on `matrixmultiply`'s single-threaded kernels, and its
//! rayon-parallel form that splits C into blocks of rows or columns.
//!
//! `matrixmultiply` is built without its own thread pool: every thread in this backend is a
//! rayon worker, so a GEMM never competes with another pool for the cores (two pools on two
//! cores made each wait for the other's spinning threads). A large product is cut into a few
//! blocks along the dimension whose split repacks less (columns re-pack A, rows re-pack B), and
//! the blocks run as rayon tasks; a small one runs on the calling thread.

use rayon::prelude::*;

/// Multiply-adds below which a product runs on the calling thread.
const PARALLEL_MACS: usize = 1 << 18;
/// Smallest block side (rows or columns) handed to one task.
const MIN_BLOCK: usize = 32;

/// An element type `matrixmultiply` multiplies.
pub(crate) trait GemmElement:
    crate::alloc::Zeroable + Send + Sync + Default + 'static
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;

    /// `C = A B + beta C` for an `m x k` A and a `k x n` B with the given strides, on this
    /// thread.
    ///
    /// # Safety
    /// Every element `a + i*rsa + p*csa` (`i < m`, `p < k`), likewise for `b`, and
    /// `c + i*rsc + j*csc` must be in bounds of live allocations; `c` must not alias `a`/`b`
    /// and no other thread may touch the elements of `c` meanwhile.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        beta: Self,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

macro_rules! impl_gemm_element {
    ($t:ty, $f:path) => {
        impl GemmElement for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            unsafe fn gemm(
                m: usize,
                k: usize,
                n: usize,
                a: *const $t,
                rsa: isize,
                csa: isize,
                b: *const $t,
                rsb: isize,
                csb: isize,
                beta: $t,
                c: *mut $t,
                rsc: isize,
                csc: isize,
            ) {
                // SAFETY: forwarded from the caller's contract.
                unsafe { $f(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
        }
    };
}

impl_gemm_element!(f32, matrixmultiply::sgemm);
impl_gemm_element!(f64, matrixmultiply::dgemm);

/// A strided matrix operand: base pointer and (row, column) strides in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatRef<T> {
    /// The element at row 0, column 0.
    pub(crate) ptr: *const T,
    /// Step between rows.
    pub(crate) rs: isize,
    /// Step between columns.
    pub(crate) cs: isize,
}

// SAFETY: a `MatRef` is only read through, and only inside the GEMM calls whose callers
// guarantee the memory stays alive and unwritten for their duration.
unsafe impl<T: Sync> Send for MatRef<T> {}
// SAFETY: as above.
unsafe impl<T: Sync> Sync for MatRef<T> {}

/// The writable output of a GEMM: base pointer and strides.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MatMut<T> {
    /// The element at row 0, column 0.
    pub(crate) ptr: *mut T,
    /// Step between rows.
    pub(crate) rs: isize,
    /// Step between columns.
    pub(crate) cs: isize,
}

// SAFETY: the parallel GEMM hands each task a disjoint block of the output.
unsafe impl<T: Send> Send for MatMut<T> {}
// SAFETY: as above.
unsafe impl<T: Send> Sync for MatMut<T> {}

impl<T> MatRef<T> {
    /// A row-major `[rows, cols]` matrix starting at `data[0]`.
    pub(crate) fn row_major(data: &[T], cols: usize) -> Self {
        MatRef {
            ptr: data.as_ptr(),
            rs: cols as isize,
            cs: 1,
        }
    }

    /// The transpose (strides swapped), without moving data.
    pub(crate) fn t(self) -> Self {
        MatRef {
            ptr: self.ptr,
            rs: self.cs,
            cs: self.rs,
        }
    }
}

impl<T> MatMut<T> {
    /// A row-major `[rows, cols]` output starting at `data[0]`.
    pub(crate) fn row_major(data: &mut [T], cols: usize) -> Self {
        MatMut {
            ptr: data.as_mut_ptr(),
            rs: cols as isize,
            cs: 1,
        }
    }
}

/// `C = A·B + beta·C` (`A: m x k`, `B: k x n`) on the calling thread.
///
/// # Safety
/// The operands must satisfy [`GemmElement::gemm`]'s contract for these sizes.
pub(crate) unsafe fn gemm<T: GemmElement>(
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) {
    if m == 0 || n == 0 {
        return;
    }
    // SAFETY: forwarded from the caller's contract.
    unsafe {
        T::gemm(
            m, k, n, a.ptr, a.rs, a.cs, b.ptr, b.rs, b.cs, beta, c.ptr, c.rs, c.cs,
        )
    }
}

/// `C = A·B + beta·C` split over rayon's threads when it is large enough: into blocks of
/// columns when `n >= m` (each block re-packs A, the smaller operand then), else of rows.
///
/// # Safety
/// As [`gemm`]; additionally no other thread may read or write C meanwhile.
pub(crate) unsafe fn parallel_gemm<T: GemmElement>(
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) {
    let threads = crate::parallel::threads();
    let macs = m.saturating_mul(k).saturating_mul(n);
    let split_cols = n >= m;
    let side = if split_cols { n } else { m };
    let blocks = (2 * threads).min(side / MIN_BLOCK);
    if threads < 2 || macs < PARALLEL_MACS || blocks < 2 {
        // SAFETY: forwarded.
        unsafe { gemm((m, k, n), a, b, beta, c) };
        return;
    }
    let step = side.div_ceil(blocks);
    (0..side.div_ceil(step)).into_par_iter().for_each(|i| {
        // Whole-struct captures, so the closure holds the `Sync` wrappers, not raw pointers.
        let (a, b, c) = (a, b, c);
        let start = i * step;
        let len = step.min(side - start);
        // SAFETY: block `i` covers rows (or columns) `start..start + len` of C, disjoint from
        // every other block's; the operand pointers are offset inside the caller's matrices.
        unsafe {
            if split_cols {
                let b_block = MatRef {
                    ptr: b.ptr.offset(start as isize * b.cs),
                    ..b
                };
                let c_block = MatMut {
                    ptr: c.ptr.offset(start as isize * c.cs),
                    ..c
                };
                gemm((m, k, len), a, b_block, beta, c_block);
            } else {
                let a_block = MatRef {
                    ptr: a.ptr.offset(start as isize * a.rs),
                    ..a
                };
                let c_block = MatMut {
                    ptr: c.ptr.offset(start as isize * c.rs),
                    ..c
                };
                gemm((len, k, n), a_block, b, beta, c_block);
            }
        }
    });
}
