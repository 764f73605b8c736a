//! The blocked GEMM driver (BLIS-style): cache blocking and packing around a micro-kernel, on
//! one thread.
//!
//! ```text
//! for each block of mc rows of A (jc)
//!   for each block of kc steps along k (pc)
//!     pack A[jc.., pc..] into panels of mr rows                  (mc x kc, L2/L3)
//!     for each block of nc columns of B (ic)
//!       pack B[pc.., ic..] into panels of nr columns             (kc x nc, L2)
//!       for each A panel (jr), for each B panel (ir)
//!         micro-kernel: the mr x nr tile of C, kc steps deep     (panels in L1)
//! ```
//!
//! The first `pc` block applies the caller's `beta` (C is not read when it is 0); later ones
//! accumulate. Edge tiles (fewer than `mr` rows or `nr` columns left) and outputs without a
//! unit column stride go through a local tile that is then added into C element by element.

use super::microkernel::{MicroKernel, MAX_TILE};
use super::pack::{pack, Source};
use super::scratch::with_buffers;
use super::{GemmElement, MatMut, MatRef};
use tensor_core::Result;

/// `C = A·B + beta·C` with `kernel`, on this thread. Errors only when the packing buffers
/// cannot be allocated, before anything is written.
///
/// # Safety
/// As [`super::try_gemm`], with `m, k, n > 0`.
pub(super) unsafe fn gemm<T: GemmElement>(
    kernel: &MicroKernel<T>,
    (m, k, n): (usize, usize, usize),
    a: MatRef<T>,
    b: MatRef<T>,
    beta: T,
    c: MatMut<T>,
) -> Result<()> {
    let (mr, nr) = (kernel.mr, kernel.nr);
    assert!(
        mr * nr <= MAX_TILE && kernel.mc % mr == 0 && kernel.nc % nr == 0 && kernel.kc > 0,
        "inconsistent micro-kernel blocking: {kernel:?}"
    );
    let kc = kernel.kc.min(k);
    let mc = kernel.mc.min(m.div_ceil(mr) * mr);
    let nc = kernel.nc.min(n.div_ceil(nr) * nr);
    with_buffers::<T, _>(mc * kc, kc * nc, |a_pack, b_pack| {
        for jc in (0..m).step_by(mc) {
            let rows = mc.min(m - jc);
            for pc in (0..k).step_by(kc) {
                let depth = kc.min(k - pc);
                // SAFETY: rows `jc..jc + rows` and steps `pc..pc + depth` are inside A.
                unsafe {
                    let src = a.at(jc, pc);
                    let src = source(src.ptr, src.rs, src.cs);
                    pack(a_pack, src, rows, depth, mr, kernel.transpose_pack);
                }
                let (beta, load_c) = if pc == 0 {
                    (beta, beta != T::ZERO)
                } else {
                    (T::ONE, true)
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
                    let block = Block {
                        a_pack,
                        b_pack,
                        rows,
                        cols,
                        depth,
                        beta,
                        load_c,
                    };
                    // SAFETY: the block's tile of C starts at (jc, ic), inside C, and spans
                    // `rows x cols` elements of it.
                    unsafe { block.multiply(kernel, c.at(jc, ic)) };
                }
            }
        }
    })
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
    b_pack: &'p [T],
    rows: usize,
    cols: usize,
    depth: usize,
    beta: T,
    load_c: bool,
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
            self.a_pack.len() >= self.rows.div_ceil(mr) * mr * depth
                && self.b_pack.len() >= self.cols.div_ceil(nr) * nr * depth,
            "packed blocks too short"
        );
        for jr in (0..self.rows).step_by(mr) {
            let tile_rows = mr.min(self.rows - jr);
            // Panel `jr / mr` of A: `mr * depth` elements from `jr * depth`.
            let a_panel = self.a_pack[jr * depth..].as_ptr();
            for ir in (0..self.cols).step_by(nr) {
                let tile_cols = nr.min(self.cols - ir);
                let b_panel = self.b_pack[ir * depth..].as_ptr();
                // SAFETY: the panels hold `mr * depth` and `nr * depth` elements (asserted
                // above); tile (jr, ir) is inside the region.
                unsafe {
                    let c_tile = c.at(jr, ir);
                    if tile_rows == mr && tile_cols == nr && c.cs == 1 {
                        (kernel.run)(
                            depth,
                            a_panel,
                            b_panel,
                            c_tile.ptr,
                            c.rs,
                            self.beta,
                            self.load_c,
                        );
                    } else {
                        self.edge_tile(kernel, a_panel, b_panel, c_tile, tile_rows, tile_cols);
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
    unsafe fn edge_tile(
        &self,
        kernel: &MicroKernel<T>,
        a_panel: *const T,
        b_panel: *const T,
        c: MatMut<T>,
        rows: usize,
        cols: usize,
    ) {
        let nr = kernel.nr;
        let mut tile = [T::ZERO; MAX_TILE];
        // SAFETY: `tile` holds `mr * nr <= MAX_TILE` elements, row stride `nr`; the panels
        // are the caller's; `rows x cols` of C are inside the region.
        unsafe {
            (kernel.run)(
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
