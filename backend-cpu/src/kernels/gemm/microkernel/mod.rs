//! Micro-kernels: the innermost loop of the blocked GEMM, one `mr x nr` tile of C from a packed
//! A panel and a packed B panel, with the tile held in registers for the whole depth.
//!
//! Each kernel computes, for a depth `k`,
//!
//! ```text
//! C[i][j] = Σ_p A[p*mr + i] · B[p*nr + j]  (+ beta · C[i][j] when load_c)
//! ```
//!
//! for `i < mr`, `j < nr`, with C at `c + i*rsc + j`: rows of the tile strided, columns
//! adjacent. The SIMD kernels broadcast one value of A and multiply it with `nr` values of B
//! held in two vector registers, so a row of C is two vector stores. The blocking sizes that go
//! with a kernel (`kc`, `mc`, `nc`) size the packed blocks for the caches: a `kc`-deep A panel
//! and B panel together in L1, a `kc x nc` B block in L2.

#[cfg(target_arch = "x86_64")]
pub(crate) mod avx2;
#[cfg(all(target_arch = "x86_64", tessera_avx512))]
pub(crate) mod avx512;

use std::sync::OnceLock;

use super::blocking::Blocking;
use super::pack::TransposePack;
#[cfg(test)]
use super::GemmElement;

/// The largest `mr * nr` of any kernel: the size of the edge-tile buffer.
pub(crate) const MAX_TILE: usize = 512;

/// The signature of a micro-kernel: `(k, a_panel, b_panel, c, rsc, beta, load_c)`.
///
/// # Safety
/// `a` must hold `k * mr` and `b` `k * nr` readable elements; the `mr x nr` tile at `c` with
/// row stride `rsc` and unit column stride must be writable (and readable when `load_c`), and
/// must not overlap the panels. When `load_c` is false C is not read. The CPU must have the
/// kernel's target features.
pub(crate) type KernelFn<T> = unsafe fn(usize, *const T, *const T, *mut T, isize, T, bool);

/// A micro-kernel and the blocking it is tuned for.
#[derive(Debug)]
pub(crate) struct MicroKernel<T: 'static> {
    /// What it is, for reports: ISA, element type and tile.
    pub(crate) name: &'static str,
    /// Rows of the C tile (values of A broadcast per step).
    pub(crate) mr: usize,
    /// Columns of the C tile (values of B per step).
    pub(crate) nr: usize,
    /// Depth of one packed block (steps along k).
    pub(crate) kc: usize,
    /// Rows of one packed A block; a multiple of `mr`.
    pub(crate) mc: usize,
    /// Columns of one packed B block; a multiple of `nr`.
    pub(crate) nc: usize,
    /// The kernel.
    pub(crate) run: KernelFn<T>,
    /// Kernels for the last panel of a block when it has fewer than `mr` rows: `(rows, kernel)`
    /// in increasing order of rows, each reading the same `mr`-wide panels but computing and
    /// storing only its `rows` rows (so a 4-row remainder costs a third of a full tile).
    pub(crate) short: &'static [(usize, KernelFn<T>)],
    /// The same kernels over row-major A panels (`a[i*kc + p]`), if the ISA has them: a
    /// row-major A is then packed by copying its rows instead of transposing them.
    pub(crate) row_major_a: Option<RowMajorA<T>>,
    /// A SIMD packer for operands whose runs lie along k, if the ISA has one.
    pub(crate) transpose_pack: Option<TransposePack<T>>,
    /// The blocking this process uses with the kernel (see `blocking`), chosen on first use;
    /// `kc`, `mc` and `nc` above are the constants it starts from.
    pub(crate) chosen_blocking: OnceLock<Blocking>,
}

/// Kernels reading A panels stored row by row: row `i`, step `p` at `a[i*kc + p]`, with `kc`
/// the kernel's block depth whatever the depth of the block.
#[derive(Debug)]
pub(crate) struct RowMajorA<T: 'static> {
    /// The full-tile kernel.
    pub(crate) run: KernelFn<T>,
    /// As [`MicroKernel::short`].
    pub(crate) short: &'static [(usize, KernelFn<T>)],
}

impl<T> MicroKernel<T> {
    /// The kernel for a tile of `rows <= mr` rows and the rows it computes: the shortest short
    /// kernel that covers them, else the full one; over row-major A panels if `row_major_a`.
    pub(crate) fn kernel_for(&self, rows: usize, row_major_a: bool) -> (usize, KernelFn<T>) {
        let (run, short) = match (&self.row_major_a, row_major_a) {
            (Some(r), true) => (r.run, r.short),
            _ => (self.run, self.short),
        };
        short
            .iter()
            .copied()
            .find(|&(r, _)| r >= rows)
            .unwrap_or((self.mr, run))
    }
}

/// The portable micro-kernel: plain Rust loops over an `MR x NR` tile, A's value for row `i`
/// at step `p` at `a[i*LINE + p*STEP]` (as [`simd_kernel`]). Not a production path (the
/// portable path is `matrixmultiply`); it lets the tests, Miri included, run the blocked driver
/// and its packing with any tile and block sizes.
///
/// # Safety
/// As [`KernelFn`] with `mr = MR`, `nr = NR`.
#[cfg(test)]
pub(crate) unsafe fn scalar<
    T: GemmElement,
    const MR: usize,
    const NR: usize,
    const LINE: usize,
    const STEP: usize,
>(
    k: usize,
    a: *const T,
    b: *const T,
    c: *mut T,
    rsc: isize,
    beta: T,
    load_c: bool,
) {
    let mut acc = [[T::ZERO; NR]; MR];
    // SAFETY: the reads stay inside the A panel (`i < MR`, `p < k`) and the `k * NR` B panel,
    // and the tile accesses inside the `MR x NR` tile, as the caller guarantees.
    unsafe {
        for p in 0..k {
            for (i, row) in acc.iter_mut().enumerate() {
                let av = *a.add(i * LINE + p * STEP);
                for (j, x) in row.iter_mut().enumerate() {
                    *x = *x + av * *b.add(p * NR + j);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            let c_row = c.offset(i as isize * rsc);
            for (j, &x) in row.iter().enumerate() {
                let dst = c_row.add(j);
                *dst = if load_c { x + beta * *dst } else { x };
            }
        }
    }
}

/// Writes a SIMD micro-kernel with a `$mr x 2·$lanes` tile: per step two vector loads of B,
/// `$mr` broadcasts of A and `2·$mr` fused multiply-adds into `2·$mr` accumulator registers.
/// A's value for row `i` at step `p` is `a[i*$line + p*$step]`: `line = 1, step = width` for
/// step-major panels (`width >= mr` values per step), `line = kc, step = 1` for row-major ones.
/// `prefetch_b` is how many steps ahead each step asks for B's next line (0: never): 8 for the
/// AVX2 kernels, whose one line of B per step streams from L2 (measured on a Zen 3: 4-20% in
/// 7 of 9 alternations); 0 for AVX-512, not measured with it. Every kernel prefetches its C
/// tile before the k steps: on a Zen 4, n = 1024 to 4096, the AVX-512 and the AVX2 f32
/// kernels were faster with it in most alternations (C's tile misses once C outgrows the
/// caches; see docs/BENCHMARKS.md).
macro_rules! simd_kernel {
    (
        $(#[$doc:meta])*
        $name:ident: $t:ty, $features:literal, mr = $mr:literal, line = $line:expr,
        step = $step:expr, lanes = $lanes:literal, prefetch_b = $prefetch_b:literal,
        $zero:ident, $load:ident, $store:ident, $splat:ident, $fma:ident
    ) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`super::KernelFn`] for this tile; the CPU must have the features it is compiled
        /// for.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $name(
            k: usize,
            a: *const $t,
            b: *const $t,
            c: *mut $t,
            rsc: isize,
            beta: $t,
            load_c: bool,
        ) {
            const MR: usize = $mr;
            const LINE: usize = $line;
            const STEP: usize = $step;
            const NR: usize = 2 * $lanes;
            const PREFETCH_B: usize = $prefetch_b;
            let mut lo = [$zero(); MR];
            let mut hi = [$zero(); MR];
            // SAFETY: step `p` reads `a[i*LINE + p*STEP]` (`i < MR`) and `b[p*NR .. + NR]`,
            // inside the panels; row `i < MR` of the tile is `c + i*rsc .. + NR`, inside it.
            unsafe {
                // C's tile is read and written only after the k steps: ask for its lines
                // (into L2, leaving L1 to the panels) now, so that their misses overlap the
                // products instead of following them. A prefetch never faults; the first and
                // last element of a row and the line between cover its (at most three) lines.
                for i in 0..MR {
                    let row = c.wrapping_offset(i as isize * rsc) as *const i8;
                    let bytes = NR * std::mem::size_of::<$t>();
                    _mm_prefetch::<_MM_HINT_T1>(row);
                    _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(64));
                    _mm_prefetch::<_MM_HINT_T1>(row.wrapping_add(bytes - 1));
                }
                let (mut ap, mut bp) = (a, b);
                for _ in 0..k {
                    if PREFETCH_B > 0 {
                        // B streams from L2: ask for the line `PREFETCH_B` steps ahead now.
                        // A prefetch never faults, past the panel's end included.
                        let ahead = bp.wrapping_add(PREFETCH_B * NR) as *const i8;
                        _mm_prefetch::<_MM_HINT_T0>(ahead);
                    }
                    let b_lo = $load(bp);
                    let b_hi = $load(bp.add($lanes));
                    for i in 0..MR {
                        let ai = $splat(*ap.add(i * LINE));
                        lo[i] = $fma(ai, b_lo, lo[i]);
                        hi[i] = $fma(ai, b_hi, hi[i]);
                    }
                    ap = ap.add(STEP);
                    bp = bp.add(NR);
                }
                let beta = $splat(beta);
                for i in 0..MR {
                    let row = c.offset(i as isize * rsc);
                    let (mut r_lo, mut r_hi) = (lo[i], hi[i]);
                    if load_c {
                        r_lo = $fma(beta, $load(row), r_lo);
                        r_hi = $fma(beta, $load(row.add($lanes)), r_hi);
                    }
                    $store(row, r_lo);
                    $store(row.add($lanes), r_hi);
                }
            }
        }
    };
}

pub(crate) use simd_kernel;

/// Test kernels of a given shape, blocking and panel layout, computing with [`scalar`].
#[cfg(test)]
pub(crate) mod tests_support {
    use super::*;

    /// A kernel with an `mr x nr` tile and the constants `kc`, `mc`, `nc`; with row-major A
    /// panels when `row_major_a` (their step then fixed at `kc`, as the SIMD kernels' are).
    /// Its arithmetic is the portable [`scalar`] kernel's for a 1 x 1 tile: it exists for its
    /// shape, not to be run.
    pub(crate) fn kernel_shaped<T: GemmElement>(
        mr: usize,
        nr: usize,
        kc: usize,
        mc: usize,
        nc: usize,
        row_major_a: bool,
    ) -> MicroKernel<T> {
        MicroKernel {
            name: "test shape",
            mr,
            nr,
            kc,
            mc,
            nc,
            run: scalar::<T, 1, 1, 1, 1>,
            short: &[],
            row_major_a: row_major_a.then_some(RowMajorA {
                run: scalar::<T, 1, 1, 1, 1>,
                short: &[],
            }),
            transpose_pack: None,
            chosen_blocking: OnceLock::new(),
        }
    }
}
