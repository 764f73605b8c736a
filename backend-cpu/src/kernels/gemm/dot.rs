//! SIMD dot products for the GEMV's transposed form (`x·Wᵀ` with a row-major `[n, k]` weight,
//! the linear layer's forward pass at batch 1): [`COLUMNS`] dot products of one contiguous
//! vector with contiguous columns at once, so each load of `x` feeds several fused
//! multiply-adds. Written with `core::arch` intrinsics because the compiler left the generic
//! lane loops scalar (one accumulator per stack slot), which made a batch-1 forward pass
//! several times slower than its arithmetic.
//!
//! Not Miri-able (intrinsics); Miri runs the generic loops of `gemv`, and the tests here
//! compare these kernels with an f64 reference natively wherever the CPU has the features.

// Compiled with AVX-512 only under `cfg(tessera_avx512)`, i.e. by Rust 1.89 or later (see
// build.rs), so the intrinsics stabilised in 1.89 are there whatever the minimum version says.
#![allow(clippy::incompatible_msrv)]

/// Dot products computed together.
pub(super) const COLUMNS: usize = 8;

/// One prefetch per this many bytes (a cache line) of each of the next call's columns.
pub(crate) const PREFETCH_SPAN_BYTES: usize = 64;

/// `out[c] = Σ_{p<k} x[p]·cols[c][p]` for `c < COLUMNS`, prefetching the `k` elements at each
/// of `next` (the columns of the following call), if given, into the L2 cache as it goes.
///
/// # Safety
/// `x` and every `cols[c]` must address `k` readable contiguous elements; the CPU must have
/// the kernel's target features. `next` is only prefetched (a hint, never read).
pub(super) type DotFn<T> =
    unsafe fn(usize, *const T, [*const T; COLUMNS], Option<[*const T; COLUMNS]>) -> [T; COLUMNS];

/// Whether a vector-matrix product prefetches the next columns of a weight of `bytes`: a
/// weight read from memory streams in runs of one row each, too short for the hardware
/// prefetcher to get ahead of (on a Zen 4 the software prefetch made batch-1 decoding of
/// 125M-parameter models 1.25x faster in f32 and 1.4x in bf16), but one that the caches can
/// hold (a small model's, read again on every call) runs about 15% slower with the extra
/// instructions. Only the caller knows where the weight is; its size decides here: at least
/// twice this core's L2.
pub(crate) fn worth_prefetching(bytes: usize) -> bool {
    let l2 = crate::cpu_caches::CacheSizes::of_this_machine()
        .l2
        .unwrap_or(1 << 20);
    bytes >= 2 * l2
}

/// Writes a kernel: `unroll` vectors of `x` per step (`unroll · COLUMNS` accumulators), then
/// one vector at a time, then a scalar tail; lanes summed at the end. With `next`, the
/// unrolled steps also prefetch the same lines of the next call's columns into L2 (see
/// [`worth_prefetching`]; on a Zen 4 the L1 hint gained about half as much as the L2 one).
macro_rules! dot_kernel {
    ($(#[$doc:meta])* $name:ident: $t:ty, $feature:literal, lanes = $lanes:literal,
     unroll = $unroll:literal, $vec:ty, $zero:ident, $load:ident, $fma:ident, $add:ident,
     $reduce:ident) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// As [`DotFn`].
        #[target_feature(enable = $feature)]
        pub(in crate::kernels::gemm) unsafe fn $name(
            k: usize,
            x: *const $t,
            cols: [*const $t; COLUMNS],
            next: Option<[*const $t; COLUMNS]>,
        ) -> [$t; COLUMNS] {
            // SAFETY: every read is at an index below `k` of `x` or of a column.
            unsafe {
                let mut acc: [[$vec; COLUMNS]; $unroll] = [[$zero(); COLUMNS]; $unroll];
                let mut p = 0;
                while p + $unroll * $lanes <= k {
                    for (u, acc) in acc.iter_mut().enumerate() {
                        let at = p + u * $lanes;
                        let xs = $load(x.add(at));
                        if let Some(next) = next {
                            if (at * std::mem::size_of::<$t>()) % PREFETCH_SPAN_BYTES == 0 {
                                for ahead in next {
                                    // A hint: it reads nothing architecturally, cannot fault.
                                    _mm_prefetch::<_MM_HINT_T1>(ahead.wrapping_add(at).cast());
                                }
                            }
                        }
                        for c in 0..COLUMNS {
                            acc[c] = $fma(xs, $load(cols[c].add(at)), acc[c]);
                        }
                    }
                    p += $unroll * $lanes;
                }
                while p + $lanes <= k {
                    let xs = $load(x.add(p));
                    for c in 0..COLUMNS {
                        acc[0][c] = $fma(xs, $load(cols[c].add(p)), acc[0][c]);
                    }
                    p += $lanes;
                }
                let mut out = [0.0; COLUMNS];
                for c in 0..COLUMNS {
                    let mut lanes = acc[0][c];
                    for acc in &acc[1..] {
                        lanes = $add(lanes, acc[c]);
                    }
                    let mut sum = $reduce(lanes);
                    for q in p..k {
                        sum += *x.add(q) * *cols[c].add(q);
                    }
                    out[c] = sum;
                }
                out
            }
        }
    };
}

/// AVX-512F kernels.
#[cfg(all(target_arch = "x86_64", tessera_avx512))]
pub(super) mod avx512 {
    use super::{COLUMNS, PREFETCH_SPAN_BYTES};
    use core::arch::x86_64::*;

    dot_kernel!(
        /// f32, 16 lanes.
        f32_dot: f32, "avx512f", lanes = 16, unroll = 2, __m512, _mm512_setzero_ps,
        _mm512_loadu_ps, _mm512_fmadd_ps, _mm512_add_ps, _mm512_reduce_add_ps
    );
    dot_kernel!(
        /// f64, 8 lanes.
        f64_dot: f64, "avx512f", lanes = 8, unroll = 2, __m512d, _mm512_setzero_pd,
        _mm512_loadu_pd, _mm512_fmadd_pd, _mm512_add_pd, _mm512_reduce_add_pd
    );
}

/// AVX2 + FMA kernels.
#[cfg(target_arch = "x86_64")]
pub(super) mod avx2 {
    use super::{COLUMNS, PREFETCH_SPAN_BYTES};
    use core::arch::x86_64::*;

    dot_kernel!(
        /// f32, 8 lanes.
        f32_dot: f32, "avx2,fma", lanes = 8, unroll = 1, __m256, _mm256_setzero_ps,
        _mm256_loadu_ps, _mm256_fmadd_ps, _mm256_add_ps, reduce_add_ps
    );
    dot_kernel!(
        /// f64, 4 lanes.
        f64_dot: f64, "avx2,fma", lanes = 4, unroll = 1, __m256d, _mm256_setzero_pd,
        _mm256_loadu_pd, _mm256_fmadd_pd, _mm256_add_pd, reduce_add_pd
    );

    /// The sum of a vector's 8 lanes, by halves.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn reduce_add_ps(v: __m256) -> f32 {
        let quad = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let pair = _mm_add_ps(quad, _mm_movehl_ps(quad, quad));
        _mm_cvtss_f32(_mm_add_ss(pair, _mm_movehdup_ps(pair)))
    }

    /// The sum of a vector's 4 lanes, by halves.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn reduce_add_pd(v: __m256d) -> f64 {
        let pair = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd::<1>(v));
        _mm_cvtsd_f64(_mm_add_sd(pair, _mm_unpackhi_pd(pair, pair)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm::{GemmElement, GemmPath};

    /// Every kernel this CPU runs, against an f64 reference, on lengths that hit and miss the
    /// two-vector step, the one-vector step and the scalar tail.
    fn check<T: GemmElement + Into<f64> + From<f32>>(tolerance: f64) {
        for path in GemmPath::ALL {
            let Some(dot) = T::dot_columns(path).filter(|_| path.is_supported()) else {
                continue;
            };
            for k in [
                0, 1, 3, 4, 7, 8, 15, 16, 17, 31, 32, 33, 48, 63, 64, 100, 784,
            ] {
                let value = |i: usize| T::from(((i * 37 % 101) as f32 - 50.0) / 25.0);
                let x: Vec<T> = (0..k).map(value).collect();
                let cols: Vec<Vec<T>> = (0..COLUMNS)
                    .map(|c| (0..k).map(|p| value(p * 3 + c * 11 + 5)).collect())
                    .collect();
                let ptrs = std::array::from_fn(|c| cols[c].as_ptr());
                // SAFETY: x and every column hold k elements; `path` is supported.
                let got = unsafe { dot(k, x.as_ptr(), ptrs, (k % 2 == 0).then_some(ptrs)) };
                for c in 0..COLUMNS {
                    let want: f64 = (0..k).map(|p| x[p].into() * cols[c][p].into()).sum();
                    let scale: f64 = (0..k)
                        .map(|p| (x[p].into() * cols[c][p].into()).abs())
                        .sum();
                    let err = (got[c].into() - want).abs();
                    assert!(
                        err <= tolerance * (scale + 1.0),
                        "{path:?} k={k} column {c}: {:?} vs {want}",
                        got[c]
                    );
                }
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "SIMD intrinsics: not for Miri")]
    fn simd_dots_match_an_f64_reference_f32() {
        check::<f32>(1e-6);
    }

    #[test]
    #[cfg_attr(miri, ignore = "SIMD intrinsics: not for Miri")]
    fn simd_dots_match_an_f64_reference_f64() {
        check::<f64>(1e-14);
    }
}
