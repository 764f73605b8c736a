//! One strided GEMM `C = A·B + beta·C` on `matrixmultiply`'s single-threaded kernels, and its
//! rayon-parallel form that splits C into blocks of rows or columns.
//!
//! `matrixmultiply` is built without its own thread pool: every thread in this backend is a
//! rayon worker, so a GEMM never competes with another pool for the cores (two pools on two
//! cores made each wait for the other's spinning threads). A large product is cut into a few
//! blocks along the dimension whose split repacks less (columns re-pack A, rows re-pack B), and
//! the blocks run as rayon tasks; a small one runs on the calling thread.

use rayon::prelude::*;

use crate::parallel::Parallelism;

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

/// `C = A·B + beta·C`, split over rayon's threads when `split` (normally
/// [`Parallelism::current`]) says it is large enough: into blocks of columns when `n >= m`
/// (each block re-packs A, the smaller operand then), else of rows.
///
/// # Safety
/// As [`gemm`]; additionally no other thread may read or write C meanwhile.
pub(crate) unsafe fn split_gemm<T: GemmElement>(
    split: Parallelism,
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) {
    let threads = split.threads;
    let macs = m.saturating_mul(k).saturating_mul(n);
    let split_cols = n >= m;
    let side = if split_cols { n } else { m };
    let blocks = (2 * threads).min(side / split.gemm_min_block.max(1));
    if threads < 2 || macs < split.gemm_min_macs || blocks < 2 {
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

#[cfg(test)]
mod tests {
    //! Miri-sized tests of every `unsafe` block here (`miri_` prefix: see `docs/SOUNDNESS.md`).
    use super::*;

    /// A strided matrix inside `data`: element `(i, j)` is `data[offset + i * rs + j * cs]`.
    #[derive(Clone, Copy)]
    struct Strided {
        offset: usize,
        rs: usize,
        cs: usize,
    }

    impl Strided {
        fn at(&self, i: usize, j: usize) -> usize {
            self.offset + i * self.rs + j * self.cs
        }
    }

    /// `C = A·B + beta·C` by its definition, on a copy of `c`.
    #[allow(clippy::too_many_arguments)]
    fn definition(
        (m, k, n): (usize, usize, usize),
        a: &[f64],
        sa: Strided,
        b: &[f64],
        sb: Strided,
        beta: f64,
        c: &[f64],
        sc: Strided,
    ) -> Vec<f64> {
        let mut out = c.to_vec();
        for i in 0..m {
            for j in 0..n {
                let dot: f64 = (0..k).map(|p| a[sa.at(i, p)] * b[sb.at(p, j)]).sum();
                out[sc.at(i, j)] = dot + beta * c[sc.at(i, j)];
            }
        }
        out
    }

    /// Values that make every product distinct and exact in f64 and f32.
    fn values(len: usize, seed: usize) -> Vec<f64> {
        (0..len)
            .map(|i| ((i * 7 + seed * 3) % 11) as f64 - 5.0)
            .collect()
    }

    /// One product through [`split_gemm`] with `split`, checked against [`definition`]. A is
    /// stored transposed or not, C sits inside a larger buffer (row stride `n + 1`, offset 2)
    /// whose other elements must stay untouched.
    fn check(split: Parallelism, dims: (usize, usize, usize), transpose_a: bool, beta: f64) {
        let (m, k, n) = dims;
        let a = values(m * k + 1, 1);
        let sa = if transpose_a {
            Strided {
                offset: 1,
                rs: 1,
                cs: m,
            }
        } else {
            Strided {
                offset: 1,
                rs: k,
                cs: 1,
            }
        };
        let b = values(k * n, 2);
        let sb = Strided {
            offset: 0,
            rs: n,
            cs: 1,
        };
        let sc = Strided {
            offset: 2,
            rs: n + 1,
            cs: 1,
        };
        let c0 = values(2 + m * (n + 1), 3);
        let expected = definition(dims, &a, sa, &b, sb, beta, &c0, sc);
        let mut c = c0.clone();
        let mat = |data: &[f64], s: Strided| MatRef {
            ptr: data[s.offset..].as_ptr(),
            rs: s.rs as isize,
            cs: s.cs as isize,
        };
        let c_mat = MatMut {
            ptr: c[sc.offset..].as_mut_ptr(),
            rs: sc.rs as isize,
            cs: 1,
        };
        // SAFETY: every element A, B and C reach is inside `a`, `b` and `c` by construction
        // (the strided maps above), C does not alias A or B, and nothing else touches `c`.
        unsafe { split_gemm(split, dims, mat(&a, sa), mat(&b, sb), beta, c_mat) };
        assert_eq!(
            c, expected,
            "{dims:?} transpose_a={transpose_a} beta={beta}"
        );
    }

    #[test]
    fn miri_gemm_matches_the_definition_on_strided_operands() {
        let serial = Parallelism {
            threads: 1,
            ..Parallelism::eager(1)
        };
        for dims in [
            (0, 2, 3),
            (2, 0, 3),
            (3, 2, 0),
            (1, 1, 1),
            (3, 4, 2),
            (2, 3, 5),
        ] {
            for transpose_a in [false, true] {
                for beta in [0.0, 1.0] {
                    check(serial, dims, transpose_a, beta);
                }
            }
        }
    }

    #[test]
    fn miri_split_gemm_blocks_cover_the_output_exactly_once() {
        // With beta = 1 an element updated twice would hold 2·AB + C, one skipped only C.
        let eager = Parallelism::eager(2);
        for dims in [(7, 3, 2), (2, 3, 7), (5, 1, 5), (4, 2, 9)] {
            for transpose_a in [false, true] {
                check(eager, dims, transpose_a, 1.0);
                check(eager, dims, transpose_a, 0.0);
            }
        }
    }

    #[test]
    fn miri_sgemm_matches_the_definition() {
        let (m, k, n) = (3, 2, 4);
        let a: Vec<f32> = values(m * k, 4).iter().map(|&v| v as f32).collect();
        let b: Vec<f32> = values(k * n, 5).iter().map(|&v| v as f32).collect();
        let mut c = vec![0f32; m * n];
        // SAFETY: row-major operands of exactly their sizes; `c` is not aliased.
        unsafe {
            split_gemm(
                Parallelism::eager(2),
                (m, k, n),
                MatRef::row_major(&a, k),
                MatRef::row_major(&b, n),
                0.0,
                MatMut::row_major(&mut c, n),
            )
        };
        for i in 0..m {
            for j in 0..n {
                let dot: f32 = (0..k).map(|p| a[i * k + p] * b[p * n + j]).sum();
                assert_eq!(c[i * n + j], dot);
            }
        }
    }
}
