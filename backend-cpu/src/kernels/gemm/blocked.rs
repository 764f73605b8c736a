//! The blocked GEMM driver (BLIS-style): cache blocking and packing around a micro-kernel, on
//! one thread.
//!
//! ```text
//! for each block of mc rows of A (jc)
//!   for each block of kc steps along k (pc)
//!     pack A[jc.., pc..] into panels of mr rows                  (mc x kc, L2/L3;
//!                                  row by row when A is row-major and the kernel reads that)
//!     for each block of nc columns of B (ic)
//!       pack B[pc.., ic..] into panels of nr columns             (kc x nc, L2)
//!       for each A panel (jr), for each B panel (ir)
//!         micro-kernel: the mr x nr tile of C, kc steps deep     (panels in L1)
//! ```
//!
//! The first `pc` block applies the caller's `beta` (C is not read when it is 0), or, given an
//! addend `R` (a bias row broadcast over the rows: a linear layer's), writes each tile of `R`
//! into C just before its micro-kernel loads and accumulates onto it, so the addition costs a
//! tile's worth of L1 stores instead of a pass over C; later blocks accumulate. Edge tiles
//! (fewer than `mr` rows or `nr` columns left) and outputs without a unit column stride go
//! through a local tile that is then added into C element by element.

use super::blocking::Blocking;
use super::microkernel::{KernelFn, MicroKernel, MAX_TILE};
use super::pack::{pack, pack_rows, Source};
use super::scratch::with_buffers;
use super::{GemmElement, MatMut, MatRef};
use tessera_core::Result;

/// `C = A·B + beta·C`, or `C = A·B + R` given an `addend` `R` (`beta` is then ignored and C not
/// read), with `kernel` and the block sizes of `blocking`, on this thread. Errors only when the
/// packing buffers cannot be allocated, before anything is written.
///
/// # Safety
/// As [`super::try_gemm`], with `m, k, n > 0`; `addend`, if any, must be readable at every
/// `(i, j)` of C's shape.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gemm<T: GemmElement>(
    kernel: &MicroKernel<T>,
    blocking: Blocking,
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    addend: Option<MatRef<T>>,
    c: MatMut<T>,
) -> Result<()> {
    let (mr, nr) = (kernel.mr, kernel.nr);
    let row_major_kernel = kernel.row_major_a.is_some();
    assert!(
        mr * nr <= MAX_TILE
            && blocking.mc % mr == 0
            && blocking.nc % nr == 0
            && blocking.kc > 0
            && blocking.mc > 0
            && blocking.nc > 0
            && (!row_major_kernel || blocking.kc <= kernel.kc),
        "inconsistent micro-kernel blocking: {blocking:?} for {kernel:?}"
    );
    let kc = balanced_depth(blocking.kc, k);
    let mc = blocking.mc.min(m.div_ceil(mr) * mr);
    let nc = blocking.nc.min(n.div_ceil(nr) * nr);
    // A row-major A is packed by copying its rows where the kernel has row-major panels
    // (their rows are the kernel's `kc` apart, whatever the block depth).
    let row_major_a = row_major_kernel && a.cs == 1 && a.rs != 1;
    let a_stride = if row_major_a { kernel.kc } else { kc };
    with_buffers::<T, _>(mc * a_stride, kc * nc, |a_pack, b_pack| {
        for jc in (0..m).step_by(mc) {
            let rows = mc.min(m - jc);
            for pc in (0..k).step_by(kc) {
                let depth = kc.min(k - pc);
                // SAFETY: rows `jc..jc + rows` and steps `pc..pc + depth` are inside A.
                unsafe {
                    let src = a.at(jc, pc);
                    let src = source(src.ptr, src.rs, src.cs);
                    if row_major_a {
                        pack_rows(a_pack, src, rows, depth, mr, a_stride);
                    } else {
                        pack(a_pack, src, rows, depth, mr, kernel.transpose_pack);
                    }
                }
                let (beta, load_c, first_addend) = match (pc, addend) {
                    (0, Some(r)) => (T::ONE, true, Some(r)),
                    (0, None) => (beta, beta != T::ZERO, None),
                    _ => (T::ONE, true, None),
                };
                for ic in (0..n).step_by(nc) {
                    let cols = nc.min(n - ic);
                    // SAFETY: steps `pc..pc + depth` and columns `ic..ic + cols` are inside B;
                    // the columns of B are the packed lines.
                    unsafe {
                        let src = b.at(pc, ic);
                        let src = source(src.ptr, src.cs, src.rs);
                        pack(b_pack, src, cols, depth, nr, kernel.transpose_pack);
                    }
                    // The B block packed next (the next columns, else the next steps of this
                    // A block's rows, else the first B block of the next A block).
                    let next = if ic + nc < n {
                        Some((pc, ic + nc))
                    } else if pc + kc < k {
                        Some((pc + kc, 0))
                    } else if jc + mc < m {
                        Some((0, 0))
                    } else {
                        None
                    };
                    let upcoming = next.and_then(|(pc, ic)| {
                        // SAFETY: (pc, ic) is inside B.
                        let src = unsafe { b.at(pc, ic) };
                        Upcoming::of(
                            source(src.ptr, src.cs, src.rs),
                            nc.min(n - ic),
                            kc.min(k - pc),
                        )
                    });
                    let block = Block {
                        a_pack,
                        a_stride: if row_major_a { a_stride } else { depth },
                        row_major_a,
                        b_pack,
                        rows,
                        cols,
                        depth,
                        beta,
                        load_c,
                        // SAFETY: (jc, ic) is inside C's shape, where the addend is readable.
                        addend: first_addend.map(|r| unsafe { r.at(jc, ic) }),
                        upcoming,
                    };
                    // SAFETY: the block's tile of C starts at (jc, ic), inside C, and spans
                    // `rows x cols` elements of it.
                    unsafe { block.multiply(kernel, c.at(jc, ic)) };
                }
            }
        }
    })
}

/// The depth of the blocks along k: as few blocks as `kc` allows, of equal depths (rounded up
/// to a multiple of 8, never above `kc`), so that no block is a thin remainder (k = 784 at
/// `kc` 256 is four blocks of 200, 200, 200 and 184, not 256, 256, 256 and 16: each block is a
/// pass over the tiles of C).
fn balanced_depth(kc: usize, k: usize) -> usize {
    let blocks = k.div_ceil(kc.max(1));
    k.div_ceil(blocks.max(1)).next_multiple_of(8).min(kc).min(k)
}

fn source<T>(ptr: *const T, line_stride: isize, step_stride: isize) -> Source<T> {
    Source {
        ptr,
        line_stride,
        step_stride,
    }
}

/// One packed A block times one packed B block, into a `rows x cols` region of C.
struct Block<'p, T> {
    a_pack: &'p [T],
    /// Elements of `a_pack` per row of A: panel `q` starts at `q * mr * a_stride`.
    a_stride: usize,
    /// Whether `a_pack` holds row-major panels.
    row_major_a: bool,
    b_pack: &'p [T],
    rows: usize,
    cols: usize,
    depth: usize,
    beta: T,
    load_c: bool,
    /// The addend's block at this block's origin, written into each tile of C before its
    /// kernel accumulates onto it (`beta` is then 1).
    addend: Option<MatRef<T>>,
    /// The source of the B block packed after this one, fetched into the caches a share at a
    /// time between this block's tiles.
    upcoming: Option<Upcoming>,
}

/// The memory of a B block still to be packed, as `runs` runs of `run_bytes` contiguous bytes
/// `run_stride` bytes apart, to be prefetched while the current block multiplies: a weight
/// matrix read once per pass (a prompt's forward pass) comes from DRAM, and the packing loop
/// alone does not keep enough reads in flight to hide the latency.
#[derive(Clone, Copy)]
struct Upcoming {
    base: *const u8,
    runs: usize,
    run_stride: isize,
    run_bytes: usize,
}

impl Upcoming {
    /// The block of `lines x depth` elements of `src`, when its lines or its steps are
    /// contiguous runs (otherwise nothing is prefetched).
    fn of<T>(src: Source<T>, lines: usize, depth: usize) -> Option<Upcoming> {
        let size = std::mem::size_of::<T>();
        let (runs, run_stride, run_len) = if src.step_stride == 1 {
            (lines, src.line_stride, depth)
        } else if src.line_stride == 1 {
            (depth, src.step_stride, lines)
        } else {
            return None;
        };
        Some(Upcoming {
            base: src.ptr.cast(),
            runs,
            run_stride: run_stride * size as isize,
            run_bytes: run_len * size,
        })
    }

    /// Prefetches share `part` of `parts` of the block's runs into L2.
    #[inline]
    fn fetch(&self, part: usize, parts: usize) {
        let (first, last) = (self.runs * part / parts, self.runs * (part + 1) / parts);
        for run in first..last {
            let start = self.base.wrapping_offset(run as isize * self.run_stride);
            for offset in (0..self.run_bytes).step_by(64) {
                prefetch_l2(start.wrapping_add(offset));
            }
        }
    }
}

/// A hint to fetch the cache line at `at` into L2; never faults, whatever `at` is.
#[inline(always)]
fn prefetch_l2(at: *const u8) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    // SAFETY: a prefetch is a hint: it reads nothing architecturally and cannot fault.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T1 }>(at.cast());
    }
    #[cfg(any(not(target_arch = "x86_64"), miri))]
    let _ = at;
}

impl<T: GemmElement> Block<'_, T> {
    /// Runs the micro-kernel over every tile of the region of C at `c`.
    ///
    /// # Safety
    /// `c` must address a `rows x cols` region of C (as [`super::try_gemm`] describes C), and
    /// the CPU must support `kernel`.
    unsafe fn multiply(&self, kernel: &MicroKernel<T>, c: MatMut<T>) {
        let (mr, nr, depth) = (kernel.mr, kernel.nr, self.depth);
        assert!(
            self.a_pack.len() >= self.rows.div_ceil(mr) * mr * self.a_stride
                && self.b_pack.len() >= self.cols.div_ceil(nr) * nr * depth,
            "packed blocks too short"
        );
        let tiles = self.rows.div_ceil(mr) * self.cols.div_ceil(nr);
        let mut tile = 0;
        for jr in (0..self.rows).step_by(mr) {
            let tile_rows = mr.min(self.rows - jr);
            // Panel `jr / mr` of A: `mr * a_stride` elements from `jr * a_stride`.
            let a_panel = self.a_pack[jr * self.a_stride..].as_ptr();
            for ir in (0..self.cols).step_by(nr) {
                let tile_cols = nr.min(self.cols - ir);
                let b_panel = self.b_pack[ir * depth..].as_ptr();
                if let Some(upcoming) = &self.upcoming {
                    upcoming.fetch(tile, tiles);
                }
                tile += 1;
                // SAFETY: the panels hold `mr * a_stride` and `nr * depth` elements (asserted
                // above); tile (jr, ir) is inside the region; a short kernel reads the same
                // panels and writes only its own rows.
                unsafe {
                    let c_tile = c.at(jr, ir);
                    if let Some(r) = self.addend {
                        copy_tile(r.at(jr, ir), c_tile, tile_rows, tile_cols);
                    }
                    let (rows, run) = kernel.kernel_for(tile_rows, self.row_major_a);
                    if tile_rows == rows && tile_cols == nr && c.cs == 1 {
                        run(
                            depth,
                            a_panel,
                            b_panel,
                            c_tile.ptr,
                            c.rs,
                            self.beta,
                            self.load_c,
                        );
                    } else {
                        self.edge_tile(run, nr, a_panel, b_panel, c_tile, tile_rows, tile_cols);
                    }
                }
            }
        }
    }

    /// A tile through a local buffer: computed whole, then the `rows x cols` part that lies in
    /// C added into it (any strides).
    ///
    /// # Safety
    /// As [`Block::multiply`] for the panels and the tile at `c`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn edge_tile(
        &self,
        run: KernelFn<T>,
        nr: usize,
        a_panel: *const T,
        b_panel: *const T,
        c: MatMut<T>,
        rows: usize,
        cols: usize,
    ) {
        let mut tile = [T::ZERO; MAX_TILE];
        // SAFETY: `tile` holds `mr * nr <= MAX_TILE` elements, row stride `nr`; the panels
        // are the caller's; `rows x cols` of C are inside the region.
        unsafe {
            run(
                self.depth,
                a_panel,
                b_panel,
                tile.as_mut_ptr(),
                nr as isize,
                T::ZERO,
                false,
            );
            for i in 0..rows {
                for j in 0..cols {
                    let dst = c.at(i, j).ptr;
                    let x = tile[i * nr + j];
                    *dst = if self.load_c { x + self.beta * *dst } else { x };
                }
            }
        }
    }
}

/// Copies the `rows x cols` tile at `src` into the tile at `dst`.
///
/// # Safety
/// Both tiles must be inside their matrices, `dst` writable and not overlapping `src`.
#[inline]
pub(super) unsafe fn copy_tile<T: Copy>(src: MatRef<T>, dst: MatMut<T>, rows: usize, cols: usize) {
    for i in 0..rows {
        for j in 0..cols {
            // SAFETY: (i, j) is inside both tiles.
            unsafe { *dst.at(i, j).ptr = *src.at(i, j).ptr };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::balanced_depth;

    #[test]
    fn block_depths_are_balanced_and_never_above_kc() {
        assert_eq!(balanced_depth(256, 784), 200);
        assert_eq!(balanced_depth(160, 1024), 152);
        assert_eq!(balanced_depth(256, 2048), 256);
        assert_eq!(balanced_depth(256, 5), 5);
        assert_eq!(balanced_depth(256, 257), 136);
        for kc in [1, 7, 8, 100, 160, 256] {
            for k in 1..700 {
                let depth = balanced_depth(kc, k);
                assert!(depth >= 1 && depth <= kc.min(k), "kc {kc} k {k}: {depth}");
                // No more blocks than the plain split into `kc`-deep ones.
                assert_eq!(k.div_ceil(depth), k.div_ceil(kc), "kc {kc} k {k}: {depth}");
            }
        }
    }
}
