//! AVX-512 packing of a panel whose source lines are runs along k (`step_stride == 1`: A of a
//! row-major product, or a transposed B such as `Wᵀ`): the panel layout wants the lines side
//! by side for each step, so blocks of 16 x 16 f32 (8 x 8 f64) are loaded as rows, transposed
//! in registers and stored as columns, with masks at the edges. About ten times fewer
//! instructions than element-by-element copies. Not Miri-able (`core::arch` intrinsics).

// Compiled only under `cfg(tessera_avx512)`, i.e. by Rust 1.89 or later (see build.rs), so
// the intrinsics stabilised in 1.89 are there whatever the workspace's minimum version says.
#![allow(clippy::incompatible_msrv)]

use core::arch::x86_64::*;

/// How many lines ahead the transposing packers prefetch.
const AHEAD_LINES: isize = 32;

/// Packs `used` lines (`used <= width`) of `depth` steps from `src` (line `i`, step `p` at
/// `src + i*line_stride + p`) into the panel at `dst` (`dst[p*width + i]`); slots of lines
/// `used..width` are left as they are.
///
/// # Safety
/// Every source element named must be readable, `dst` must hold `width * depth` writable
/// elements not overlapping the source, and the CPU must have AVX-512F.
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn transpose_f32(
    dst: *mut f32,
    src: *const f32,
    line_stride: isize,
    used: usize,
    depth: usize,
    width: usize,
) {
    // SAFETY: the loads read lines `i0 + r < used` at steps `p0 + s < depth` only (masked);
    // the stores write steps `< depth` and lines `< used` of the panel only (masked).
    unsafe {
        for i0 in (0..used).step_by(16) {
            let lines = 16.min(used - i0);
            let line_mask: __mmask16 = ((1u32 << lines) - 1) as __mmask16;
            for p0 in (0..depth).step_by(16) {
                let steps = 16.min(depth - p0);
                let step_mask: __mmask16 = ((1u32 << steps) - 1) as __mmask16;
                let mut r = [_mm512_setzero_ps(); 16];
                if lines == 16 && steps == 16 {
                    // A whole block: plain loads and stores (masked ones are slower on
                    // some CPUs, e.g. stores on AMD Zen 4).
                    for (i, row) in r.iter_mut().enumerate() {
                        let line = src.offset((i0 + i) as isize * line_stride).add(p0);
                        *row = _mm512_loadu_ps(line);
                        // The same steps of the lines two groups on, read about twenty blocks
                        // from now: far enough ahead to hide a DRAM read (a hint: it cannot
                        // fault, even past the block).
                        let ahead = line.wrapping_offset(AHEAD_LINES * line_stride);
                        _mm_prefetch::<_MM_HINT_T0>(ahead.cast());
                    }
                    let t = transpose_16x16(r);
                    for (s, col) in t.iter().enumerate() {
                        _mm512_storeu_ps(dst.add((p0 + s) * width + i0), *col);
                    }
                    continue;
                }
                for (i, row) in r.iter_mut().enumerate().take(lines) {
                    let line = src.offset((i0 + i) as isize * line_stride).add(p0);
                    *row = _mm512_maskz_loadu_ps(step_mask, line);
                }
                let t = transpose_16x16(r);
                for (s, col) in t.iter().enumerate().take(steps) {
                    _mm512_mask_storeu_ps(dst.add((p0 + s) * width + i0), line_mask, *col);
                }
            }
        }
    }
}

/// As [`transpose_f32`] for f64, in blocks of 8 x 8.
///
/// # Safety
/// As [`transpose_f32`].
#[target_feature(enable = "avx512f")]
pub(crate) unsafe fn transpose_f64(
    dst: *mut f64,
    src: *const f64,
    line_stride: isize,
    used: usize,
    depth: usize,
    width: usize,
) {
    // SAFETY: as in `transpose_f32`.
    unsafe {
        for i0 in (0..used).step_by(8) {
            let lines = 8.min(used - i0);
            let line_mask: __mmask8 = ((1u32 << lines) - 1) as __mmask8;
            for p0 in (0..depth).step_by(8) {
                let steps = 8.min(depth - p0);
                let step_mask: __mmask8 = ((1u32 << steps) - 1) as __mmask8;
                let mut r = [_mm512_setzero_pd(); 8];
                if lines == 8 && steps == 8 {
                    // A whole block: plain loads and stores (see `transpose_f32`).
                    for (i, row) in r.iter_mut().enumerate() {
                        *row = _mm512_loadu_pd(src.offset((i0 + i) as isize * line_stride).add(p0));
                    }
                    let t = transpose_8x8(r);
                    for (s, col) in t.iter().enumerate() {
                        _mm512_storeu_pd(dst.add((p0 + s) * width + i0), *col);
                    }
                    continue;
                }
                for (i, row) in r.iter_mut().enumerate().take(lines) {
                    let line = src.offset((i0 + i) as isize * line_stride).add(p0);
                    *row = _mm512_maskz_loadu_pd(step_mask, line);
                }
                let t = transpose_8x8(r);
                for (s, col) in t.iter().enumerate().take(steps) {
                    _mm512_mask_storeu_pd(dst.add((p0 + s) * width + i0), line_mask, *col);
                }
            }
        }
    }
}

/// `out[s][r] = rows[r][s]` for 16 vectors of 16 f32.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose_16x16(rows: [__m512; 16]) -> [__m512; 16] {
    // Pairs of rows interleaved: in each 128-bit lane, elements (r, r+1) of 2 columns.
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(rows[2 * i], rows[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(rows[2 * i], rows[2 * i + 1]);
    }
    // Groups of four rows: u[4g + e] holds, per 128-bit lane L, rows 4g..4g+4 of column 4L + e.
    let mut u = [_mm512_setzero_pd(); 16];
    for g in 0..4 {
        let (a, b, c, d) = (t[4 * g], t[4 * g + 1], t[4 * g + 2], t[4 * g + 3]);
        u[4 * g] = _mm512_unpacklo_pd(_mm512_castps_pd(a), _mm512_castps_pd(c));
        u[4 * g + 1] = _mm512_unpackhi_pd(_mm512_castps_pd(a), _mm512_castps_pd(c));
        u[4 * g + 2] = _mm512_unpacklo_pd(_mm512_castps_pd(b), _mm512_castps_pd(d));
        u[4 * g + 3] = _mm512_unpackhi_pd(_mm512_castps_pd(b), _mm512_castps_pd(d));
    }
    // Column 4L + e gathers lane L of u[e], u[4 + e], u[8 + e], u[12 + e].
    let mut out = [_mm512_setzero_ps(); 16];
    for e in 0..4 {
        let (g0, g1) = (_mm512_castpd_ps(u[e]), _mm512_castpd_ps(u[4 + e]));
        let (g2, g3) = (_mm512_castpd_ps(u[8 + e]), _mm512_castpd_ps(u[12 + e]));
        let even01 = _mm512_shuffle_f32x4::<0x88>(g0, g1); // g0.L0 g0.L2 g1.L0 g1.L2
        let odd01 = _mm512_shuffle_f32x4::<0xDD>(g0, g1); // g0.L1 g0.L3 g1.L1 g1.L3
        let even23 = _mm512_shuffle_f32x4::<0x88>(g2, g3);
        let odd23 = _mm512_shuffle_f32x4::<0xDD>(g2, g3);
        out[e] = _mm512_shuffle_f32x4::<0x88>(even01, even23); // lane 0 of each
        out[8 + e] = _mm512_shuffle_f32x4::<0xDD>(even01, even23); // lane 2
        out[4 + e] = _mm512_shuffle_f32x4::<0x88>(odd01, odd23); // lane 1
        out[12 + e] = _mm512_shuffle_f32x4::<0xDD>(odd01, odd23); // lane 3
    }
    out
}

/// `out[s][r] = rows[r][s]` for 8 vectors of 8 f64.
#[inline]
#[target_feature(enable = "avx512f")]
fn transpose_8x8(rows: [__m512d; 8]) -> [__m512d; 8] {
    // t[2i + h], per 128-bit lane L: rows (2i, 2i+1) of column 2L + h.
    let mut t = [_mm512_setzero_pd(); 8];
    for i in 0..4 {
        t[2 * i] = _mm512_unpacklo_pd(rows[2 * i], rows[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_pd(rows[2 * i], rows[2 * i + 1]);
    }
    // Column 2L + h gathers lane L of t[h], t[2 + h], t[4 + h], t[6 + h].
    let mut out = [_mm512_setzero_pd(); 8];
    for h in 0..2 {
        let even01 = _mm512_shuffle_f64x2::<0x88>(t[h], t[2 + h]);
        let odd01 = _mm512_shuffle_f64x2::<0xDD>(t[h], t[2 + h]);
        let even23 = _mm512_shuffle_f64x2::<0x88>(t[4 + h], t[6 + h]);
        let odd23 = _mm512_shuffle_f64x2::<0xDD>(t[4 + h], t[6 + h]);
        out[h] = _mm512_shuffle_f64x2::<0x88>(even01, even23); // lane 0
        out[4 + h] = _mm512_shuffle_f64x2::<0xDD>(even01, even23); // lane 2
        out[2 + h] = _mm512_shuffle_f64x2::<0x88>(odd01, odd23); // lane 1
        out[6 + h] = _mm512_shuffle_f64x2::<0xDD>(odd01, odd23); // lane 3
    }
    out
}
