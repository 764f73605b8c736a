//! AVX-512F micro-kernels (32 `zmm` registers: 24 accumulators, two B vectors, one broadcast).
//! Compiled only where the compiler has stable AVX-512 intrinsics (`cfg(tessera_avx512)`, see
//! build.rs); run only where `is_x86_feature_detected!("avx512f")` says so (see `select`).
//! Not Miri-able (`core::arch` intrinsics); the portable `scalar` kernel stands in there.

use core::arch::x86_64::*;

use super::{simd_kernel, MicroKernel};
use crate::kernels::gemm::pack::avx512::{transpose_f32, transpose_f64};

simd_kernel! {
    /// f32, a 12 x 32 tile.
    f32_12x32: f32, "avx512f", mr = 12, lanes = 16,
    _mm512_setzero_ps, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_fmadd_ps
}

simd_kernel! {
    /// f64, a 12 x 16 tile.
    f64_12x16: f64, "avx512f", mr = 12, lanes = 8,
    _mm512_setzero_pd, _mm512_loadu_pd, _mm512_storeu_pd, _mm512_set1_pd, _mm512_fmadd_pd
}

/// The f32 kernel and its blocking: a 12 x 256 A panel (12 KiB) and a 256 x 32 B panel
/// (32 KiB) share the 48 KiB L1 of a Zen 4/5 core; a 256 x 768 B block (768 KiB) sits in L2.
pub(crate) static F32: MicroKernel<f32> = MicroKernel {
    name: "avx512 f32 12x32",
    mr: 12,
    nr: 32,
    kc: 256,
    mc: 1536,
    nc: 768,
    run: f32_12x32,
    transpose_pack: Some(transpose_f32),
};

/// The f64 kernel and its blocking: the same bytes per panel and block as [`F32`].
pub(crate) static F64: MicroKernel<f64> = MicroKernel {
    name: "avx512 f64 12x16",
    mr: 12,
    nr: 16,
    kc: 192,
    mc: 1536,
    nc: 512,
    run: f64_12x16,
    transpose_pack: Some(transpose_f64),
};
