//! AVX2 + FMA micro-kernels (16 `ymm` registers: 12 accumulators, two B vectors, one
//! broadcast), for x86-64 CPUs without AVX-512; run only where `is_x86_feature_detected!`
//! finds both features (see `select`). Not Miri-able (`core::arch` intrinsics); the portable
//! `scalar` kernel stands in there.

use core::arch::x86_64::*;
use std::sync::OnceLock;

use super::{simd_kernel, MicroKernel, RowMajorA};

/// Block depths, also the row stride of row-major A panels.
const F32_KC: usize = 256;
const F64_KC: usize = 256;

simd_kernel! {
    /// f32, a 6 x 16 tile.
    f32_6x16: f32, "avx2,fma", mr = 6, line = 1, step = 6, lanes = 8, prefetch_b = 8,
    _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps
}

simd_kernel! {
    /// f32, the first 3 rows of a 6 x 16 tile.
    f32_3x16: f32, "avx2,fma", mr = 3, line = 1, step = 6, lanes = 8, prefetch_b = 8,
    _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps
}

simd_kernel! {
    /// f32, a 6 x 16 tile over a row-major A panel.
    f32_6x16_rows: f32, "avx2,fma", mr = 6, line = F32_KC, step = 1, lanes = 8, prefetch_b = 8,
    _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps
}

simd_kernel! {
    /// f32, the first 3 rows of a 6 x 16 tile over a row-major A panel.
    f32_3x16_rows: f32, "avx2,fma", mr = 3, line = F32_KC, step = 1, lanes = 8, prefetch_b = 8,
    _mm256_setzero_ps, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_fmadd_ps
}

simd_kernel! {
    /// f64, the first 3 rows of a 6 x 8 tile.
    f64_3x8: f64, "avx2,fma", mr = 3, line = 1, step = 6, lanes = 4, prefetch_b = 8,
    _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd
}

simd_kernel! {
    /// f64, a 6 x 8 tile.
    f64_6x8: f64, "avx2,fma", mr = 6, line = 1, step = 6, lanes = 4, prefetch_b = 8,
    _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd
}

simd_kernel! {
    /// f64, a 6 x 8 tile over a row-major A panel.
    f64_6x8_rows: f64, "avx2,fma", mr = 6, line = F64_KC, step = 1, lanes = 4, prefetch_b = 8,
    _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd
}

simd_kernel! {
    /// f64, the first 3 rows of a 6 x 8 tile over a row-major A panel.
    f64_3x8_rows: f64, "avx2,fma", mr = 3, line = F64_KC, step = 1, lanes = 4, prefetch_b = 8,
    _mm256_setzero_pd, _mm256_loadu_pd, _mm256_storeu_pd, _mm256_set1_pd, _mm256_fmadd_pd
}

/// The f32 kernel and the blocking it starts from (see `blocking` for the one a CPU gets): a
/// 6 x 256 A panel (6 KiB) and a 256 x 16 B panel (16 KiB) in a 32 KiB L1; a 256 x 512 B block
/// (512 KiB) in a 1 MiB L2. A row-major A is packed by copying rows (2-4% faster than packing
/// it step by step, measured on a Zen 3).
pub(crate) static F32: MicroKernel<f32> = MicroKernel {
    name: "avx2 f32 6x16",
    mr: 6,
    nr: 16,
    kc: F32_KC,
    mc: 1536,
    nc: 512,
    run: f32_6x16,
    short: &[(3, f32_3x16)],
    row_major_a: Some(RowMajorA {
        run: f32_6x16_rows,
        short: &[(3, f32_3x16_rows)],
    }),
    transpose_pack: None,
    chosen_blocking: OnceLock::new(),
};

/// The f64 kernel and its blocking: the same bytes per panel and block as [`F32`].
pub(crate) static F64: MicroKernel<f64> = MicroKernel {
    name: "avx2 f64 6x8",
    mr: 6,
    nr: 8,
    kc: F64_KC,
    mc: 1536,
    nc: 256,
    run: f64_6x8,
    short: &[(3, f64_3x8)],
    row_major_a: Some(RowMajorA {
        run: f64_6x8_rows,
        short: &[(3, f64_3x8_rows)],
    }),
    transpose_pack: None,
    chosen_blocking: OnceLock::new(),
};
