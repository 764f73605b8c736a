//! One strided GEMM `C = A·B + beta·C`, the single entry point of every matrix product in this
//! backend (matmul, convolutions and their gradients), and its rayon-parallel form.
//!
//! Operands are strided views ([`MatRef`], [`MatMut`]): a transposed or sliced operand is read
//! where it lies, never copied first (packing reads any strides). Three paths compute it:
//!
//! * **Blocked SIMD** (`blocked` + `microkernel`): BLIS-style cache blocking and packing around
//!   an AVX-512 (or AVX2+FMA) register-blocked micro-kernel, chosen at run time from the CPU's
//!   features (`select`). This is the fast path on x86-64.
//! * **GEMV** (`gemv`): a product with one row (`m = 1`) or one column (`n = 1`), as in batch-1
//!   inference, streams the matrix once without packing it.
//! * **Portable** (`portable`): `matrixmultiply`, on every other CPU, under Miri, and when
//!   `TESSERA_CPU_GEMM=portable` asks for it.
//!
//! Every thread here is the caller's or a rayon worker: `matrixmultiply` is built without its
//! own thread pool and a large product is split into one block per rayon thread, computed by
//! the calling thread and the workers free to help (`team`), so a GEMM never competes with
//! another pool for the cores (two pools on two cores made each wait for the other's spinning
//! threads) and never waits for a sleeping worker to wake.
//!
//! Miri: the packing, blocking, scratch-buffer, team and GEMV code is exercised under Miri by
//! the small tests in `tests` (and each module's own) through the portable scalar
//! micro-kernel: `MIRIFLAGS="-Zmiri-ignore-leaks -Zmiri-tree-borrows" cargo +nightly miri test
//! -p tessera-cpu --lib kernels::gemm` (about ten minutes; the flags because rayon's global
//! pool, which the `team` tests start, outlives them, and its deque (crossbeam-epoch) trips
//! Stacked Borrows; everything but `team` also passes under Stacked Borrows). The SIMD
//! micro-kernels and packers are `core::arch` intrinsics that Miri does not
//! run; their tests are skipped there and run natively on every CPU that has the features.

mod blocked;
mod blocking;
mod dot;
mod gemv;
mod microkernel;
mod pack;
pub(crate) use dot::{worth_prefetching, PREFETCH_SPAN_BYTES};
/// The AVX-512 transposing packer, for the bf16 GEMMs' pair words (32 bits, moved as f32).
#[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
pub(crate) use pack::avx512::transpose_f32;
mod portable;
mod scratch;
mod select;
mod team;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tuning;

use crate::parallel::Parallelism;
use tessera_core::Result;

pub use blocking::BLOCKING_ENV_VAR;
pub(crate) use microkernel::MicroKernel;
pub use select::GEMM_ENV_VAR;
pub(crate) use select::{chosen_path, GemmPath};

/// Which path this process's GEMMs take, its micro-kernels and their blocking: `"avx512
/// (avx512 f32 12x32 kc 256 mc 1536 nc 768, avx512 f64 12x16 kc 192 mc 1536 nc 512)"`, or
/// `"portable (matrixmultiply)"`.
pub(crate) fn description() -> String {
    fn kernel<T>(kernel: &'static MicroKernel<T>) -> String {
        let b = kernel.blocking();
        format!("{} kc {} mc {} nc {}", kernel.name, b.kc, b.mc, b.nc)
    }
    let path = chosen_path();
    match (f32::micro_kernel(path), f64::micro_kernel(path)) {
        (Some(s), Some(d)) => format!("{} ({}, {})", path.name(), kernel(s), kernel(d)),
        _ => format!("{} (matrixmultiply)", path.name()),
    }
}

/// Multiply-adds below which a product runs on the calling thread.
pub(crate) const PARALLEL_MACS: usize = 1 << 18;
/// Smallest block side (rows or columns) handed to one task.
pub(crate) const MIN_BLOCK: usize = 32;

/// An element type the GEMM multiplies: `f32` or `f64`.
///
/// # Safety
/// Implementors are plain floating-point numbers: every bit pattern of `size_of::<Self>()`
/// bytes is a valid value, and `align_of::<Self>()` divides 64 (the packing buffers are raw
/// cache lines reinterpreted as `Self`).
pub(crate) unsafe trait GemmElement:
    crate::alloc::Zeroable
    + Send
    + Sync
    + Default
    + PartialEq
    + std::fmt::Debug
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + 'static
{
    /// Zero.
    const ZERO: Self;
    /// One.
    const ONE: Self;

    /// The SIMD micro-kernel of `path` for this type, or `None` for the portable path (or a
    /// path this build does not have).
    fn micro_kernel(path: GemmPath) -> Option<&'static MicroKernel<Self>>;

    /// The SIMD dot-product kernel of `path` for the GEMV's transposed form, or `None` for the
    /// portable path (or a path this build does not have).
    fn dot_columns(path: GemmPath) -> Option<dot::DotFn<Self>>;

    /// `C = A B + beta C` through `matrixmultiply` on this thread.
    ///
    /// # Safety
    /// As [`gemm`].
    #[allow(clippy::too_many_arguments)]
    unsafe fn portable_gemm(
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
    ($t:ty, $portable:path, $avx512:ident, $avx2:ident, $dot:ident) => {
        // SAFETY: a primitive float: any bit pattern is a value; alignment 4 or 8.
        unsafe impl GemmElement for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;

            fn micro_kernel(path: GemmPath) -> Option<&'static MicroKernel<Self>> {
                match path {
                    GemmPath::Portable => None,
                    #[cfg(all(target_arch = "x86_64", tessera_avx512))]
                    GemmPath::Avx512 => Some(&microkernel::avx512::$avx512),
                    #[cfg(not(all(target_arch = "x86_64", tessera_avx512)))]
                    GemmPath::Avx512 => None,
                    #[cfg(target_arch = "x86_64")]
                    GemmPath::Avx2 => Some(&microkernel::avx2::$avx2),
                    #[cfg(not(target_arch = "x86_64"))]
                    GemmPath::Avx2 => None,
                }
            }

            fn dot_columns(path: GemmPath) -> Option<dot::DotFn<Self>> {
                match path {
                    GemmPath::Portable => None,
                    #[cfg(all(target_arch = "x86_64", tessera_avx512))]
                    GemmPath::Avx512 => Some(dot::avx512::$dot),
                    #[cfg(not(all(target_arch = "x86_64", tessera_avx512)))]
                    GemmPath::Avx512 => None,
                    #[cfg(target_arch = "x86_64")]
                    GemmPath::Avx2 => Some(dot::avx2::$dot),
                    #[cfg(not(target_arch = "x86_64"))]
                    GemmPath::Avx2 => None,
                }
            }

            unsafe fn portable_gemm(
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
                unsafe { $portable(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, beta, c, rsc, csc) }
            }
        }
    };
}

impl_gemm_element!(f32, matrixmultiply::sgemm, F32, F32, f32_dot);
impl_gemm_element!(f64, matrixmultiply::dgemm, F64, F64, f64_dot);

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

    /// The view starting at element `(row, col)`.
    ///
    /// # Safety
    /// That element must lie inside the allocation the view points into.
    pub(crate) unsafe fn at(self, row: usize, col: usize) -> Self {
        MatRef {
            // SAFETY: the caller's contract.
            ptr: unsafe {
                self.ptr
                    .offset(row as isize * self.rs + col as isize * self.cs)
            },
            ..self
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

    /// The transpose (strides swapped), without moving data.
    fn t(self) -> Self {
        MatMut {
            ptr: self.ptr,
            rs: self.cs,
            cs: self.rs,
        }
    }

    /// The view starting at element `(row, col)`.
    ///
    /// # Safety
    /// That element must lie inside the allocation the view points into.
    pub(crate) unsafe fn at(self, row: usize, col: usize) -> Self {
        MatMut {
            // SAFETY: the caller's contract.
            ptr: unsafe {
                self.ptr
                    .offset(row as isize * self.rs + col as isize * self.cs)
            },
            ..self
        }
    }
}

/// `C = A·B + beta·C` (`A: m x k`, `B: k x n`) on the calling thread, on the path chosen for
/// this CPU. With `beta == 0`, C is written without being read (it may hold anything).
///
/// Errors only when the packing buffers cannot be allocated ([`tessera_core::Error::OutOfMemory`]).
///
/// # Safety
/// Every element `a + i*a.rs + p*a.cs` (`i < m`, `p < k`), likewise for `b` (`p < k`, `j < n`),
/// and `c + i*c.rs + j*c.cs` (`i < m`, `j < n`) must be in bounds of live allocations; the
/// elements of C must be distinct (no zero or overlapping strides), `c` must not alias `a`/`b`,
/// and no other thread may touch the elements of C meanwhile.
pub(crate) unsafe fn try_gemm<T: GemmElement>(
    dims: (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) -> Result<()> {
    // SAFETY: forwarded from the caller's contract.
    unsafe { gemm_on(chosen_path(), dims, a, b, beta, c) }
}

/// [`try_gemm`] for callers that cannot return an error yet (the fused attention kernel): if
/// the packing buffers cannot be allocated, the product is computed by `matrixmultiply`
/// instead, whose own buffers are a few hundred KiB.
///
/// # Safety
/// As [`try_gemm`].
pub(crate) unsafe fn gemm<T: GemmElement>(
    dims: (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) {
    // SAFETY: forwarded from the caller's contract; the portable path only runs when the
    // blocked one failed before writing anything (it fails while acquiring its buffers).
    unsafe {
        if try_gemm(dims, a, b, beta, c).is_err() {
            let _ = gemm_on(GemmPath::Portable, dims, a, b, beta, c);
        }
    }
}

/// `C = A·B + beta·C` on `path` (falling back to the portable path when this build or type has
/// no kernel for it), on this thread.
///
/// # Safety
/// As [`try_gemm`].
pub(crate) unsafe fn gemm_on<T: GemmElement>(
    path: GemmPath,
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    // SAFETY (whole body): every pointer handed on addresses the elements the caller vouched
    // for: the transposes swap the roles of rows and columns of the same elements, and the
    // GEMV and blocked paths read A and B and write C only at those positions.
    unsafe {
        if k == 0 {
            scale(m, n, beta, c);
            return Ok(());
        }
        // A column-major C is the row-major Cᵀ = Bᵀ·Aᵀ: the kernels store rows of C.
        if c.cs != 1 && c.rs == 1 {
            return gemm_on(path, (n, k, m), b.t(), a.t(), beta, c.t());
        }
        if m == 1 {
            gemv::row_times_matrix(path, k, n, a.ptr, a.cs, b, beta, c.ptr, c.cs);
            return Ok(());
        }
        if n == 1 {
            // c (m x 1) = A b  <=>  cᵀ (1 x m) = bᵀ Aᵀ
            gemv::row_times_matrix(path, k, m, b.ptr, b.rs, a.t(), beta, c.ptr, c.rs);
            return Ok(());
        }
        match T::micro_kernel(path) {
            Some(kernel) => {
                blocked::gemm(kernel, kernel.blocking(), (m, k, n), a, b, beta, None, c)
            }
            None => {
                portable::gemm((m, k, n), a, b, beta, c);
                Ok(())
            }
        }
    }
}

/// `C = beta·C` (zeros when `beta == 0`, without reading C): the product with `k = 0`.
///
/// # Safety
/// As [`try_gemm`] for C.
unsafe fn scale<T: GemmElement>(m: usize, n: usize, beta: T, c: MatMut<T>) {
    for i in 0..m {
        for j in 0..n {
            // SAFETY: (i, j) is inside C.
            unsafe {
                let e = c.ptr.offset(i as isize * c.rs + j as isize * c.cs);
                *e = if beta == T::ZERO { T::ZERO } else { beta * *e };
            }
        }
    }
}

/// `C = A·B + beta·C` split over rayon's threads when it is large enough for `split`
/// (production code passes [`Parallelism::current`]; tests pass [`Parallelism::eager`] so that
/// products small enough for Miri still take the split path): into one block of columns per
/// thread when `n >= m` (each block packs all of A, the smaller operand then), else of rows; a
/// GEMV (one row or column) is split over its outputs. Small products run on the calling thread.
///
/// # Safety
/// As [`try_gemm`].
pub(crate) unsafe fn try_split_gemm<T: GemmElement>(
    split: Parallelism,
    dims: (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) -> Result<()> {
    let path = chosen_path();
    // SAFETY: forwarded; every block is a product of the caller's operands.
    unsafe {
        split_over_threads(path, split, dims, a, b, c, &|dims, a, b, c, _| {
            gemm_on(path, dims, a, b, beta, c)
        })
    }
}

/// `C = A·B + R` (`R: m x n`, e.g. a bias row broadcast with row stride 0) on `path`, on this
/// thread: the blocked kernels write `R` into each tile of C just before accumulating onto it;
/// the other paths (a GEMV, a column-major C, the portable path) copy `R` into C first and
/// accumulate onto it.
///
/// # Safety
/// As [`try_gemm`]; `addend` must be readable at every `(i, j)` with `i < m`, `j < n`, and not
/// overlap C.
pub(crate) unsafe fn gemm_addend_on<T: GemmElement>(
    path: GemmPath,
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    addend: MatRef<T>,
    c: MatMut<T>,
) -> Result<()> {
    if m == 0 || n == 0 {
        return Ok(());
    }
    // SAFETY (whole body): as `gemm_on`; the addend is read at C's positions only.
    unsafe {
        if let (Some(kernel), true) = (T::micro_kernel(path), m > 1 && n > 1 && c.cs == 1 && k > 0)
        {
            return blocked::gemm(
                kernel,
                kernel.blocking(),
                (m, k, n),
                a,
                b,
                T::ZERO,
                Some(addend),
                c,
            );
        }
        blocked::copy_tile(addend, c, m, n);
        gemm_on(path, (m, k, n), a, b, T::ONE, c)
    }
}

/// [`gemm_addend_on`] split over rayon's threads as [`try_split_gemm`] splits its products.
///
/// # Safety
/// As [`gemm_addend_on`].
pub(crate) unsafe fn try_split_gemm_addend<T: GemmElement>(
    split: Parallelism,
    dims: (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    addend: MatRef<T>,
    c: MatMut<T>,
) -> Result<()> {
    let path = chosen_path();
    // SAFETY: forwarded; every block is a product of the caller's operands, and its addend
    // starts at the block's origin in C.
    unsafe {
        split_over_threads(path, split, dims, a, b, c, &|dims, a, b, c, (row, col)| {
            gemm_addend_on(path, dims, a, b, addend.at(row, col), c)
        })
    }
}

/// One block of a split product: `C_block = A_block·B_block + beta·C_block`, given the block's
/// dimensions, operands, output and origin `(row, column)` in C.
type BlockProduct<'f, T> = dyn Fn((usize, usize, usize), MatRef<T>, MatRef<T>, MatMut<T>, (usize, usize)) -> Result<()>
    + Sync
    + 'f;

/// Cuts `C = A·B` into disjoint blocks as [`try_split_gemm`] describes and runs `block` on
/// each, on this thread and the rayon workers free to help (see `team`); returns the first
/// error.
///
/// # Safety
/// As [`try_gemm`]; `block` must be a product of its arguments satisfying that contract.
unsafe fn split_over_threads<T: GemmElement>(
    path: GemmPath,
    split: Parallelism,
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    c: MatMut<T>,
    block: &BlockProduct<'_, T>,
) -> Result<()> {
    let threads = split.threads;
    let macs = m.saturating_mul(k).saturating_mul(n);
    let split_cols = n >= m;
    let side = if split_cols { n } else { m };
    let eager = split.gemm_min_macs == 0;
    let (blocks, unit) = if m.min(n) == 1 {
        // A GEMV streams the matrix: split its outputs once it is large enough.
        let worth = eager || macs >= gemv::PARALLEL_MACS;
        let unit = if eager { 1 } else { gemv::MIN_PARALLEL_OUTPUTS };
        (if worth { threads } else { 1 }, unit)
    } else if macs < split.gemm_min_macs {
        (1, 1)
    } else {
        match T::micro_kernel(path) {
            // One block per thread: every block packs the whole of the other operand.
            Some(kernel) => (threads, if split_cols { kernel.nr } else { kernel.mr }),
            // matrixmultiply's blocks are small enough for two per thread to balance the load.
            None => (2 * threads, 1),
        }
    };
    let blocks = blocks.min(side / split.gemm_min_block.max(unit).max(1));
    if threads < 2 || blocks < 2 {
        return block((m, k, n), a, b, c, (0, 0));
    }
    let step = side.div_ceil(blocks).div_ceil(unit) * unit;
    let run = |i: usize| -> Result<()> {
        // Whole-struct captures, so the closure holds the `Sync` wrappers, not raw pointers.
        let (a, b, c) = (a, b, c);
        let start = i * step;
        let len = step.min(side - start);
        // SAFETY: block `i` covers rows (or columns) `start..start + len` of C, disjoint from
        // every other block's; the operand views start inside the caller's matrices.
        unsafe {
            if split_cols {
                block((m, k, len), a, b.at(0, start), c.at(0, start), (0, start))
            } else {
                block((len, k, n), a.at(start, 0), b, c.at(start, 0), (start, 0))
            }
        }
    };
    // The calling thread computes blocks too, and workers join in as they come free.
    let blocks = side.div_ceil(step);
    team::run_blocks(blocks, threads - 1, &run)
}
