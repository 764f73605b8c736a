//! The bf16 GEMM's loop order for products with few rows and a transposed weight (a prompt's
//! prefill, a small batch: `x · Wᵀ` with `x` of up to [`FEW_ROWS`] rows and a large weight). The row order of
//! [`super::gemm_bf16::gemm_bf16_into`] packs the whole of B first and then streams it once
//! per task of 96 rows: for a 128-row product with a weight of megabytes, B crosses memory
//! three times (read, packed copy written, read back twice). Here B is packed one panel of
//! [`NR`] columns at a time into a buffer that stays in the caches, and every A panel (all
//! of A is packed, and small) is multiplied by it before the next: B is read from memory
//! once. Tasks take runs of B panels; each panel's `m x NR` results go to the output.

use super::gemm_bf16::{pack_b_into, Bf16Matrix, ProductOutput, TileFn, KC, MR, NR};
use crate::alloc::{try_uninit, try_zeroed};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use tessera_core::Result;

/// Rows up to which [`super::gemm_bf16::gemm_bf16_into`] takes this order: two tasks of the
/// row order (above that, B's second and later reads are shared by enough rows).
pub(crate) const FEW_ROWS: usize = 192;

/// B panels per parallel task.
const PANELS_PER_TASK: usize = 4;

/// `A·B` into `out` (row-major `m x b.cols`) with A packed (`packed_a`: its `m.div_ceil(MR)`
/// panels of `pairs` words) and B packed a panel at a time; `k > 0`, `m > 0`, B checked in
/// bounds by the caller.
pub(crate) fn gemm_by_column_panels<O: ProductOutput>(
    packed_a: &[u32],
    m: usize,
    b: &Bf16Matrix,
    pairs: usize,
    (kernel, threads, parallel): (TileFn, usize, bool),
    out: &mut [O],
) -> Result<()> {
    let n = b.cols;
    let panels_b = n.div_ceil(NR);
    assert_eq!(out.len(), m * n, "output length");
    assert_eq!(
        packed_a.len(),
        m.div_ceil(MR) * pairs * MR,
        "packed A length"
    );
    if !(threads > 1 && parallel) {
        let mut task = Task::new(m, pairs)?;
        for jp in 0..panels_b {
            let (j0, results) = task.panel(packed_a, b, jp, kernel);
            for (r, row) in out.chunks_exact_mut(n).enumerate() {
                O::store(&mut row[j0..j0 + results.cols], results.row(r));
            }
        }
        return Ok(());
    }
    // In parallel, each task's results (`m` rows of its columns) are kept, then stored.
    let groups: Vec<(usize, Vec<f32>)> = (0..panels_b.div_ceil(PANELS_PER_TASK))
        .into_par_iter()
        .map_init(
            || None,
            |task: &mut Option<Task>, g| -> Result<(usize, Vec<f32>)> {
                if task.is_none() {
                    *task = Some(Task::new(m, pairs)?);
                }
                let task = task.as_mut().expect("created above");
                let first = g * PANELS_PER_TASK;
                let panels = PANELS_PER_TASK.min(panels_b - first);
                let width = (n - first * NR).min(panels * NR);
                let mut kept = try_zeroed::<f32>(m * width)?;
                for jp in first..first + panels {
                    let (j0, results) = task.panel(packed_a, b, jp, kernel);
                    let at = j0 - first * NR;
                    for (r, row) in kept.chunks_exact_mut(width).enumerate() {
                        row[at..at + results.cols].copy_from_slice(results.row(r));
                    }
                }
                Ok((first * NR, kept))
            },
        )
        .collect::<Result<_>>()?;
    for (j0, kept) in groups {
        let width = kept.len() / m;
        for (row, src) in out.chunks_exact_mut(n).zip(kept.chunks_exact(width)) {
            O::store(&mut row[j0..j0 + width], src);
        }
    }
    Ok(())
}

/// One task's buffers: a B panel's packed words and the `m x NR` results (rows padded to
/// whole A panels, so every tile is whole).
struct Task {
    packed: Vec<u32>,
    c: Vec<MaybeUninit<f32>>,
    m: usize,
    pairs: usize,
}

/// The results of one B panel: row `r`'s `cols` values at `c[r * NR..]`.
struct PanelResults<'a> {
    c: &'a [f32],
    cols: usize,
}

impl PanelResults<'_> {
    fn row(&self, r: usize) -> &[f32] {
        &self.c[r * NR..r * NR + self.cols]
    }
}

impl Task {
    fn new(m: usize, pairs: usize) -> Result<Task> {
        Ok(Task {
            packed: super::gemm_bf16::zeroed(pairs * NR)?,
            c: try_uninit(m.div_ceil(MR) * MR * NR)?,
            m,
            pairs,
        })
    }

    /// Packs B panel `jp` and multiplies every A panel by it; returns the panel's first
    /// column and its results.
    fn panel(
        &mut self,
        packed_a: &[u32],
        b: &Bf16Matrix,
        jp: usize,
        kernel: TileFn,
    ) -> (usize, PanelResults<'_>) {
        let (pairs, j0) = (self.pairs, jp * NR);
        let cols = NR.min(b.cols - j0);
        let slab = Bf16Matrix {
            offset: b.offset + j0 * b.cs,
            cols,
            ..*b
        };
        // The padding (columns past `cols`, the high half of an odd k's last pair) is zeros.
        self.packed.fill(0);
        pack_b_into(&mut self.packed, &slab, pairs);
        for p0 in (0..pairs).step_by(KC) {
            let depth = KC.min(pairs - p0);
            let b_block = &self.packed[p0 * NR..(p0 + depth) * NR];
            for (ip, tile) in self.c.chunks_exact_mut(MR * NR).enumerate() {
                let a_block = &packed_a[(ip * pairs + p0) * MR..(ip * pairs + p0 + depth) * MR];
                // SAFETY: when accumulating (`p0 > 0`), the first block wrote the whole tile.
                unsafe { kernel(a_block, b_block, tile, NR, p0 > 0) };
            }
        }
        // SAFETY: the first block of pairs (`pairs > 0`) wrote every tile, which together
        // cover the buffer.
        let c: &[f32] =
            unsafe { &*(self.c.as_slice() as *const [MaybeUninit<f32>] as *const [f32]) };
        (
            j0,
            PanelResults {
                c: &c[..self.m * NR],
                cols,
            },
        )
    }
}
