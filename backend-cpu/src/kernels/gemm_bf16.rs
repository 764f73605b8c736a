//! A bf16 GEMM on the AVX-512 BF16 dot-product instruction (`vdpbf16ps`), for CPUs that have
//! it (`avx512_bf16`: Zen 4 and later, Cooper Lake, Sapphire Rapids), and the choice between
//! it, AMX tiles ([`super::gemm_amx`], preferred where present: on Intel's cores
//! `vdpbf16ps` runs at half an f32 FMA's rate) and widening to f32 ([`try_matmul`]).
//!
//! `vdpbf16ps` multiplies 32 pairs of bf16 values and adds each pair's two products into one
//! of 16 f32 lanes: twice the multiply-adds of an f32 FMA per instruction. Operands are packed
//! once, in 32-bit *words* that hold two bf16 values adjacent along k (the low half the even
//! step): A as panels of [`MR`] rows, word `(panel, pair, row)` at
//! `(panel * pairs + pair) * MR + row`, and B as panels of [`NR`] columns, word
//! `(panel, pair, col)` at `(panel * pairs + pair) * NR + col` (zeros past the last row, column
//! or step). A micro-kernel multiplies one A panel by
//! one B panel over a block of pairs and adds the `MR x NR` products into the f32 output in
//! place (its accumulators start from the output's values; tiles cut by the output's edge go
//! through a small buffer); the output is rounded once to bf16 at the end (nearest even), as
//! every other 16-bit op of this backend.
//!
//! The instruction treats bf16 subnormal inputs as zero and flushes subnormal results (as
//! PyTorch's and oneDNN's bf16 GEMMs on the same instruction do); with f32 accumulation over
//! products of normal values that only changes results below f32's normal range.
//!
//! The `unsafe` code is the micro-kernel (the intrinsics), which reads and writes through
//! slices whose lengths it asserts, the call of the f32 GEMM's transposing packer on pair words
//! (bounds asserted; AVX-512 only, so not under Miri) and the view of a task's written f32
//! buffer as initialised. [`portable_tile`] computes the same tile in scalar f32, and runs the
//! packing and blocking under Miri (`miri_` tests).

use super::gemm::{chosen_path, GemmPath};
use crate::alloc::{try_uninit, try_zeroed};
use crate::CpuStorage;
use rayon::prelude::*;
use std::mem::MaybeUninit;
use tessera_core::{bf16, Error, Layout, Result};

/// Rows of an A panel (and of the micro-kernel's tile).
pub(crate) const MR: usize = 12;
/// Columns of a B panel: two 16-lane vectors.
pub(crate) const NR: usize = 32;
/// Pairs of k steps per block: an A panel block is `KC * MR * 4` = 12 KiB, a B panel block
/// `KC * NR * 4` = 32 KiB.
pub(crate) const KC: usize = 256;
/// A panels per parallel task (96 rows).
const PANELS_PER_TASK: usize = 8;
/// Multiply-adds below which the product runs on the calling thread.
const PARALLEL_MACS: usize = 1 << 18;

/// A strided bf16 matrix: element `(r, c)` at `data[offset + r * rs + c * cs]`.
#[derive(Clone, Copy)]
pub(crate) struct Bf16Matrix<'a> {
    pub(crate) data: &'a [bf16],
    pub(crate) offset: usize,
    pub(crate) rows: usize,
    pub(crate) cols: usize,
    pub(crate) rs: usize,
    pub(crate) cs: usize,
}

impl Bf16Matrix<'_> {
    /// The bits of element `(r, c)`, 0 outside the matrix (the zero padding of the panels).
    fn bits(&self, r: usize, c: usize) -> u32 {
        if r < self.rows && c < self.cols {
            u32::from(self.data[self.offset + r * self.rs + c * self.cs].to_bits())
        } else {
            0
        }
    }

    /// Errors unless every element lies in `data` (checked arithmetic).
    pub(crate) fn check_in_bounds(&self) -> Result<()> {
        if self.rows == 0 || self.cols == 0 {
            return Ok(());
        }
        let last = (self.rows - 1)
            .checked_mul(self.rs)
            .zip((self.cols - 1).checked_mul(self.cs))
            .and_then(|(r, c)| r.checked_add(c))
            .and_then(|e| e.checked_add(self.offset));
        match last {
            Some(last) if last < self.data.len() => Ok(()),
            _ => Err(Error::InvalidArgument {
                op: "matmul",
                msg: format!(
                    "a {}x{} bf16 operand at offset {} with strides ({}, {}) leaves a storage of \
                     {} elements",
                    self.rows,
                    self.cols,
                    self.offset,
                    self.rs,
                    self.cs,
                    self.data.len()
                ),
            }),
        }
    }
}

/// A zero-filled vector of `len` elements, or a typed out-of-memory error.
pub(crate) fn zeroed<T: Clone + Default>(len: usize) -> Result<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        device: "cpu".to_string(),
        requested_bytes: len.saturating_mul(std::mem::size_of::<T>()),
    })?;
    v.resize(len, T::default());
    Ok(v)
}

/// Packs `lines` lines of `len` bf16 values with a unit step (line `i` starting at
/// `data[offset + i * stride]`) as panels of `width` lines of k-pair words, panel `q`'s word
/// `(pair, line)` at `out[q * width * pairs + pair * width + line]`: two adjacent bf16 values
/// of a line *are* its pair word (little-endian, the even step low), so this is a transpose of
/// 32-bit words, done by the f32 GEMM's AVX-512 packer 16 x 16 words at a time; the last pair
/// of an odd `len` is filled here, its high half zero. Words of lines past `lines` and pairs
/// past `len / 2` (or the half pair) are left as they are. Returns `false`, having written
/// nothing, where the packer is absent (no AVX-512, Miri) or `stride` is odd (a line's pairs
/// would not be whole words apart).
///
/// The caller has checked that every element named lies in `data`
/// ([`Bf16Matrix::check_in_bounds`]).
#[allow(unused_variables)]
fn pack_word_lines(
    out: &mut [u32],
    (data, offset, stride): (&[bf16], usize, usize),
    (lines, len): (usize, usize),
    (width, pairs): (usize, usize),
) -> bool {
    #[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
    {
        if stride % 2 != 0 || !std::is_x86_feature_detected!("avx512f") {
            return false;
        }
        let whole = len / 2;
        assert!(
            lines == 0 || len == 0 || offset + (lines - 1) * stride + len <= data.len(),
            "lines past the data"
        );
        assert!(out.len() >= lines.div_ceil(width) * width * pairs && whole <= pairs);
        for (q, panel) in out
            .chunks_exact_mut(width * pairs)
            .take(lines.div_ceil(width))
            .enumerate()
        {
            let first = q * width;
            let used = width.min(lines - first);
            if whole > 0 {
                // SAFETY: the CPU has AVX-512F (checked above); the packer reads lines
                // `first..first + used` at words `0..whole`, i.e. bf16 values up to
                // `offset + (lines - 1) * stride + 2 * whole - 1 < data.len()` (asserted), and
                // writes `whole * width <= panel.len()` words of `panel` (asserted); the
                // pointer casts only reinterpret 32-bit words, which the packer moves with
                // unaligned loads and stores.
                unsafe {
                    super::gemm::transpose_f32(
                        panel.as_mut_ptr().cast(),
                        data.as_ptr().add(offset + first * stride).cast(),
                        (stride / 2) as isize,
                        used,
                        whole,
                        width,
                    );
                }
            }
            if len % 2 == 1 {
                let words = &mut panel[whole * width..whole * width + used];
                for (i, w) in words.iter_mut().enumerate() {
                    *w = u32::from(data[offset + (first + i) * stride + len - 1].to_bits());
                }
            }
        }
        true
    }
    #[cfg(not(all(target_arch = "x86_64", tessera_avx512, not(miri))))]
    false
}

/// A (`m x k`) packed into panels of [`MR`] rows of k-pair words (see the module docs),
/// walking whichever of A's dimensions is contiguous in memory (the words past the last row
/// or step stay zero).
fn pack_a(a: &Bf16Matrix, pairs: usize) -> Result<Vec<u32>> {
    let panels = a.rows.div_ceil(MR);
    let mut out = zeroed(panels * pairs * MR)?;
    if a.cs == 1
        && pack_word_lines(
            &mut out,
            (a.data, a.offset, a.rs),
            (a.rows, a.cols),
            (MR, pairs),
        )
    {
        return Ok(out);
    }
    let word = |lo: bf16, hi: bf16| u32::from(lo.to_bits()) | (u32::from(hi.to_bits()) << 16);
    let whole_pairs = a.cols / 2;
    for (panel, words) in out.chunks_exact_mut(pairs * MR).enumerate() {
        let first = panel * MR;
        let rows = MR.min(a.rows - first);
        if a.cs == 1 {
            // Row-major: each row's pairs are adjacent in memory.
            for row in 0..rows {
                let start = a.offset + (first + row) * a.rs;
                let values = &a.data[start..start + a.cols];
                let dst = words[row..].iter_mut().step_by(MR);
                let (even, last) = values.split_at(2 * whole_pairs);
                let pairs = even.chunks_exact(2).map(|p| word(p[0], p[1]));
                let tail = last.iter().map(|&v| word(v, bf16::ZERO));
                for (w, v) in dst.zip(pairs.chain(tail)) {
                    *w = v;
                }
            }
        } else if a.rs == 1 {
            // Column-major (a transposed view): a panel's rows of one step are adjacent.
            let column = |c: usize| {
                let start = a.offset + c * a.cs + first;
                &a.data[start..start + rows]
            };
            for (pair, step) in words.chunks_exact_mut(MR).enumerate() {
                let lo = column(2 * pair);
                if 2 * pair + 1 < a.cols {
                    let hi = column(2 * pair + 1);
                    for ((w, &l), &h) in step.iter_mut().zip(lo).zip(hi) {
                        *w = word(l, h);
                    }
                } else {
                    for (w, &l) in step.iter_mut().zip(lo) {
                        *w = word(l, bf16::ZERO);
                    }
                }
            }
        } else {
            for (pair, step) in words.chunks_exact_mut(MR).enumerate() {
                for (row, w) in step.iter_mut().enumerate() {
                    let r = first + row;
                    *w = a.bits(r, 2 * pair) | (a.bits(r, 2 * pair + 1) << 16);
                }
            }
        }
    }
    Ok(out)
}

/// B (`k x n`) packed into panels of [`NR`] columns of k-pair words (see the module docs),
/// walking whichever of B's dimensions is contiguous in memory.
pub(crate) fn pack_b(b: &Bf16Matrix, pairs: usize) -> Result<Vec<u32>> {
    let mut out = zeroed(b.cols.div_ceil(NR) * pairs * NR)?;
    pack_b_into(&mut out, b, pairs);
    Ok(out)
}

/// [`pack_b`] into `out`, which holds `b.cols.div_ceil(NR) * pairs * NR` zeros (the padding
/// is not written).
pub(crate) fn pack_b_into(out: &mut [u32], b: &Bf16Matrix, pairs: usize) {
    let panels = b.cols.div_ceil(NR);
    assert_eq!(out.len(), panels * pairs * NR, "packed B length");
    if b.rs == 1
        && b.cs != 1
        && pack_word_lines(out, (b.data, b.offset, b.cs), (b.cols, b.rows), (NR, pairs))
    {
        return;
    }
    let at = |r: usize, c: usize| b.data[b.offset + r * b.rs + c * b.cs].to_bits();
    let word = |lo: u16, hi: u16| u32::from(lo) | (u32::from(hi) << 16);
    let filled_pairs = pairs.min(b.rows.div_ceil(2));
    if b.rs <= b.cs {
        // Column-major (a transposed view): each column's pairs are adjacent in memory.
        for c in 0..b.cols {
            let (panel, col) = (c / NR, c % NR);
            let dst = out[panel * pairs * NR + col..].iter_mut().step_by(NR);
            let start = b.offset + c * b.cs;
            if b.rs == 1 {
                let column = &b.data[start..start + b.rows];
                let (whole, last) = column.split_at(b.rows - b.rows % 2);
                let words = whole
                    .chunks_exact(2)
                    .map(|p| word(p[0].to_bits(), p[1].to_bits()))
                    .chain(last.iter().map(|v| word(v.to_bits(), 0)));
                for (w, v) in dst.zip(words) {
                    *w = v;
                }
            } else {
                for (pair, w) in dst.take(filled_pairs).enumerate() {
                    let hi = if 2 * pair + 1 < b.rows {
                        at(2 * pair + 1, c)
                    } else {
                        0
                    };
                    *w = word(at(2 * pair, c), hi);
                }
            }
        }
    } else {
        // Row-major: two rows at a time, each read along its length, one panel's run of
        // columns after another.
        for pair in 0..filled_pairs {
            let (even, odd) = (2 * pair, 2 * pair + 1);
            for panel in 0..panels {
                let first = panel * NR;
                let run = NR.min(b.cols - first);
                let dst = &mut out[(panel * pairs + pair) * NR..][..run];
                let start = b.offset + first * b.cs;
                if b.cs == 1 && odd < b.rows {
                    let lo = &b.data[start + even * b.rs..][..run];
                    let hi = &b.data[start + odd * b.rs..][..run];
                    for ((w, l), h) in dst.iter_mut().zip(lo).zip(hi) {
                        *w = word(l.to_bits(), h.to_bits());
                    }
                } else {
                    for (col, w) in dst.iter_mut().enumerate() {
                        let hi = if odd < b.rows {
                            at(odd, first + col)
                        } else {
                            0
                        };
                        *w = word(at(even, first + col), hi);
                    }
                }
            }
        }
    }
}

/// The kernel that multiplies bf16 matrices in this process.
#[derive(Clone, Copy)]
enum Bf16Gemm {
    /// AMX tiles ([`super::gemm_amx`]).
    Amx,
    /// The `vdpbf16ps` micro-kernel of this module.
    Dot(TileFn),
    /// None: the caller widens to f32, runs the f32 GEMM and rounds back.
    Widen,
}

/// The bf16 GEMM this process uses (chosen once): AMX where the CPU and kernel give it, else
/// `vdpbf16ps`, else widening; [`BF16_GEMM_ENV_VAR`] narrows the choice, and a GEMM path
/// other than AVX-512 (`TESSERA_CPU_GEMM=avx2|portable`) widens.
fn chosen_gemm() -> Bf16Gemm {
    static CHOSEN: std::sync::OnceLock<Bf16Gemm> = std::sync::OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let asked = std::env::var(BF16_GEMM_ENV_VAR)
            .map(|v| v.trim().to_ascii_lowercase())
            .unwrap_or_default();
        if asked == "widen" || chosen_path() != GemmPath::Avx512 {
            return Bf16Gemm::Widen;
        }
        if asked != "dot" && super::gemm_amx::available() {
            return Bf16Gemm::Amx;
        }
        match fast_kernel() {
            Some(kernel) => Bf16Gemm::Dot(kernel),
            None => Bf16Gemm::Widen,
        }
    })
}

/// How this process multiplies bf16 matrices, for reports.
pub(crate) fn description() -> &'static str {
    match chosen_gemm() {
        Bf16Gemm::Amx => "amx 32x32 tiles",
        Bf16Gemm::Dot(_) => "avx512-bf16 dot 12x32",
        Bf16Gemm::Widen => "widened to f32",
    }
}

/// The two bf16 values of a packed word, as f32 (exact): (even step, odd step).
#[cfg(test)]
fn halves(word: u32) -> (f32, f32) {
    (
        f32::from_bits(word << 16),
        f32::from_bits(word & 0xffff_0000),
    )
}

/// A micro-kernel: the `MR x NR` products of one A panel block (`pairs * MR` words) by one B
/// panel block (`pairs * NR` words), added into (`accumulate`) or written over (otherwise, the
/// tile is then not read) the tile whose row `i` is `c[i * ldc..i * ldc + NR]` (`c` holds at
/// least `(MR - 1) * ldc + NR` values, `ldc >= NR`; it panics otherwise). It writes every
/// value of the tile.
///
/// # Safety
/// With `accumulate`, every value of the tile must be initialised.
pub(crate) type TileFn = unsafe fn(&[u32], &[u32], &mut [MaybeUninit<f32>], usize, bool);

/// Checks a [`TileFn`]'s operands (panics on a violated contract: the callers are this module's
/// loops) and returns the number of pairs.
fn tile_pairs(a: &[u32], b: &[u32], c: &[MaybeUninit<f32>], ldc: usize) -> usize {
    let pairs = a.len() / MR;
    assert!(
        a.len() == pairs * MR && b.len() == pairs * NR,
        "panel lengths"
    );
    assert!(
        ldc >= NR && c.len() >= (MR - 1) * ldc + NR,
        "tile of {} values with row stride {ldc}",
        c.len()
    );
    pairs
}

/// The tile in scalar f32, each pair's odd product added before its even one (the order of
/// `vdpbf16ps`). The tests' twin of the kernel, and what runs the packing and blocking under
/// Miri (which has no AVX-512); CPUs without the instruction never reach this module.
///
/// # Safety
/// As for [`TileFn`].
#[cfg(test)]
unsafe fn portable_tile(
    a: &[u32],
    b: &[u32],
    c: &mut [MaybeUninit<f32>],
    ldc: usize,
    accumulate: bool,
) {
    let pairs = tile_pairs(a, b, c, ldc);
    if !accumulate {
        for i in 0..MR {
            c[i * ldc..i * ldc + NR].fill(MaybeUninit::new(0.0));
        }
    }
    // SAFETY: the tile's values were written above, or by the caller (`accumulate`, the
    // contract).
    let value = |c: &[MaybeUninit<f32>], at: usize| unsafe { c[at].assume_init() };
    for p in 0..pairs {
        let (a_words, b_words) = (&a[p * MR..(p + 1) * MR], &b[p * NR..(p + 1) * NR]);
        for (i, &aw) in a_words.iter().enumerate() {
            let (a0, a1) = halves(aw);
            for (j, &bw) in b_words.iter().enumerate() {
                let (b0, b1) = halves(bw);
                let at = i * ldc + j;
                let sum = value(c, at) + a1 * b1;
                c[at] = MaybeUninit::new(sum + a0 * b0);
            }
        }
    }
}

#[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
mod avx512 {
    // Built only where `build.rs` found the AVX-512 intrinsics stable (Rust 1.89+), whatever
    // the crate's MSRV.
    #![allow(clippy::incompatible_msrv)]
    use super::{MR, NR};
    use std::arch::x86_64::*;
    use std::mem::MaybeUninit;

    /// [`super::portable_tile`] on `vdpbf16ps`: 24 accumulators (12 rows x 2 vectors), loaded
    /// from the tile when accumulating (zeros otherwise) and stored back into it.
    ///
    /// # Safety
    /// As for [`super::TileFn`].
    pub(super) unsafe fn tile(
        a: &[u32],
        b: &[u32],
        c: &mut [MaybeUninit<f32>],
        ldc: usize,
        accumulate: bool,
    ) {
        let pairs = super::tile_pairs(a, b, c, ldc);
        assert!(
            std::is_x86_feature_detected!("avx512bf16"),
            "the CPU lacks avx512_bf16"
        );
        // SAFETY: the CPU has the features (asserted above; `kernel()` only hands this out
        // when it does); the slices hold `pairs` steps of both panels and `MR` rows of `NR`
        // values `ldc` apart (asserted by `tile_pairs`), initialised when `accumulate` (the
        // caller's contract).
        unsafe {
            tile_avx512(
                pairs,
                a.as_ptr(),
                b.as_ptr(),
                c.as_mut_ptr().cast(),
                ldc,
                accumulate,
            )
        }
    }

    /// # Safety
    /// The CPU has AVX-512F and AVX-512 BF16; `a` holds `pairs * MR` words, `b` `pairs * NR`,
    /// and `c` `MR` rows of `NR` floats `ldc` apart (initialised when `accumulate`), not aliased
    /// by `a` or `b`.
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn tile_avx512(
        pairs: usize,
        a: *const u32,
        b: *const u32,
        c: *mut f32,
        ldc: usize,
        accumulate: bool,
    ) {
        let mut acc = [[_mm512_setzero_ps(); 2]; MR];
        if accumulate {
            for (i, row) in acc.iter_mut().enumerate() {
                // SAFETY: row `i < MR` of the tile has `NR` = 32 initialised floats at
                // `c + i * ldc`.
                unsafe {
                    let src = c.add(i * ldc);
                    *row = [_mm512_loadu_ps(src), _mm512_loadu_ps(src.add(16))];
                }
            }
        }
        for p in 0..pairs {
            // SAFETY: step `p < pairs` of both panels is in bounds (see the contract).
            unsafe {
                let bp = b.add(p * NR);
                let b0: __m512bh = std::mem::transmute(_mm512_loadu_si512(bp.cast()));
                let b1: __m512bh = std::mem::transmute(_mm512_loadu_si512(bp.add(16).cast()));
                let ap = a.add(p * MR);
                for (i, row) in acc.iter_mut().enumerate() {
                    let w: __m512bh =
                        std::mem::transmute(_mm512_set1_epi32(ap.add(i).read() as i32));
                    row[0] = _mm512_dpbf16_ps(row[0], w, b0);
                    row[1] = _mm512_dpbf16_ps(row[1], w, b1);
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            // SAFETY: as for the loads above.
            unsafe {
                let out = c.add(i * ldc);
                _mm512_storeu_ps(out, row[0]);
                _mm512_storeu_ps(out.add(16), row[1]);
            }
        }
    }
}

/// The environment variable that chooses the bf16 GEMM for comparisons: unset or `auto`,
/// AMX tiles where the CPU has them, else the `vdpbf16ps` kernel where it has that; `dot`, the
/// `vdpbf16ps` kernel even where AMX is present; `widen`, bf16 multiplied as every other 16-bit
/// op (widened to f32, the f32 GEMM, rounded back).
pub const BF16_GEMM_ENV_VAR: &str = "TESSERA_CPU_BF16_GEMM";

/// The `vdpbf16ps` micro-kernel, when this build has it and this CPU runs it.
pub(crate) fn fast_kernel() -> Option<TileFn> {
    #[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
    {
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16") {
            return Some(avx512::tile);
        }
    }
    None
}

/// The order of [`gemm_bf16_into`]'s loops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum LoopOrder {
    /// Tasks of rows, B packed whole first.
    Rows,
    /// Tasks of B's column panels, each packed as it is used
    /// ([`super::gemm_bf16_columns`]).
    ColumnPanels,
}

impl LoopOrder {
    /// The order for a product of `a` and `b`: column panels for few rows times a B whose
    /// columns are contiguous (a transposed weight: each panel packs from contiguous runs; a
    /// row-major B, such as a convolution's unfolded input, packs faster whole).
    fn for_operands(a: &Bf16Matrix, b: &Bf16Matrix) -> LoopOrder {
        if a.rows <= super::gemm_bf16_columns::FEW_ROWS && b.rs == 1 && b.cs != 1 {
            LoopOrder::ColumnPanels
        } else {
            LoopOrder::Rows
        }
    }
}

/// `A·B` (`m x k` by `k x n`) into a fresh row-major f32 `m x n`, through `kernel`, in
/// `order`.
#[cfg(test)]
pub(crate) fn gemm_bf16(
    a: &Bf16Matrix,
    b: &Bf16Matrix,
    kernel: TileFn,
    threads: usize,
    order: LoopOrder,
) -> Result<Vec<f32>> {
    let len = a
        .rows
        .checked_mul(b.cols)
        .ok_or_else(|| Error::SizeOverflow {
            op: "matmul",
            msg: format!("{} x {}", a.rows, b.cols),
        })?;
    let mut c = zeroed::<f32>(len)?;
    gemm_bf16_ordered(a, b, (kernel, threads, order), &mut c)?;
    Ok(c)
}

/// `A·B` (`m x k` by `k x n`) into `out` (row-major `m x n`), through `kernel`. B is packed
/// whole, once; each task of [`PANELS_PER_TASK`] panels of rows packs its own rows of A and
/// accumulates them in an f32 buffer of its own,
/// block of pairs after block, and stores them into `out` (rounded once, for bf16) while they
/// are still in the caches. Products of few rows take [`LoopOrder::ColumnPanels`].
pub(crate) fn gemm_bf16_into<O: ProductOutput>(
    a: &Bf16Matrix,
    b: &Bf16Matrix,
    kernel: TileFn,
    threads: usize,
    out: &mut [O],
) -> Result<()> {
    let order = LoopOrder::for_operands(a, b);
    gemm_bf16_ordered(a, b, (kernel, threads, order), out)
}

/// [`gemm_bf16_into`] in `order`.
fn gemm_bf16_ordered<O: ProductOutput>(
    a: &Bf16Matrix,
    b: &Bf16Matrix,
    (kernel, threads, order): (TileFn, usize, LoopOrder),
    out: &mut [O],
) -> Result<()> {
    let (m, k, n) = (a.rows, a.cols, b.cols);
    assert_eq!(b.rows, k, "inner dimensions");
    a.check_in_bounds()?;
    b.check_in_bounds()?;
    let pairs = k.div_ceil(2);
    let len = m.checked_mul(n).ok_or_else(|| Error::SizeOverflow {
        op: "matmul",
        msg: format!("{m} x {n}"),
    })?;
    assert_eq!(out.len(), len, "output length");
    if m == 0 || n == 0 {
        return Ok(());
    }
    if k == 0 {
        for row in out.chunks_mut(n) {
            for part in row.chunks_mut(NR) {
                O::store(part, &[0.0; NR][..part.len()]);
            }
        }
        return Ok(());
    }
    let parallel = m * n * k >= PARALLEL_MACS;
    if order == LoopOrder::ColumnPanels {
        return super::gemm_bf16_columns::gemm_by_column_panels(
            &pack_a(a, pairs)?,
            m,
            b,
            pairs,
            (kernel, threads, parallel),
            out,
        );
    }
    let packed_b = pack_b(b, pairs)?;
    let rows_per_task = MR * PANELS_PER_TASK;
    let task = |c: &mut Vec<MaybeUninit<f32>>, (t, dst): (usize, &mut [O])| -> Result<()> {
        let row_total = dst.len() / n;
        let panels = row_total.div_ceil(MR);
        // The task's own rows of A, packed here (never the whole of A at once).
        let task_rows = Bf16Matrix {
            offset: a.offset + t * rows_per_task * a.rs,
            rows: row_total,
            ..*a
        };
        let packed_a = pack_a(&task_rows, pairs)?;
        if c.len() < dst.len() {
            *c = try_uninit::<f32>(dst.len())?;
        }
        let rows = &mut c[..dst.len()];
        let mut edge = [MaybeUninit::new(0.0f32); MR * NR];
        for p0 in (0..pairs).step_by(KC) {
            let depth = KC.min(pairs - p0);
            // The first block of pairs writes every tile; the later ones add to it.
            let accumulate = p0 > 0;
            for jp in 0..n.div_ceil(NR) {
                let b_block = &packed_b[(jp * pairs + p0) * NR..(jp * pairs + p0 + depth) * NR];
                let cols = NR.min(n - jp * NR);
                for ip in 0..panels {
                    let a_block = &packed_a[(ip * pairs + p0) * MR..(ip * pairs + p0 + depth) * MR];
                    let row_count = MR.min(row_total - ip * MR);
                    let first = ip * MR * n + jp * NR;
                    if row_count == MR && cols == NR {
                        // SAFETY: when accumulating, the first block wrote this tile.
                        unsafe { kernel(a_block, b_block, &mut rows[first..], n, accumulate) };
                        continue;
                    }
                    // A tile cut by the output's edge: through a buffer (initialised, so that
                    // its rows and columns past the edge are zeros), in and out.
                    edge.fill(MaybeUninit::new(0.0));
                    if accumulate {
                        for i in 0..row_count {
                            let at = first + i * n;
                            edge[i * NR..i * NR + cols].copy_from_slice(&rows[at..at + cols]);
                        }
                    }
                    // SAFETY: every value of `edge` is initialised.
                    unsafe { kernel(a_block, b_block, &mut edge, NR, true) };
                    for i in 0..row_count {
                        let at = first + i * n;
                        rows[at..at + cols].copy_from_slice(&edge[i * NR..i * NR + cols]);
                    }
                }
            }
        }
        // SAFETY: the first block of pairs (`k > 0`) wrote every tile of the task, and its
        // tiles cover its rows (panels of `MR` rows by `NR` columns, the edges' copied back).
        let rows: &[f32] = unsafe { &*(rows as *const [MaybeUninit<f32>] as *const [f32]) };
        O::store(dst, rows);
        Ok(())
    };
    if threads > 1 && parallel {
        out.par_chunks_mut(rows_per_task * n)
            .enumerate()
            .try_for_each_init(Vec::new, task)
    } else {
        let mut c = Vec::new();
        out.chunks_mut(rows_per_task * n)
            .enumerate()
            .try_for_each(|job| task(&mut c, job))
    }
}

/// Where the f32 results of a bf16 product go: rounded once to bf16, or kept in f32 (for
/// callers that sum several products before rounding, as the convolution gradients do).
pub(crate) trait ProductOutput: Copy + Send + Sync {
    /// Writes `src` (one row's run of results) over `dst`.
    fn store(dst: &mut [Self], src: &[f32]);
}

impl ProductOutput for bf16 {
    fn store(dst: &mut [Self], src: &[f32]) {
        super::wide::map_contiguous(dst, src, &super::cast::f32_to_bf16);
    }
}

impl ProductOutput for f32 {
    fn store(dst: &mut [Self], src: &[f32]) {
        dst.copy_from_slice(src);
    }
}

/// Whether bf16 products of this process run on a bf16 kernel (AMX or `vdpbf16ps`) rather
/// than being widened to f32.
pub(crate) fn has_fast_kernel() -> bool {
    !matches!(chosen_gemm(), Bf16Gemm::Widen)
}

/// `a · b` into `out` (row-major `a.rows x b.cols`) on this process's bf16 kernel. Panics
/// when there is none: callers check [`has_fast_kernel`].
pub(crate) fn product_into<O: ProductOutput>(
    a: &Bf16Matrix,
    b: &Bf16Matrix,
    threads: usize,
    out: &mut [O],
) -> Result<()> {
    // One row times a transposed weight (batch-1 decoding): dot products of the weight's rows,
    // streamed once, instead of packing the whole weight.
    if has_fast_kernel() && super::gemv_bf16::try_gemv(a, b, threads, out)? {
        return Ok(());
    }
    match chosen_gemm() {
        Bf16Gemm::Amx => super::gemm_amx::gemm_amx(a, b, threads, out),
        Bf16Gemm::Dot(kernel) => gemm_bf16_into(a, b, kernel, threads, out),
        Bf16Gemm::Widen => panic!("no bf16 kernel in this process (check has_fast_kernel)"),
    }
}

/// `lhs · rhs` (`[..batch, m, k] x [..batch, k, n]`, batch strides possibly 0) on this
/// process's bf16 GEMM (AMX or `vdpbf16ps`, see [`chosen_gemm`]) when both are bf16; `None`
/// otherwise (the caller widens to f32: other dtypes, other CPUs, `TESSERA_CPU_BF16_GEMM=widen`,
/// shapes the caller rejects with a typed error).
pub(crate) fn try_matmul(
    lhs: &CpuStorage,
    ll: &Layout,
    rhs: &CpuStorage,
    rl: &Layout,
) -> Result<Option<CpuStorage>> {
    let (CpuStorage::BF16(a), CpuStorage::BF16(b)) = (lhs, rhs) else {
        return Ok(None);
    };
    let gemm = chosen_gemm();
    if matches!(gemm, Bf16Gemm::Widen) {
        return Ok(None);
    }
    let (ld, rd) = (ll.dims(), rl.dims());
    let rank = ld.len();
    if rank < 2
        || rd.len() != rank
        || ld[..rank - 2] != rd[..rank - 2]
        || ld[rank - 1] != rd[rank - 2]
    {
        return Ok(None);
    }
    // Negative strides (none of the views Tessera makes) take the widening path.
    let strides = |l: &Layout| -> Option<Vec<usize>> {
        l.strides()
            .iter()
            .map(|&s| usize::try_from(s).ok())
            .collect()
    };
    let (Some(ls), Some(rs)) = (strides(ll), strides(rl)) else {
        return Ok(None);
    };
    let (m, k, n) = (ld[rank - 2], ld[rank - 1], rd[rank - 1]);
    let batch_dims = &ld[..rank - 2];
    let overflow = || Error::SizeOverflow {
        op: "matmul",
        msg: format!("{:?} x {:?}", ll.shape(), rl.shape()),
    };
    let batch = batch_dims
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(overflow)?;
    let per_product = m.checked_mul(n).ok_or_else(overflow)?;
    let mut out = try_zeroed::<bf16>(batch.checked_mul(per_product).ok_or_else(overflow)?)?;
    if out.is_empty() {
        return Ok(Some(CpuStorage::BF16(out)));
    }
    // The operands' offsets of each product, batch index in row-major order.
    let mut offsets = Vec::new();
    offsets
        .try_reserve_exact(batch)
        .map_err(|_| Error::OutOfMemory {
            device: "cpu".to_string(),
            requested_bytes: batch.saturating_mul(16),
        })?;
    for index in 0..batch {
        let (mut rest, mut oa, mut ob) = (index, ll.offset(), rl.offset());
        for axis in (0..rank - 2).rev() {
            let i = rest % batch_dims[axis];
            rest /= batch_dims[axis];
            oa += i * ls[axis];
            ob += i * rs[axis];
        }
        offsets.push((oa, ob));
    }
    let product = |(oa, ob): (usize, usize), threads: usize, dst: &mut [bf16]| -> Result<()> {
        let a = Bf16Matrix {
            data: a,
            offset: oa,
            rows: m,
            cols: k,
            rs: ls[rank - 2],
            cs: ls[rank - 1],
        };
        let b = Bf16Matrix {
            data: b,
            offset: ob,
            rows: k,
            cols: n,
            rs: rs[rank - 2],
            cs: rs[rank - 1],
        };
        product_into(&a, &b, threads, dst)
    };
    let threads = crate::parallel::Parallelism::current().threads;
    if batch == 1 || threads == 1 {
        for (dst, &offset) in out.chunks_mut(per_product).zip(&offsets) {
            product(offset, threads, dst)?;
        }
    } else {
        // Many products: one per task, each on one thread.
        out.par_chunks_mut(per_product)
            .zip(offsets.par_iter())
            .try_for_each(|(dst, &offset)| product(offset, 1, dst))?;
    }
    Ok(Some(CpuStorage::BF16(out)))
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    /// Values whose products and sums are exact in f32: small integers and halves.
    pub(in crate::kernels) fn values(len: usize, seed: usize) -> Vec<bf16> {
        (0..len)
            .map(|i| bf16::from_f32((((i * 7 + seed * 3) % 11) as f32 - 5.0) * 0.5))
            .collect()
    }

    pub(in crate::kernels) fn matrix(
        data: &[bf16],
        rows: usize,
        cols: usize,
        transposed: bool,
    ) -> Bf16Matrix<'_> {
        let (rs, cs) = if transposed { (1, rows) } else { (cols, 1) };
        Bf16Matrix {
            data,
            offset: 0,
            rows,
            cols,
            rs,
            cs,
        }
    }

    /// The product by definition, in f64.
    pub(in crate::kernels) fn reference(a: &Bf16Matrix, b: &Bf16Matrix) -> Vec<f64> {
        let at = |x: &Bf16Matrix, r: usize, c: usize| x.data[x.offset + r * x.rs + c * x.cs];
        let mut out = Vec::new();
        for i in 0..a.rows {
            for j in 0..b.cols {
                out.push(
                    (0..a.cols)
                        .map(|p| f64::from(at(a, i, p).to_f32()) * f64::from(at(b, p, j).to_f32()))
                        .sum(),
                );
            }
        }
        out
    }

    fn check(kernel: TileFn, (m, k, n): (usize, usize, usize), transposed: bool, threads: usize) {
        let (da, db) = (values(m * k, 1), values(k * n, 2));
        let a = matrix(&da, m, k, transposed);
        let b = matrix(&db, k, n, transposed);
        let want = reference(&a, &b);
        for order in [LoopOrder::Rows, LoopOrder::ColumnPanels] {
            let got = gemm_bf16(&a, &b, kernel, threads, order).unwrap();
            assert_eq!(got.len(), want.len());
            for (idx, (g, w)) in got.iter().zip(&want).enumerate() {
                // Exact: every product and partial sum of these values is an f32.
                assert_eq!(f64::from(*g), *w, "({m}, {k}, {n}) {order:?} at {idx}");
            }
        }
    }

    #[test]
    fn miri_the_portable_tile_packs_and_blocks_like_the_definition() {
        // Odd k (a zero-padded last pair), partial panels, transposed views, 1 and 2 tasks.
        for shape in [(1, 1, 1), (3, 5, 2), (13, 3, 33)] {
            check(portable_tile, shape, false, 1);
            check(portable_tile, shape, true, 2);
        }
    }

    #[test]
    fn the_fast_kernel_matches_the_definition_on_shapes_that_fill_and_miss_its_tiles() {
        let Some(kernel) = fast_kernel() else {
            eprintln!("skipped: this CPU has no avx512_bf16 (or this build no AVX-512)");
            return;
        };
        // Whole 12x32 tiles, partial ones, odd k, k past one block of 256 pairs, and a
        // product large enough to be split over rayon.
        for shape in [
            (12, 2, 32),
            (24, 64, 64),
            (1, 1, 1),
            (13, 7, 33),
            (5, 515, 40),
            (100, 600, 70),
            (200, 96, 130),
        ] {
            check(kernel, shape, false, 1);
            check(kernel, shape, true, 2);
        }
    }

    #[test]
    fn miri_operands_with_no_unit_stride_pack_like_the_definition() {
        // Every other element of a larger buffer, from an offset: neither stride is 1, so the
        // packing takes its general paths (A and B), on shapes with odd k and partial panels,
        // and rows for two tasks (each packs its own rows of A, from its own offset).
        for (m, k, n) in [(3, 5, 2), (13, 3, 33), (100, 3, 5)] {
            let (da, db) = (values(4 * m * k + 3, 3), values(4 * k * n + 3, 4));
            fn strided(data: &[bf16], rows: usize, cols: usize) -> Bf16Matrix<'_> {
                Bf16Matrix {
                    data,
                    offset: 3,
                    rows,
                    cols,
                    rs: 2 * cols,
                    cs: 2,
                }
            }
            let (a, b) = (strided(&da, m, k), strided(&db, k, n));
            for order in [LoopOrder::Rows, LoopOrder::ColumnPanels] {
                let got = gemm_bf16(&a, &b, portable_tile, 1, order).unwrap();
                for (idx, (g, w)) in got.iter().zip(&reference(&a, &b)).enumerate() {
                    assert_eq!(f64::from(*g), *w, "({m}, {k}, {n}) {order:?} at {idx}");
                }
            }
        }
    }

    #[test]
    fn the_fast_kernel_agrees_with_its_portable_twin_on_random_values() {
        let Some(kernel) = fast_kernel() else {
            eprintln!("skipped: this CPU has no avx512_bf16 (or this build no AVX-512)");
            return;
        };
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            bf16::from_f32((state >> 40) as f32 / (1u64 << 23) as f32 - 1.0)
        };
        let (m, k, n) = (37, 301, 45);
        let da: Vec<bf16> = (0..m * k).map(|_| next()).collect();
        let db: Vec<bf16> = (0..k * n).map(|_| next()).collect();
        let (a, b) = (matrix(&da, m, k, false), matrix(&db, k, n, false));
        let want = reference(&a, &b);
        for order in [LoopOrder::Rows, LoopOrder::ColumnPanels] {
            let fast = gemm_bf16(&a, &b, kernel, 1, order).unwrap();
            for (g, w) in fast.iter().zip(&want) {
                // f32 accumulation of k products of magnitude <= 1: a few ulps of the sum's
                // scale.
                assert!((f64::from(*g) - w).abs() <= 1e-5 * k as f64, "{g} vs {w}");
            }
        }
    }

    /// Panels of `width` lines (`line(matrix, i, step)`) of k-pair words by definition.
    fn packed_by_definition(
        lines: usize,
        pairs: usize,
        width: usize,
        bits: impl Fn(usize, usize) -> u32,
    ) -> Vec<u32> {
        let mut out = vec![0; lines.div_ceil(width) * width * pairs];
        for line in 0..lines {
            for pair in 0..pairs {
                let (q, i) = (line / width, line % width);
                out[(q * pairs + pair) * width + i] =
                    bits(line, 2 * pair) | (bits(line, 2 * pair + 1) << 16);
            }
        }
        out
    }

    #[test]
    fn miri_packs_of_unit_step_operands_hold_the_pair_words_of_the_definition() {
        // Unit steps along k (A row-major, B transposed), which the AVX-512 word transpose
        // packs where present: odd and even k, odd offsets (words not 4-byte aligned), odd row
        // strides (the element-wise path), partial panels, and more pairs than k fills (the
        // AMX kernel's padding).
        for (lines, k, extra_pairs) in
            [(1, 1, 0), (13, 7, 0), (40, 34, 3), (12, 64, 0), (33, 33, 1)]
        {
            for (offset, pad) in [(0, 0), (1, 0), (3, 1)] {
                let stride = k + pad + offset % 2;
                let data = values(offset + lines * stride + 1, 5);
                let pairs = k.div_ceil(2) + extra_pairs;
                let a = Bf16Matrix {
                    data: &data,
                    offset,
                    rows: lines,
                    cols: k,
                    rs: stride,
                    cs: 1,
                };
                let want = packed_by_definition(lines, pairs, MR, |r, c| a.bits(r, c));
                assert_eq!(
                    pack_a(&a, pairs).unwrap(),
                    want,
                    "A {lines}x{k} at {offset} stride {stride}"
                );
                let b = Bf16Matrix {
                    data: &data,
                    offset,
                    rows: k,
                    cols: lines,
                    rs: 1,
                    cs: stride,
                };
                let want = packed_by_definition(lines, pairs, NR, |c, r| b.bits(r, c));
                assert_eq!(
                    pack_b(&b, pairs).unwrap(),
                    want,
                    "B {k}x{lines} at {offset} stride {stride}"
                );
            }
        }
    }

    #[test]
    fn out_of_bounds_operands_are_a_typed_error() {
        let data = values(6, 0);
        let a = Bf16Matrix {
            data: &data,
            offset: 1,
            rows: 2,
            cols: 3,
            rs: 3,
            cs: 1,
        };
        let b = matrix(&data, 3, 2, false);
        assert!(matches!(
            gemm_bf16(&a, &b, portable_tile, 1, LoopOrder::Rows),
            Err(Error::InvalidArgument { .. })
        ));
    }
}
