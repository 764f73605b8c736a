//! When and how kernels split work across rayon's thread pool.
//!
//! Thread start-up and synchronisation cost a few microseconds, which dominates the small ops of
//! a training step, so kernels stay on the calling thread below [`PARALLEL_THRESHOLD`] elements
//! and split larger outputs into a few chunks per thread above it.

use rayon::prelude::*;
use tessera_core::Result as TensorResult;

use crate::alloc::try_filled;

/// Element count from which kernels run in parallel.
pub(crate) const PARALLEL_THRESHOLD: usize = 32 * 1024;

/// Smallest chunk handed to one task, in elements.
const MIN_CHUNK: usize = 8 * 1024;

/// Number of rayon worker threads.
pub(crate) fn threads() -> usize {
    rayon::current_num_threads().max(1)
}

/// The thresholds at which the kernels with `unsafe` code (GEMM, batched GEMM, convolution,
/// fused Adam) split their work over rayon. Production code uses [`Parallelism::current`]; the
/// unit tests also use [`Parallelism::eager`], which splits even tiny inputs, so that inputs
/// small enough for Miri still run every parallel path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Parallelism {
    /// Worker threads to plan for.
    pub(crate) threads: usize,
    /// Multiply-adds below which one GEMM runs on the calling thread.
    pub(crate) gemm_min_macs: usize,
    /// Smallest block side (rows or columns) of a split GEMM handed to one task.
    pub(crate) gemm_min_block: usize,
    /// Total multiply-adds from which a batch of small products is spread one per task.
    pub(crate) batch_min_work: usize,
    /// Smallest chunk of an element-wise fused kernel handed to one task.
    pub(crate) min_chunk: usize,
}

impl Parallelism {
    /// The production thresholds for rayon's current pool.
    pub(crate) fn current() -> Self {
        Parallelism {
            threads: threads(),
            gemm_min_macs: crate::kernels::gemm::PARALLEL_MACS,
            gemm_min_block: crate::kernels::gemm::MIN_BLOCK,
            batch_min_work: 1 << 17,
            min_chunk: 16 * 1024,
        }
    }

    /// Splits everything that can be split, planning for `threads` threads (whatever the pool
    /// has: rayon runs the tasks on the threads it has).
    #[cfg(test)]
    pub(crate) fn eager(threads: usize) -> Self {
        Parallelism {
            threads,
            gemm_min_macs: 0,
            gemm_min_block: 1,
            batch_min_work: 0,
            min_chunk: 1,
        }
    }

    /// True when `work` elements of an element-wise kernel justify several tasks.
    pub(crate) fn worth_parallel(&self, work: usize) -> bool {
        self.threads > 1 && (work >= PARALLEL_THRESHOLD || self.min_chunk == 1)
    }

    /// Chunk length that gives each thread about four chunks, never below `min_chunk`.
    pub(crate) fn chunk_len(&self, total: usize) -> usize {
        total.div_ceil(self.threads * 4).max(self.min_chunk).max(1)
    }
}

/// True when `work` elements justify using several threads.
pub(crate) fn worth_parallel(work: usize) -> bool {
    work >= PARALLEL_THRESHOLD && threads() > 1
}

/// Chunk length that gives each thread about four chunks, never below `min`.
pub(crate) fn chunk_len(total: usize, min: usize) -> usize {
    total.div_ceil(threads() * 4).max(min).max(1)
}

/// Fills `out` by calling `fill(start, chunk)` on consecutive chunks, where `start` is the index
/// of the chunk's first element in `out`: one call on this thread for small outputs, parallel
/// chunks above [`PARALLEL_THRESHOLD`].
pub(crate) fn fill_chunks<U: Send>(out: &mut [U], fill: impl Fn(usize, &mut [U]) + Sync) {
    if !worth_parallel(out.len()) {
        fill(0, out);
        return;
    }
    let chunk = chunk_len(out.len(), MIN_CHUNK);
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(i, c)| fill(i * chunk, c));
}

/// Like [`fill_chunks`] for a fallible `fill`; returns the first error in chunk order.
pub(crate) fn try_fill_chunks<U: Send, E: Send>(
    out: &mut [U],
    fill: impl Fn(usize, &mut [U]) -> Result<(), E> + Sync,
) -> Result<(), E> {
    if !worth_parallel(out.len()) {
        return fill(0, out);
    }
    let chunk = chunk_len(out.len(), MIN_CHUNK);
    let results: Vec<Result<(), E>> = out
        .par_chunks_mut(chunk)
        .enumerate()
        .map(|(i, c)| fill(i * chunk, c))
        .collect();
    results.into_iter().collect()
}

/// Computes `out_len` results, each a reduction over `red_len` inputs, choosing how to split.
///
/// `block(outputs, reduced, dst)` must write into `dst` (of `outputs.len()` entries) the partial
/// result of each output in `outputs` over the reduced positions `reduced`; `merge(acc, part)`
/// folds a later partial into an earlier one. Small problems run in one block on this thread.
/// Otherwise the outputs are split into chunks of at least `min_outputs` (each reduced in full)
/// when that gives every thread a couple of chunks; failing that (few outputs, many inputs, as
/// in a full reduction) the reduced range is split instead and the partials are merged in
/// order, so results never depend on scheduling.
pub(crate) fn split_reduction<P: Clone + Send + Sync>(
    out_len: usize,
    red_len: usize,
    identity: P,
    min_outputs: usize,
    block: impl Fn(std::ops::Range<usize>, std::ops::Range<usize>, &mut [P]) + Sync,
    merge: impl Fn(&mut P, P),
) -> TensorResult<Vec<P>> {
    let mut out = try_filled(out_len, identity.clone())?;
    if out_len == 0 || red_len == 0 {
        return Ok(out);
    }
    if !worth_parallel(out_len.saturating_mul(red_len)) {
        block(0..out_len, 0..red_len, &mut out);
        return Ok(out);
    }
    let out_chunk = chunk_len(out_len, min_outputs.max(MIN_CHUNK.div_ceil(red_len)));
    let out_chunks = out_len.div_ceil(out_chunk);
    let red_pieces = (threads() * 4).min(red_len.div_ceil(MIN_CHUNK));
    if out_chunks >= 2 * threads() || (red_pieces < 2 && out_chunks >= 2) {
        out.par_chunks_mut(out_chunk)
            .enumerate()
            .for_each(|(i, dst)| {
                let start = i * out_chunk;
                block(start..start + dst.len(), 0..red_len, dst);
            });
    } else if red_pieces >= 2 {
        let piece = red_len.div_ceil(red_pieces);
        let partials: Vec<Vec<P>> = (0..red_len.div_ceil(piece))
            .into_par_iter()
            .map(|p| {
                let mut part = try_filled(out_len, identity.clone())?;
                block(
                    0..out_len,
                    p * piece..((p + 1) * piece).min(red_len),
                    &mut part,
                );
                Ok(part)
            })
            .collect::<TensorResult<_>>()?;
        let mut partials = partials.into_iter();
        if let Some(first) = partials.next() {
            out = first;
        }
        for part in partials {
            for (acc, p) in out.iter_mut().zip(part) {
                merge(acc, p);
            }
        }
    } else {
        block(0..out_len, 0..red_len, &mut out);
    }
    Ok(out)
}

/// Like [`fill_rows`] for a fallible `fill`; returns the first error in chunk order.
pub(crate) fn try_fill_rows<U: Send>(
    out: &mut [U],
    row_len: usize,
    fill: impl Fn(usize, &mut [U]) -> TensorResult<()> + Sync,
) -> TensorResult<()> {
    if row_len == 0 || out.is_empty() {
        return Ok(());
    }
    if !worth_parallel(out.len()) {
        return fill(0, out);
    }
    let rows = out.len() / row_len;
    let rows_per_chunk = chunk_len(rows, MIN_CHUNK.div_ceil(row_len));
    out.par_chunks_mut(rows_per_chunk * row_len)
        .enumerate()
        .try_for_each(|(i, c)| fill(i * rows_per_chunk, c))
}

/// Fills `out`, made of rows of `row_len` elements, by calling `fill(first_row, rows)` on
/// consecutive groups of whole rows; parallel above [`PARALLEL_THRESHOLD`] elements.
pub(crate) fn fill_rows<U: Send>(
    out: &mut [U],
    row_len: usize,
    fill: impl Fn(usize, &mut [U]) + Sync,
) {
    if row_len == 0 || out.is_empty() {
        return;
    }
    if !worth_parallel(out.len()) {
        fill(0, out);
        return;
    }
    let rows = out.len() / row_len;
    let rows_per_chunk = chunk_len(rows, MIN_CHUNK.div_ceil(row_len));
    out.par_chunks_mut(rows_per_chunk * row_len)
        .enumerate()
        .for_each(|(i, c)| fill(i * rows_per_chunk, c));
}
