//! Matrix-vector products: `y = x·B + beta·y` for a row vector `x` (`1 x k`) and `B: k x n`,
//! the whole of a GEMM with one row (and, transposed, one column). Nothing is packed: each
//! element of B is used once, so the product streams B from memory in the order it lies.
//!
//! * B with adjacent columns (a row-major matrix): `y[j0..j0+w] += x[p] · B[p][j0..j0+w]` for a
//!   chunk of columns held in registers while `p` runs down the rows.
//! * B with adjacent rows (a transposed row-major matrix, as `x·Wᵀ` with a `[n, k]` weight `W`
//!   in a linear layer): `y[j] = x · B[:, j]`, dot products over contiguous columns, eight at a
//!   time (eight rows of a weight read from memory at once keep enough reads in flight), in
//!   vector lanes summed at the end: the intrinsics kernels of `dot` on the SIMD paths (the
//!   compiler left the generic loops scalar), the generic loops otherwise.
//! * Anything else: plain loops.
//!
//! The loops are generic Rust written in lanes that the compiler vectorises, compiled once per
//! instruction set (AVX-512, AVX2 + FMA, baseline) and picked like the GEMM path.

use super::dot::DotFn;
use super::{GemmElement, GemmPath, MatRef};

/// Multiply-adds from which a GEMV is split over the threads.
pub(super) const PARALLEL_MACS: usize = 1 << 17;
/// Fewest outputs handed to one task of a split GEMV.
pub(super) const MIN_PARALLEL_OUTPUTS: usize = 64;

/// Columns of the row-major form held in registers at once.
const CHUNK: usize = 64;
/// Lanes of each dot product in the transposed form.
const LANES: usize = 16;
/// Dot products computed together in the transposed form.
use super::dot::COLUMNS;

/// `y[j*incy] = Σ_p x[p*incx]·B[p][j] + beta·y[j*incy]` for `j < n` (y is not read when
/// `beta == 0`).
///
/// # Safety
/// `x[p*incx]` (`p < k`), every element of the `k x n` view `b` and `y[j*incy]` (`j < n`) must
/// be in bounds of live allocations; y must not overlap x or B, nor itself (`incy != 0` unless
/// `n == 1`), and no other thread may touch y meanwhile.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn row_times_matrix<T: GemmElement>(
    path: GemmPath,
    k: usize,
    n: usize,
    x: *const T,
    incx: isize,
    b: MatRef<T>,
    beta: T,
    y: *mut T,
    incy: isize,
) {
    let v = Vector {
        dot: T::dot_columns(path),
        k,
        n,
        x,
        incx,
        b,
        beta,
        y,
        incy,
    };
    // SAFETY: forwarded; each wrapper needs its features, which `path` was chosen to have.
    unsafe {
        match path {
            #[cfg(all(target_arch = "x86_64", tessera_avx512))]
            GemmPath::Avx512 => v.run_avx512(),
            #[cfg(target_arch = "x86_64")]
            GemmPath::Avx2 => v.run_avx2(),
            _ => v.run(),
        }
    }
}

/// The operands of one GEMV (see [`row_times_matrix`]).
struct Vector<T: 'static> {
    /// The SIMD dot kernel of the path, if it has one.
    dot: Option<DotFn<T>>,
    k: usize,
    n: usize,
    x: *const T,
    incx: isize,
    b: MatRef<T>,
    beta: T,
    y: *mut T,
    incy: isize,
}

impl<T: GemmElement> Vector<T> {
    /// [`Vector::run`] compiled for AVX-512.
    ///
    /// # Safety
    /// As [`row_times_matrix`]; the CPU must have AVX-512F.
    #[cfg(all(target_arch = "x86_64", tessera_avx512))]
    #[allow(clippy::incompatible_msrv)] // compiled by Rust 1.89+ only (see build.rs)
    #[target_feature(enable = "avx512f")]
    unsafe fn run_avx512(&self) {
        // SAFETY: forwarded.
        unsafe { self.run() }
    }

    /// [`Vector::run`] compiled for AVX2 + FMA.
    ///
    /// # Safety
    /// As [`row_times_matrix`]; the CPU must have AVX2 and FMA.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,fma")]
    unsafe fn run_avx2(&self) {
        // SAFETY: forwarded.
        unsafe { self.run() }
    }

    /// Picks the loop for B's layout.
    ///
    /// # Safety
    /// As [`row_times_matrix`].
    #[inline(always)]
    unsafe fn run(&self) {
        // SAFETY: forwarded.
        unsafe {
            if self.b.cs == 1 {
                self.row_major();
            } else if self.b.rs == 1 && self.incx == 1 {
                self.column_major();
            } else {
                self.strided();
            }
        }
    }

    /// Stores output `j`: the sum plus `beta` times the old value.
    ///
    /// # Safety
    /// `j < n`.
    #[inline(always)]
    unsafe fn store(&self, j: usize, sum: T) {
        // SAFETY: `y[j*incy]` is in bounds for `j < n`.
        unsafe {
            let dst = self.y.offset(j as isize * self.incy);
            *dst = if self.beta == T::ZERO {
                sum
            } else {
                sum + self.beta * *dst
            };
        }
    }

    /// `x[p]`.
    ///
    /// # Safety
    /// `p < k`.
    #[inline(always)]
    unsafe fn x(&self, p: usize) -> T {
        // SAFETY: in bounds for `p < k`.
        unsafe { *self.x.offset(p as isize * self.incx) }
    }

    /// B with unit column stride: chunks of [`CHUNK`] columns accumulated down the rows.
    ///
    /// # Safety
    /// As [`row_times_matrix`], with `b.cs == 1`.
    #[inline(always)]
    unsafe fn row_major(&self) {
        let (k, n, rs) = (self.k, self.n, self.b.rs);
        let mut j0 = 0;
        // SAFETY: row `p < k`, columns `j0..j0 + CHUNK <= n` (or `..n` at the end) of B.
        unsafe {
            while j0 + CHUNK <= n {
                let mut acc = [T::ZERO; CHUNK];
                for p in 0..k {
                    let xp = self.x(p);
                    let row = std::slice::from_raw_parts(
                        self.b.ptr.offset(p as isize * rs + j0 as isize),
                        CHUNK,
                    );
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a = *a + xp * v;
                    }
                }
                for (l, &a) in acc.iter().enumerate() {
                    self.store(j0 + l, a);
                }
                j0 += CHUNK;
            }
            if j0 < n {
                let w = n - j0;
                let mut acc = [T::ZERO; CHUNK];
                for p in 0..k {
                    let xp = self.x(p);
                    let row = std::slice::from_raw_parts(
                        self.b.ptr.offset(p as isize * rs + j0 as isize),
                        w,
                    );
                    for (a, &v) in acc.iter_mut().zip(row) {
                        *a = *a + xp * v;
                    }
                }
                for (l, &a) in acc[..w].iter().enumerate() {
                    self.store(j0 + l, a);
                }
            }
        }
    }

    /// B with unit row stride and a contiguous x: dot products down the columns, [`COLUMNS`]
    /// at a time in [`LANES`] partial sums each.
    ///
    /// # Safety
    /// As [`row_times_matrix`], with `b.rs == 1` and `incx == 1`.
    #[inline(always)]
    unsafe fn column_major(&self) {
        let (k, n, cs) = (self.k, self.n, self.b.cs);
        // SAFETY: x has `k` contiguous elements; column `j < n` of B is `k` contiguous ones.
        unsafe {
            let x = std::slice::from_raw_parts(self.x, k);
            let column =
                |j: usize| std::slice::from_raw_parts(self.b.ptr.offset(j as isize * cs), k);
            let body = k / LANES * LANES;
            let mut j = 0;
            if let Some(dot) = self.dot {
                let prefetch = super::dot::worth_prefetching(k * n * std::mem::size_of::<T>());
                while j < n {
                    // The last group repeats its last column in the lanes past `n` (computed,
                    // never stored), so no output takes the scalar loops below.
                    let width = COLUMNS.min(n - j);
                    let cols = std::array::from_fn(|c| {
                        self.b.ptr.offset((j + c.min(width - 1)) as isize * cs)
                    });
                    // The next group's columns, prefetched while this one multiplies.
                    let next = prefetch.then(|| {
                        std::array::from_fn(|c| {
                            self.b.ptr.offset((j + width + c).min(n - 1) as isize * cs)
                        })
                    });
                    // SAFETY: x and the columns hold k contiguous elements each; `dot` is the
                    // kernel of the path, which was chosen to be supported.
                    let sums = dot(k, self.x, cols, next);
                    for (c, &sum) in sums[..width].iter().enumerate() {
                        self.store(j + c, sum);
                    }
                    j += width;
                }
                return;
            }
            while j + COLUMNS <= n {
                let cols: [&[T]; COLUMNS] = std::array::from_fn(|c| column(j + c));
                let mut acc = [[T::ZERO; LANES]; COLUMNS];
                for p0 in (0..body).step_by(LANES) {
                    let xs = &x[p0..p0 + LANES];
                    for (acc_c, col) in acc.iter_mut().zip(&cols) {
                        for ((a, &xv), &bv) in acc_c.iter_mut().zip(xs).zip(&col[p0..p0 + LANES]) {
                            *a = *a + xv * bv;
                        }
                    }
                }
                for (c, (acc_c, col)) in acc.iter().zip(&cols).enumerate() {
                    let mut sum = lane_sum(acc_c);
                    for p in body..k {
                        sum = sum + x[p] * col[p];
                    }
                    self.store(j + c, sum);
                }
                j += COLUMNS;
            }
            for j in j..n {
                let col = column(j);
                let mut acc = [T::ZERO; LANES];
                for p0 in (0..body).step_by(LANES) {
                    for ((a, &xv), &bv) in acc
                        .iter_mut()
                        .zip(&x[p0..p0 + LANES])
                        .zip(&col[p0..p0 + LANES])
                    {
                        *a = *a + xv * bv;
                    }
                }
                let mut sum = lane_sum(&acc);
                for p in body..k {
                    sum = sum + x[p] * col[p];
                }
                self.store(j, sum);
            }
        }
    }

    /// Any strides: one dot product per output.
    ///
    /// # Safety
    /// As [`row_times_matrix`].
    #[inline(always)]
    unsafe fn strided(&self) {
        for j in 0..self.n {
            let mut sum = T::ZERO;
            for p in 0..self.k {
                // SAFETY: `(p, j)` is inside B and `p < k`.
                unsafe {
                    let bv = *self
                        .b
                        .ptr
                        .offset(p as isize * self.b.rs + j as isize * self.b.cs);
                    sum = sum + self.x(p) * bv;
                }
            }
            // SAFETY: `j < n`.
            unsafe { self.store(j, sum) };
        }
    }
}

/// The sum of the lanes, pairwise.
#[inline(always)]
fn lane_sum<T: GemmElement>(lanes: &[T; LANES]) -> T {
    let mut v = *lanes;
    let mut width = LANES;
    while width > 1 {
        width /= 2;
        for l in 0..width {
            v[l] = v[l] + v[l + width];
        }
    }
    v[0]
}
