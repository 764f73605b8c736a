//! Fused scaled dot-product attention and its gradient (FlashAttention's algorithm on the CPU).
//!
//! **Forward.** Per batch element and block of [`BLOCK_ROWS`] queries, the keys are visited in
//! blocks of [`BLOCK_COLS`]: one small GEMM gives the block's scores, which are scaled and
//! masked in place, folded into a running row maximum and sum (the online softmax) and turned
//! into probabilities, and a second GEMM accumulates `P·V` into the output rows, rescaled
//! whenever the running maximum grows. Only the output and one log-sum-exp per row are
//! written; the `[L, S]` score matrix never exists. Under causal masking the key blocks past
//! the last query of a block are skipped.
//!
//! **Backward.** Per batch element, for every (query block, key block) pair the scores are
//! recomputed and turned back into probabilities with the saved log-sum-exp, and four GEMMs
//! accumulate `dV += Pᵀ·dO`, `dQ += dS·K` and `dK += dSᵀ·Q` with
//! `dS = scale · P ∘ (dO·Vᵀ - D)`, `D = rowsum(dO ∘ O)`; the only scratch is two
//! `BLOCK_ROWS × BLOCK_COLS` tiles. For 16-bit operands (widened to f32 by the caller) the
//! saved output is rounded, so `D` is computed as `rowsum(P ∘ dP)` instead, which needs a
//! whole row block's `P` and `dP` (`BLOCK_ROWS × S` each) before its gradients.
//!
//! Operands are read in place through their strides (a head split of a fused projection needs
//! no copy); dropout factors are recomputed from the counter-based generator. Batch elements
//! (and, forward, query blocks) are spread over rayon's threads when the work is large enough.

use super::gemm::{gemm, GemmElement, MatMut, MatRef};
use super::wide::{map_in_place, map_sum_in_place};
use crate::alloc::{checked_len, out_of_memory, try_filled};
use crate::parallel::threads;
use crate::strided::StridedPlan;
use rayon::prelude::*;
use tessera_core::attention::AttentionParams;
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{Distribution, FloatElement, Layout, Result};

/// Queries per block.
pub(crate) const BLOCK_ROWS: usize = 32;
/// Keys per block.
pub(crate) const BLOCK_COLS: usize = 128;
/// Multiply-adds below which everything runs on the calling thread.
const PARALLEL_MACS: usize = 1 << 16;

/// A float type the attention kernels compute in.
pub(crate) trait AttentionFloat: FloatElement + GemmElement {
    /// Uniform sample `index` of stream `seed` in `[0, 1)`, as `Tensor::random` draws it.
    fn uniform(seed: u64, index: u64) -> Self;

    /// `e^self`; for f32 in vector arithmetic ([`super::vector_math::exp`]), so that the loops
    /// over a block of scores vectorise.
    fn exp_in_loop(self) -> Self;
}

const UNIFORM: Distribution = Distribution::Uniform {
    low: 0.0,
    high: 1.0,
};

impl AttentionFloat for f32 {
    fn uniform(seed: u64, index: u64) -> Self {
        sample_f32(UNIFORM, seed, index)
    }

    #[inline(always)]
    fn exp_in_loop(self) -> Self {
        super::vector_math::exp(self)
    }
}

impl AttentionFloat for f64 {
    fn uniform(seed: u64, index: u64) -> Self {
        sample_f64(UNIFORM, seed, index)
    }

    #[inline(always)]
    fn exp_in_loop(self) -> Self {
        self.exp()
    }
}

/// A strided matrix operand: its storage, and the batch plan and row/column strides of its
/// layout `[..b, rows, cols]`.
pub(crate) struct Operand<'a, T> {
    data: &'a [T],
    rows: usize,
    cols: usize,
    rs: usize,
    cs: usize,
}

impl<'a, T> Operand<'a, T> {
    /// The operand over `data` with `layout` (rank >= 2, fitting `data`).
    pub(crate) fn new(data: &'a [T], layout: &Layout) -> Self {
        let r = layout.rank();
        Operand {
            data,
            rows: layout.dims()[r - 2],
            cols: layout.dims()[r - 1],
            rs: layout.strides()[r - 2].max(0) as usize,
            cs: layout.strides()[r - 1].max(0) as usize,
        }
    }
}

/// The attention mask as the kernel reads it: bool bytes or additive values.
pub(crate) enum MaskData<'a, T> {
    /// `true` (non-zero) may attend.
    Bool(&'a [u8]),
    /// Added to the scores.
    Additive(&'a [T]),
}

/// The mask with its row/column strides (layout `[..b, L, S]`).
pub(crate) struct Mask<'a, T> {
    data: MaskData<'a, T>,
    rs: usize,
    cs: usize,
}

impl<'a, T> Mask<'a, T> {
    /// The mask over `data` with `layout`.
    pub(crate) fn new(data: MaskData<'a, T>, layout: &Layout) -> Self {
        let r = layout.rank();
        Mask {
            data,
            rs: layout.strides()[r - 2].max(0) as usize,
            cs: layout.strides()[r - 1].max(0) as usize,
        }
    }
}

/// Everything one attention call reads: the operands, the mask, the per-batch offsets of each
/// (q, k, v, mask, and for the backward pass dO), and the parameters.
pub(crate) struct Problem<'a, T> {
    q: Operand<'a, T>,
    k: Operand<'a, T>,
    v: Operand<'a, T>,
    mask: Option<Mask<'a, T>>,
    offsets: StridedPlan<5>,
    batch: usize,
    scale: T,
    causal: bool,
    dropout: Option<Dropout<T>>,
}

/// Dropout as the kernel applies it.
#[derive(Clone, Copy)]
struct Dropout<T> {
    p: T,
    factor: T,
    seed: u64,
    offset: u64,
}

impl<'a, T: AttentionFloat> Problem<'a, T> {
    /// The problem of `q`, `k`, `v` (with `layouts`, all `[..b, rows, cols]` with the same
    /// batch dimensions, fitting their storages) and an optional mask `[..b, L, S]`; `grad_out`
    /// is the layout of the upstream gradient for the backward pass.
    pub(crate) fn new(
        (q, k, v): (&'a [T], &'a [T], &'a [T]),
        layouts: [&Layout; 3],
        mask: Option<(MaskData<'a, T>, &Layout)>,
        grad_out: Option<&Layout>,
        params: &AttentionParams,
    ) -> Self {
        let rank = layouts[0].rank();
        let batch_dims = &layouts[0].dims()[..rank - 2];
        let zeros = vec![0isize; rank];
        let mask_layout = mask.as_ref().map(|(_, l)| *l);
        let batch_strides = [
            Some(layouts[0]),
            Some(layouts[1]),
            Some(layouts[2]),
            mask_layout,
            grad_out,
        ]
        .map(|l| l.map_or(&zeros[..rank - 2], |l| &l.strides()[..rank - 2]));
        let offsets = StridedPlan::new(
            batch_dims,
            batch_strides,
            [
                layouts[0].offset(),
                layouts[1].offset(),
                layouts[2].offset(),
                mask_layout.map_or(0, Layout::offset),
                grad_out.map_or(0, Layout::offset),
            ],
        );
        Problem {
            q: Operand::new(q, layouts[0]),
            k: Operand::new(k, layouts[1]),
            v: Operand::new(v, layouts[2]),
            mask: mask.map(|(data, layout)| Mask::new(data, layout)),
            batch: batch_dims.iter().product(),
            offsets,
            scale: T::from_f64(params.scale),
            causal: params.causal,
            dropout: params.dropout.map(|d| Dropout {
                p: T::from_f64(d.p),
                factor: T::from_f64(1.0 / (1.0 - d.p)),
                seed: d.seed,
                offset: d.offset,
            }),
        }
    }

    /// Queries per batch element.
    fn l(&self) -> usize {
        self.q.rows
    }
    /// Keys per batch element.
    fn s(&self) -> usize {
        self.k.rows
    }
    /// Query/key features.
    fn e(&self) -> usize {
        self.q.cols
    }
    /// Value features.
    fn ev(&self) -> usize {
        self.v.cols
    }

    /// Whether the work justifies several threads.
    fn parallel(&self) -> bool {
        threads() > 1 && self.batch * self.l() * self.s() * (self.e() + self.ev()) >= PARALLEL_MACS
    }

    /// Keys `0..end` can matter to queries `0..rows_end` (causal masking cuts the rest).
    fn key_end(&self, rows_end: usize) -> usize {
        if self.causal {
            rows_end.min(self.s())
        } else {
            self.s()
        }
    }

    /// The block of scaled, masked scores of queries `i0..i0+br` and keys `j0..j0+bc` of batch
    /// element `b` into `tile` (row stride `bc`): `-inf` where masked.
    fn scores(
        &self,
        offs: &[usize; 5],
        (i0, br): (usize, usize),
        (j0, bc): (usize, usize),
        tile: &mut [T],
    ) {
        let e = self.e();
        let q = self.q.data;
        let k = self.k.data;
        let a_off = offs[0] + i0 * self.q.rs;
        let b_off = offs[1] + j0 * self.k.rs;
        // tile = Q[i0.., :] · K[j0.., :]ᵀ
        checked_gemm(
            (br, e, bc),
            (q, a_off, self.q.rs, self.q.cs),
            (k, b_off, self.k.cs, self.k.rs),
            T::ZERO,
            (tile, 0, bc),
        );
        for r in 0..br {
            let i = i0 + r;
            let row = &mut tile[r * bc..(r + 1) * bc];
            // Causal masking hides keys `j0 + c > i`: the row's tail from `visible` on.
            let visible = match self.causal {
                true => (i + 1).saturating_sub(j0).min(bc),
                false => bc,
            };
            let (kept, hidden) = row.split_at_mut(visible);
            for x in kept {
                *x = *x * self.scale;
            }
            hidden.fill(T::neg_infinity());
            if let Some(m) = &self.mask {
                let base = offs[3] + i * m.rs + j0 * m.cs;
                match &m.data {
                    MaskData::Bool(bits) => {
                        for (c, x) in row.iter_mut().enumerate() {
                            if bits[base + c * m.cs] == 0 {
                                *x = T::neg_infinity();
                            }
                        }
                    }
                    MaskData::Additive(add) => {
                        for (c, x) in row.iter_mut().enumerate() {
                            *x = *x + add[base + c * m.cs];
                        }
                    }
                }
            }
        }
    }

    /// Multiplies the probabilities of `tile` (queries `i0..`, keys `j0..` of batch `b`) by
    /// their dropout factors (0 for dropped weights).
    fn apply_dropout(
        &self,
        b: usize,
        (i0, br): (usize, usize),
        (j0, bc): (usize, usize),
        tile: &mut [T],
    ) {
        let Some(d) = self.dropout else {
            return;
        };
        let (l, s) = (self.l() as u64, self.s() as u64);
        for r in 0..br {
            // Counters wrap modulo 2^64 (the rule of every counter-based draw, see
            // `tessera_core::random`): `offset` may be anywhere, up to `u64::MAX`. The index
            // within the call, `(b·L + i)·S + j`, is below the element count and cannot wrap.
            let index = (b as u64 * l + (i0 + r) as u64) * s + j0 as u64;
            let first = d.offset.wrapping_add(index);
            for (c, x) in tile[r * bc..(r + 1) * bc].iter_mut().enumerate() {
                let u = T::uniform(d.seed, first.wrapping_add(c as u64));
                *x = if u >= d.p { *x * d.factor } else { T::ZERO };
            }
        }
    }

    /// The forward pass of queries `i0..i0+out.len()/ev` of batch element `b`: writes their
    /// output rows and log-sum-exps.
    fn forward_block(&self, b: usize, i0: usize, out: &mut [T], lse: &mut [T], tile: &mut Vec<T>) {
        let (ev, br) = (self.ev(), lse.len());
        let offs = self.offsets.offsets_at(b);
        let mut max = vec![T::neg_infinity(); br];
        let mut sum = vec![T::ZERO; br];
        out.fill(T::ZERO);
        let end = self.key_end(i0 + br);
        let mut j0 = 0;
        while j0 < end {
            let bc = BLOCK_COLS.min(end - j0);
            tile.resize(br * bc, T::ZERO);
            let tile = &mut tile[..br * bc];
            self.scores(&offs, (i0, br), (j0, bc), tile);
            for r in 0..br {
                let row = &mut tile[r * bc..(r + 1) * bc];
                let new_max = max[r].max(row_max(row));
                if new_max == T::neg_infinity() {
                    // Everything so far is masked: no weight, no change.
                    row.fill(T::ZERO);
                    continue;
                }
                let block_sum = exp_shifted_sum(row, new_max);
                if new_max != max[r] {
                    let alpha = (max[r] - new_max).exp_in_loop();
                    sum[r] = sum[r] * alpha;
                    for o in &mut out[r * ev..(r + 1) * ev] {
                        *o = *o * alpha;
                    }
                    max[r] = new_max;
                }
                sum[r] = sum[r] + block_sum;
            }
            self.apply_dropout(b, (i0, br), (j0, bc), tile);
            // out += P · V[j0..]
            let v_off = offs[2] + j0 * self.v.rs;
            checked_gemm(
                (br, bc, ev),
                (tile, 0, bc, 1),
                (self.v.data, v_off, self.v.rs, self.v.cs),
                T::ONE,
                (out, 0, ev),
            );
            j0 += bc;
        }
        for r in 0..br {
            if sum[r] == T::ZERO {
                // A fully masked row: zeros, like PyTorch.
                lse[r] = T::neg_infinity();
                continue;
            }
            let inv = T::ONE / sum[r];
            for o in &mut out[r * ev..(r + 1) * ev] {
                *o = *o * inv;
            }
            lse[r] = max[r] + sum[r].ln();
        }
    }

    /// The attention output `[batch, L, Ev]` and log-sum-exp `[batch, L]`.
    /// The output buffers are allocated fallibly: a request the machine cannot meet is
    /// `Error::OutOfMemory`.
    pub(crate) fn forward(&self) -> Result<(Vec<T>, Vec<T>)> {
        let (l, ev) = (self.l(), self.ev());
        let op = "scaled_dot_product_attention";
        let mut out = try_filled(checked_len(op, &[self.batch, l, ev])?, T::ZERO)?;
        let mut lse = try_filled(checked_len(op, &[self.batch, l])?, T::ZERO)?;
        if lse.is_empty() {
            // No query: nothing to compute, and nothing per batch element to allocate (a batch
            // of 2^32 elements with no queries must not cost 2^32 bookkeeping entries).
            return Ok((out, lse));
        }
        // Below: one job per batch element, and `lse` holds at least one value per element,
        // so the bookkeeping is bounded by the memory already allocated.
        let jobs: Vec<(usize, &mut [T], &mut [T])> = per_batch(&mut out, self.batch, l * ev)?
            .into_iter()
            .zip(per_batch(&mut lse, self.batch, l)?)
            .enumerate()
            .map(|(b, (o, m))| (b, o, m))
            .collect();
        // One job per batch element, its queries in blocks.
        let job = |(b, out_b, lse_b): (usize, &mut [T], &mut [T])| {
            let mut tile = Vec::new();
            for (n, lse_blk) in lse_b.chunks_mut(BLOCK_ROWS).enumerate() {
                let i0 = n * BLOCK_ROWS;
                let out_blk = &mut out_b[i0 * ev..(i0 + lse_blk.len()) * ev];
                self.forward_block(b, i0, out_blk, lse_blk, &mut tile);
            }
        };
        if self.parallel() {
            jobs.into_par_iter().with_max_len(1).for_each(job);
        } else {
            jobs.into_iter().for_each(job);
        }
        Ok((out, lse))
    }
}

/// Independent partial maxima of [`row_max`]: enough for the compiler to keep them in vector
/// registers (a fold over one accumulator runs at one comparison's latency per element).
const LANES: usize = 16;

/// The largest value of `row` (`-inf` when empty; NaNs are skipped, as `max` skips them).
fn row_max<T: AttentionFloat>(row: &[T]) -> T {
    let mut lanes = [T::neg_infinity(); LANES];
    let mut chunks = row.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (m, &x) in lanes.iter_mut().zip(chunk) {
            *m = m.max(x);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(T::neg_infinity(), |m, &x| m.max(x));
    lanes.iter().fold(tail, |m, &x| m.max(x))
}

/// Replaces every `x` of `row` by `e^(x - shift)` and returns their sum (summed in 16 partial
/// sums, then those in order), with the widest vectors the CPU has.
fn exp_shifted_sum<T: AttentionFloat>(row: &mut [T], shift: T) -> T {
    map_sum_in_place(row, &|x: T| (x - shift).exp_in_loop())
}

/// `data` cut into `n` consecutive slices of `each` elements (empty ones when `each` is 0).
/// The list is allocated fallibly: `n` comes from a shape, not from `data`'s length.
fn per_batch<T>(mut data: &mut [T], n: usize, each: usize) -> Result<Vec<&mut [T]>> {
    let mut parts = Vec::new();
    parts
        .try_reserve_exact(n)
        .map_err(|_| out_of_memory::<&mut [T]>(n))?;
    for _ in 0..n {
        let (head, tail) = std::mem::take(&mut data).split_at_mut(each);
        parts.push(head);
        data = tail;
    }
    Ok(parts)
}

/// The saved forward results and upstream gradient of one backward pass.
pub(crate) struct Saved<'a, T> {
    /// The upstream gradient `dO` (strided, `[..b, L, Ev]`).
    pub(crate) grad_out: Operand<'a, T>,
    /// The forward output, contiguous `[batch, L, Ev]`, when it holds f32/f64 values; `None`
    /// for a 16-bit problem, whose saved output was rounded to 16 bits (`D = rowsum(dO ∘ O)`
    /// subtracted from `dP` cancels, so that rounding would cost the gradients of `q` and `k`
    /// more than an ulp): the backward pass then computes `D` from `P` and `dP` instead.
    pub(crate) out: Option<&'a [T]>,
    /// The log-sum-exp, contiguous `[batch, L]`.
    pub(crate) lse: &'a [T],
}

/// One backward job: a batch index and its `dQ`, `dK`, `dV` slices.
type BackwardJob<'g, T> = (usize, ((&'g mut [T], &'g mut [T]), &'g mut [T]));

/// The queries `rows = (i0, br)` and keys `cols = (j0, bc)` of batch element `b`.
#[derive(Clone, Copy)]
struct Tile {
    b: usize,
    rows: (usize, usize),
    cols: (usize, usize),
}

impl Tile {
    /// Where the tile lies in a row block's scratch buffer (tiles of `br` rows one after
    /// another, key block by key block).
    fn span(&self) -> std::ops::Range<usize> {
        let (br, (j0, bc)) = (self.rows.1, self.cols);
        br * j0..br * (j0 + bc)
    }
}

/// Gradient buffers of one batch element: `dQ [L, E]`, `dK [S, E]`, `dV [S, Ev]`.
struct GradsOf<'g, T> {
    dq: &'g mut [T],
    dk: &'g mut [T],
    dv: &'g mut [T],
}

impl<T: AttentionFloat> Problem<'_, T> {
    /// `(dQ, dK, dV)`, each contiguous `[batch, rows, cols]`.
    /// The gradient buffers are allocated fallibly (`Error::OutOfMemory`).
    pub(crate) fn backward(&self, saved: &Saved<'_, T>) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
        let (l, s, e, ev) = (self.l(), self.s(), self.e(), self.ev());
        let op = "scaled_dot_product_attention_backward";
        let zeros = |dims: &[usize]| try_filled(checked_len(op, dims)?, T::ZERO);
        let mut dq = zeros(&[self.batch, l, e])?;
        let mut dk = zeros(&[self.batch, s, e])?;
        let mut dv = zeros(&[self.batch, s, ev])?;
        let no_gradient = dq.is_empty() && dk.is_empty() && dv.is_empty();
        if self.batch == 0 || l == 0 || s == 0 || no_gradient {
            return Ok((dq, dk, dv));
        }
        // One job per batch element; `saved.lse` holds `batch · L >= batch` values, so the
        // bookkeeping is bounded by memory already allocated.
        let jobs: Vec<_> = per_batch(&mut dq, self.batch, l * e)?
            .into_iter()
            .zip(per_batch(&mut dk, self.batch, s * e)?)
            .zip(per_batch(&mut dv, self.batch, s * ev)?)
            .enumerate()
            .collect();
        let job = |(b, ((dq, dk), dv)): BackwardJob<'_, T>| {
            self.backward_batch(b, saved, GradsOf { dq, dk, dv });
        };
        if self.parallel() {
            jobs.into_par_iter().with_max_len(1).for_each(job);
        } else {
            jobs.into_iter().for_each(job);
        }
        Ok((dq, dk, dv))
    }

    /// The gradients of batch element `b`.
    fn backward_batch(&self, b: usize, saved: &Saved<'_, T>, mut g: GradsOf<'_, T>) {
        let (l, ev) = (self.l(), self.ev());
        let offs = self.offsets.offsets_at(b);
        let go = &saved.grad_out;
        let lse = &saved.lse[b * l..(b + 1) * l];
        let mut p = Vec::new();
        let mut dp = Vec::new();
        let Some(out) = saved.out else {
            self.backward_batch_without_output(b, &offs, go, lse, g);
            return;
        };
        let out = &out[b * l * ev..(b + 1) * l * ev];
        // D[i] = dO[i] · O[i]
        let d: Vec<T> = (0..l)
            .map(|i| {
                let base = offs[4] + i * go.rs;
                (0..ev).fold(T::ZERO, |acc, c| {
                    acc + go.data[base + c * go.cs] * out[i * ev + c]
                })
            })
            .collect();
        let mut i0 = 0;
        while i0 < l {
            let br = BLOCK_ROWS.min(l - i0);
            let end = self.key_end(i0 + br);
            let mut j0 = 0;
            while j0 < end {
                let bc = BLOCK_COLS.min(end - j0);
                p.resize(br * bc, T::ZERO);
                dp.resize(br * bc, T::ZERO);
                let (p, dp) = (&mut p[..br * bc], &mut dp[..br * bc]);
                let tile = Tile {
                    b,
                    rows: (i0, br),
                    cols: (j0, bc),
                };
                self.probabilities_and_dp(&offs, go, lse, tile, p, dp);
                self.tile_gradients(&offs, go, &d[i0..i0 + br], tile, p, dp, &mut g);
                j0 += bc;
            }
            i0 += br;
        }
    }

    /// [`Problem::backward_batch`] without the forward output (16-bit problems: the saved
    /// output was rounded to 16 bits, see [`Saved::out`]): `D = rowsum(P ∘ dP)` (with dP
    /// carrying the dropout factors), which equals `rowsum(dO ∘ O)` since `O = P·V` and
    /// `dP = dO·Vᵀ`, from f32 intermediates. A whole row block's `P` and `dP` are kept for
    /// that (two `BLOCK_ROWS x S` scratch buffers, tile after tile) before its gradients are
    /// accumulated.
    fn backward_batch_without_output(
        &self,
        b: usize,
        offs: &[usize; 5],
        go: &Operand<'_, T>,
        lse: &[T],
        mut g: GradsOf<'_, T>,
    ) {
        let l = self.l();
        let mut p_row = Vec::new();
        let mut dp_row = Vec::new();
        let mut d = [T::ZERO; BLOCK_ROWS];
        let mut i0 = 0;
        while i0 < l {
            let br = BLOCK_ROWS.min(l - i0);
            let end = self.key_end(i0 + br);
            // Tile `(i0, j0)` lives at `br * j0..br * (j0 + bc)` of the row buffers.
            p_row.resize(br * end, T::ZERO);
            dp_row.resize(br * end, T::ZERO);
            let d = &mut d[..br];
            d.fill(T::ZERO);
            let tiles = || {
                (0..end).step_by(BLOCK_COLS).map(move |j0| Tile {
                    b,
                    rows: (i0, br),
                    cols: (j0, BLOCK_COLS.min(end - j0)),
                })
            };
            for tile in tiles() {
                let span = tile.span();
                let (p, dp) = (&mut p_row[span.clone()], &mut dp_row[span]);
                self.probabilities_and_dp(offs, go, lse, tile, p, dp);
                let bc = tile.cols.1;
                for (r, sum) in d.iter_mut().enumerate() {
                    let row = r * bc..(r + 1) * bc;
                    *sum = p[row.clone()]
                        .iter()
                        .zip(&dp[row])
                        .fold(*sum, |acc, (&x, &y)| acc + x * y);
                }
            }
            for tile in tiles() {
                let span = tile.span();
                let (p, dp) = (&mut p_row[span.clone()], &mut dp_row[span]);
                self.tile_gradients(offs, go, d, tile, p, dp, &mut g);
            }
            i0 += br;
        }
    }

    /// The probabilities of `tile` into `p` (recomputed from the scores and the saved
    /// log-sum-exp) and `dP = dO·Vᵀ` into `dp`, times the dropout factors (0 where a weight
    /// was dropped) under dropout; both row-major with row stride `tile.cols.1`.
    fn probabilities_and_dp(
        &self,
        offs: &[usize; 5],
        go: &Operand<'_, T>,
        lse: &[T],
        tile: Tile,
        p: &mut [T],
        dp: &mut [T],
    ) {
        let ((i0, br), (j0, bc)) = (tile.rows, tile.cols);
        self.scores(offs, (i0, br), (j0, bc), p);
        for r in 0..br {
            let shift = lse[i0 + r];
            let row = &mut p[r * bc..(r + 1) * bc];
            if shift == T::neg_infinity() {
                row.fill(T::ZERO);
            } else {
                map_in_place(row, &|x: T| (x - shift).exp_in_loop());
            }
        }
        // dp = dO[i0..] · V[j0..]ᵀ
        checked_gemm(
            (br, self.ev(), bc),
            (go.data, offs[4] + i0 * go.rs, go.rs, go.cs),
            (self.v.data, offs[2] + j0 * self.v.rs, self.v.cs, self.v.rs),
            T::ZERO,
            (dp, 0, bc),
        );
        self.apply_dropout(tile.b, (i0, br), (j0, bc), dp);
    }

    /// Accumulates `tile`'s share of the gradients from its probabilities `p` and `dp` (as
    /// [`Problem::probabilities_and_dp`] left them) and the rows' `d` (`D` of rows `i0..`):
    /// `dV += Pᵀ·dO` (with the dropped probabilities under dropout), then
    /// `dS = scale · P ∘ (dP - D)` into `dp`, `dQ += dS·K` and `dK += dSᵀ·Q`.
    #[allow(clippy::too_many_arguments)]
    fn tile_gradients(
        &self,
        offs: &[usize; 5],
        go: &Operand<'_, T>,
        d: &[T],
        tile: Tile,
        p: &[T],
        dp: &mut [T],
        g: &mut GradsOf<'_, T>,
    ) {
        let ((i0, br), (j0, bc)) = (tile.rows, tile.cols);
        let e = self.e();
        if self.dropout.is_some() {
            let mut dropped = p.to_vec();
            self.apply_dropout(tile.b, (i0, br), (j0, bc), &mut dropped);
            self.accumulate_dv(&dropped, (i0, br), (j0, bc), offs, go, g.dv);
        } else {
            self.accumulate_dv(p, (i0, br), (j0, bc), offs, go, g.dv);
        }
        // dS = scale · P ∘ (dP - D), into dp.
        for (r, &di) in d.iter().enumerate().take(br) {
            let rows = p[r * bc..(r + 1) * bc].iter();
            for (x, &pr) in dp[r * bc..(r + 1) * bc].iter_mut().zip(rows) {
                *x = pr * (*x - di) * self.scale;
            }
        }
        // dQ[i0..] += dS · K[j0..]
        checked_gemm(
            (br, bc, e),
            (dp, 0, bc, 1),
            (self.k.data, offs[1] + j0 * self.k.rs, self.k.rs, self.k.cs),
            T::ONE,
            (g.dq, i0 * e, e),
        );
        // dK[j0..] += dSᵀ · Q[i0..]
        checked_gemm(
            (bc, br, e),
            (dp, 0, 1, bc),
            (self.q.data, offs[0] + i0 * self.q.rs, self.q.rs, self.q.cs),
            T::ONE,
            (g.dk, j0 * e, e),
        );
    }

    /// `dV[j0..] += Pᵀ · dO[i0..]`.
    fn accumulate_dv(
        &self,
        p: &[T],
        (i0, br): (usize, usize),
        (j0, bc): (usize, usize),
        offs: &[usize; 5],
        go: &Operand<'_, T>,
        dv: &mut [T],
    ) {
        let ev = self.ev();
        checked_gemm(
            (bc, br, ev),
            (p, 0, 1, bc),
            (go.data, offs[4] + i0 * go.rs, go.rs, go.cs),
            T::ONE,
            (dv, j0 * ev, ev),
        );
    }
}

/// The largest index `offset + (rows - 1)·rs + (cols - 1)·cs` of a `rows × cols` matrix.
fn last_index(offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> usize {
    offset + (rows - 1) * rs + (cols - 1) * cs
}

/// `C = A·B + beta·C` for `A: m × k` at `a.0[a.1..]` with strides `(a.2, a.3)`, likewise `B`,
/// and a row-major `C` at `c.0[c.1..]` with row stride `c.2`. Panics if an operand reaches
/// past its slice (the callers' layouts are checked to fit, so this guards the unsafe call).
fn checked_gemm<T: GemmElement>(
    (m, k, n): (usize, usize, usize),
    a: (&[T], usize, usize, usize),
    b: (&[T], usize, usize, usize),
    beta: T,
    c: (&mut [T], usize, usize),
) {
    if m == 0 || n == 0 {
        return;
    }
    if k > 0 {
        assert!(
            last_index(a.1, m, k, a.2, a.3) < a.0.len(),
            "attention: A out of bounds"
        );
        assert!(
            last_index(b.1, k, n, b.2, b.3) < b.0.len(),
            "attention: B out of bounds"
        );
    }
    assert!(
        last_index(c.1, m, n, c.2, 1) < c.0.len(),
        "attention: C out of bounds"
    );
    let a_ref = MatRef {
        ptr: a.0.as_ptr().wrapping_add(a.1),
        rs: a.2 as isize,
        cs: a.3 as isize,
    };
    let b_ref = MatRef {
        ptr: b.0.as_ptr().wrapping_add(b.1),
        rs: b.2 as isize,
        cs: b.3 as isize,
    };
    let c_mut = MatMut {
        ptr: c.0[c.1..].as_mut_ptr(),
        rs: c.2 as isize,
        cs: 1,
    };
    // SAFETY: every element of A, B and C lies inside its slice (asserted above; with k = 0 the
    // A and B pointers are never read), C is borrowed mutably so it aliases neither, and the
    // call runs on this thread.
    unsafe { gemm((m, k, n), a_ref, b_ref, beta, c_mut) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::attention::AttentionDropout;

    /// `n` values in `[-1.5, 1.5)` from `seed`.
    fn values(seed: u64, n: usize) -> Vec<f64> {
        (0..n)
            .map(|i| 3.0 * f64::uniform(seed, i as u64) - 1.5)
            .collect()
    }

    /// The lane-wise row reductions against plain folds, at lengths around the lane count,
    /// with masked (`-inf`) keys, NaNs and an empty row.
    #[test]
    fn row_max_and_exp_shifted_sum_match_plain_folds() {
        for n in [0, 1, 5, LANES - 1, LANES, LANES + 1, 3 * LANES + 7] {
            for case in 0..3 {
                let mut row: Vec<f32> = values(n as u64 + 9, n).iter().map(|&x| x as f32).collect();
                match case {
                    1 => row
                        .iter_mut()
                        .skip(2)
                        .step_by(3)
                        .for_each(|x| *x = f32::NEG_INFINITY),
                    2 => row.iter_mut().step_by(4).for_each(|x| *x = f32::NAN),
                    _ => {}
                }
                let want = row.iter().fold(f32::NEG_INFINITY, |m, &x| m.max(x));
                assert_eq!(row_max(&row).to_bits(), want.to_bits(), "max of {row:?}");
                if case == 2 {
                    continue;
                }
                let shift = want.max(0.0);
                let mut got = row.clone();
                let sum = exp_shifted_sum(&mut got, shift);
                let exact: f64 = row.iter().map(|&x| (x as f64 - shift as f64).exp()).sum();
                assert!(
                    (sum as f64 - exact).abs() <= 1e-6 * exact.max(1.0),
                    "{sum} vs {exact}"
                );
                for (x, y) in row.iter().zip(&got) {
                    assert_eq!(y.to_bits(), (x - shift).exp_in_loop().to_bits());
                }
            }
        }
    }

    /// `D` from the forward output and `D` from `P ∘ dP` (the 16-bit problems' route) are the
    /// same quantity: the gradients of both routes agree to f64 rounding, over several row and
    /// key blocks, with causal masking, an additive mask and dropout.
    #[test]
    fn gradients_without_the_forward_output_equal_those_with_it() {
        let (batch, l, s, e, ev) = (2, 2 * BLOCK_ROWS + 5, BLOCK_COLS + 40, 6, 5);
        let q = values(1, batch * l * e);
        let k = values(2, batch * s * e);
        let v = values(3, batch * s * ev);
        let go = values(4, batch * l * ev);
        let additive = values(5, l * s);
        let layout = |rows, cols| Layout::contiguous(vec![batch, rows, cols]);
        let (ql, kl, vl, gl) = (layout(l, e), layout(s, e), layout(s, ev), layout(l, ev));
        // The mask broadcast over the batch.
        let mask_layout = Layout::contiguous(vec![l, s])
            .broadcast_to(&tessera_core::Shape::new(vec![batch, l, s]))
            .expect("broadcastable");
        for causal in [false, true] {
            for dropout in [None, Some(0.25)] {
                for masked in [false, true] {
                    let params = AttentionParams {
                        scale: 0.4,
                        causal,
                        dropout: dropout.map(|p| AttentionDropout {
                            p,
                            seed: 7,
                            offset: 11,
                        }),
                    };
                    let mask = masked.then(|| (MaskData::Additive(&additive[..]), &mask_layout));
                    let problem =
                        Problem::new((&q, &k, &v), [&ql, &kl, &vl], mask, Some(&gl), &params);
                    let (out, lse) = problem.forward().expect("forward");
                    let saved = |out| Saved {
                        grad_out: Operand::new(&go, &gl),
                        out,
                        lse: &lse,
                    };
                    let with = problem.backward(&saved(Some(&out))).expect("with O");
                    let without = problem.backward(&saved(None)).expect("without O");
                    let case = format!("causal {causal}, dropout {dropout:?}, mask {masked}");
                    for (name, a, b) in [
                        ("dq", &with.0, &without.0),
                        ("dk", &with.1, &without.1),
                        ("dv", &with.2, &without.2),
                    ] {
                        let scale = a.iter().fold(1.0f64, |m, x| m.max(x.abs()));
                        for (i, (x, y)) in a.iter().zip(b).enumerate() {
                            assert!(
                                (x - y).abs() <= 1e-12 * scale,
                                "{case}: {name}[{i}] {x} vs {y}"
                            );
                        }
                    }
                }
            }
        }
    }
}
