//! AVX-512F micro-kernels (32 `zmm` registers: 24 accumulators, two B vectors, one broadcast).
//! Compiled only where the compiler has stable AVX-512 intrinsics (`cfg(tessera_avx512)`, see
//! build.rs); run only where `is_x86_feature_detected!("avx512f")` says so (see `select`).
//! Not Miri-able (`core::arch` intrinsics); the portable `scalar` kernel stands in there.

// Compiled only under `cfg(tessera_avx512)`, i.e. by Rust 1.89 or later (see build.rs), so
// the intrinsics stabilised in 1.89 are there whatever the workspace's minimum version says.
#![allow(clippy::incompatible_msrv)]

use core::arch::x86_64::*;
use std::sync::OnceLock;

use super::{simd_kernel, MicroKernel, RowMajorA};
use crate::kernels::gemm::pack::avx512::{transpose_f32, transpose_f64};

/// Block depths, also the row stride of row-major A panels.
const F32_KC: usize = 256;
const F64_KC: usize = 192;

macro_rules! f32_kernel {
    ($(#[$doc:meta])* $name:ident, $mr:literal, $line:expr, $step:expr) => {
        simd_kernel! {
            $(#[$doc])*
            $name: f32, "avx512f", mr = $mr, line = $line, step = $step, lanes = 16, prefetch_b = 0,
            _mm512_setzero_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps
        }
    };
}

macro_rules! f64_kernel {
    ($(#[$doc:meta])* $name:ident, $mr:literal, $line:expr, $step:expr) => {
        simd_kernel! {
            $(#[$doc])*
            $name: f64, "avx512f", mr = $mr, line = $line, step = $step, lanes = 8, prefetch_b = 0,
            _mm512_setzero_pd, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd
        }
    };
}

f32_kernel!(
    /// f32, a 12 x 32 tile.
    f32_12x32, 12, 1, 12
);
f32_kernel!(
    /// f32, the first 8 rows of a 12 x 32 tile.
    f32_8x32, 8, 1, 12
);
f32_kernel!(
    /// f32, the first 4 rows of a 12 x 32 tile.
    f32_4x32, 4, 1, 12
);
f32_kernel!(
    /// f32, a 12 x 32 tile over a row-major A panel.
    f32_12x32_rows, 12, F32_KC, 1
);
f32_kernel!(
    /// f32, the first 8 rows of a 12 x 32 tile over a row-major A panel.
    f32_8x32_rows, 8, F32_KC, 1
);
f32_kernel!(
    /// f32, the first 4 rows of a 12 x 32 tile over a row-major A panel.
    f32_4x32_rows, 4, F32_KC, 1
);
f64_kernel!(
    /// f64, a 12 x 16 tile.
    f64_12x16, 12, 1, 12
);
f64_kernel!(
    /// f64, the first 8 rows of a 12 x 16 tile.
    f64_8x16, 8, 1, 12
);
f64_kernel!(
    /// f64, the first 4 rows of a 12 x 16 tile.
    f64_4x16, 4, 1, 12
);

f64_kernel!(
    /// f64, a 12 x 16 tile over a row-major A panel.
    f64_12x16_rows, 12, F64_KC, 1
);
f64_kernel!(
    /// f64, the first 8 rows of a 12 x 16 tile over a row-major A panel.
    f64_8x16_rows, 8, F64_KC, 1
);
f64_kernel!(
    /// f64, the first 4 rows of a 12 x 16 tile over a row-major A panel.
    f64_4x16_rows, 4, F64_KC, 1
);

/// The f32 kernel and its blocking: a 12 x 256 A panel (12 KiB) and a 256 x 32 B panel
/// (32 KiB) share the 48 KiB L1 of a Zen 4/5 core; a 256 x 768 B block (768 KiB) sits in L2.
pub(crate) static F32: MicroKernel<f32> = MicroKernel {
    name: "avx512 f32 12x32",
    mr: 12,
    nr: 32,
    kc: F32_KC,
    mc: 1536,
    nc: 768,
    run: f32_12x32,
    short: &[(4, f32_4x32), (8, f32_8x32)],
    row_major_a: Some(RowMajorA {
        run: f32_12x32_rows,
        short: &[(4, f32_4x32_rows), (8, f32_8x32_rows)],
    }),
    transpose_pack: Some(transpose_f32),
    chosen_blocking: OnceLock::new(),
};

/// The f64 kernel and its blocking: the same bytes per panel and block as [`F32`].
pub(crate) static F64: MicroKernel<f64> = MicroKernel {
    name: "avx512 f64 12x16",
    mr: 12,
    nr: 16,
    kc: F64_KC,
    mc: 1536,
    nc: 512,
    run: f64_12x16,
    short: &[(4, f64_4x16), (8, f64_8x16)],
    row_major_a: Some(RowMajorA {
        run: f64_12x16_rows,
        short: &[(4, f64_4x16_rows), (8, f64_8x16_rows)],
    }),
    transpose_pack: Some(transpose_f64),
    chosen_blocking: OnceLock::new(),
};
