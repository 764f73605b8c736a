//! The bf16 vector-matrix product of batch-1 decoding: `x · Wᵀ` for one row `x` and a linear
//! layer's weight `W: [n, k]` stored row-major (the product's right operand is the transposed
//! view, each of its columns a contiguous row of `W`). Each output is the dot product of `x`
//! with one row of `W` on `vdpbf16ps` (32 bf16 products per instruction, added in pairs into
//! 16 f32 lanes), eight rows per call so that each load of `x` serves eight; the last `k % 32`
//! values in scalar f32. The weight streams from memory once, in bf16: half the bytes of the f32
//! GEMV, where the GEMM would first pack the whole weight on every call.

use super::gemm_bf16::{Bf16Matrix, ProductOutput};
use half::slice::HalfFloatSliceExt;
use rayon::prelude::*;
use tessera_core::Result;

/// Output columns per parallel task.
const COLUMNS_PER_TASK: usize = 64;
/// Multiply-adds below which the product runs on the calling thread.
const PARALLEL_MACS: usize = 1 << 18;

/// The dot products of `x` (`k` values) with eight rows: `rows[r]` holds at least `k` values.
/// `next`, if given, are the rows of the following call, which the kernel asks the CPU to
/// prefetch into L2 (a hint; nothing of them is read; see
/// [`crate::kernels::gemm::worth_prefetching`]).
type Dot8 = fn(&[u16], [&[u16]; 8], Option<[&[u16]; 8]>) -> [f32; 8];

/// The `vdpbf16ps` dot kernel, when this build has it and this CPU runs it.
fn kernel() -> Option<Dot8> {
    #[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
    {
        if std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16") {
            return Some(avx512::dot8);
        }
    }
    None
}

/// `a · b` into `out` (`1 x b.cols`) when `a` is one contiguous row, `b`'s columns are
/// contiguous (`b.rs == 1`) and the CPU has the kernel; `Ok(false)`, having written nothing,
/// otherwise.
pub(crate) fn try_gemv<O: ProductOutput>(
    a: &Bf16Matrix,
    b: &Bf16Matrix,
    threads: usize,
    out: &mut [O],
) -> Result<bool> {
    let Some(dot8) = kernel() else {
        return Ok(false);
    };
    if a.rows != 1 || (a.cs != 1 && a.cols > 1) || (b.rs != 1 && b.rows > 1) {
        return Ok(false);
    }
    gemv_with(dot8, a, b, threads, out)?;
    Ok(true)
}

/// [`try_gemv`]'s product through `dot8`.
fn gemv_with<O: ProductOutput>(
    dot8: Dot8,
    a: &Bf16Matrix,
    b: &Bf16Matrix,
    threads: usize,
    out: &mut [O],
) -> Result<()> {
    a.check_in_bounds()?;
    b.check_in_bounds()?;
    let (k, n) = (a.cols, b.cols);
    assert_eq!(b.rows, k, "inner dimensions");
    assert_eq!(out.len(), n, "output length");
    if n == 0 {
        return Ok(());
    }
    if k == 0 {
        // Empty sums (the operands' offsets may lie past their storage: nothing is read).
        for part in out.chunks_mut(8) {
            O::store(part, &[0.0; 8][..part.len()]);
        }
        return Ok(());
    }
    let x: Vec<u16> = (0..k)
        .map(|i| a.data[a.offset + i * a.cs].to_bits())
        .collect();
    // Row `j` of `W`: the `k` values of column `j` of `b`, contiguous (checked in bounds).
    let row = |j: usize| -> &[u16] {
        let start = b.offset + j * b.cs;
        b.data[start..start + k].reinterpret_cast()
    };
    let prefetch = crate::kernels::gemm::worth_prefetching(2 * k * n);
    let task = |(t, dst): (usize, &mut [O])| {
        let first = t * COLUMNS_PER_TASK;
        for (c, part) in dst.chunks_mut(8).enumerate() {
            let j0 = first + 8 * c;
            // A short last group repeats its last row; the extra results are dropped.
            let rows = std::array::from_fn(|r| row(j0 + r.min(part.len() - 1)));
            let next = prefetch.then(|| std::array::from_fn(|r| row((j0 + 8 + r).min(n - 1))));
            let sums = dot8(&x, rows, next);
            O::store(part, &sums[..part.len()]);
        }
    };
    if threads > 1 && n * k >= PARALLEL_MACS {
        out.par_chunks_mut(COLUMNS_PER_TASK)
            .enumerate()
            .for_each(task);
    } else {
        out.chunks_mut(COLUMNS_PER_TASK).enumerate().for_each(task);
    }
    Ok(())
}

/// The scalar twin of the kernel (the products summed in order, in f32), for the tests: on
/// values whose products and sums are exact in f32, both give the definition's result.
#[cfg(test)]
fn portable_dot8(x: &[u16], rows: [&[u16]; 8], _next: Option<[&[u16]; 8]>) -> [f32; 8] {
    let value = |bits: u16| f32::from_bits(u32::from(bits) << 16);
    rows.map(|row| {
        x.iter()
            .zip(row)
            .fold(0.0f32, |acc, (&a, &w)| acc + value(a) * value(w))
    })
}

#[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
mod avx512 {
    // Built only where `build.rs` found the AVX-512 intrinsics stable (Rust 1.89+).
    #![allow(clippy::incompatible_msrv)]
    use crate::kernels::gemm::PREFETCH_SPAN_BYTES;
    use std::arch::x86_64::*;

    /// [`super::Dot8`] on `vdpbf16ps`.
    pub(super) fn dot8(x: &[u16], rows: [&[u16]; 8], next: Option<[&[u16]; 8]>) -> [f32; 8] {
        let k = x.len();
        assert!(
            rows.iter()
                .chain(next.iter().flatten())
                .all(|r| r.len() >= k),
            "rows shorter than x"
        );
        assert!(
            std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bf16"),
            "the CPU lacks avx512_bf16"
        );
        // SAFETY: the CPU has the features (asserted); the kernel reads `k` values of `x` and
        // of each row, which hold at least that many (asserted).
        unsafe {
            dot8_avx512(
                x.as_ptr(),
                rows.map(<[u16]>::as_ptr),
                next.map(|rows| rows.map(<[u16]>::as_ptr)),
                k,
            )
        }
    }

    /// # Safety
    /// The CPU has AVX-512F and AVX-512 BF16; `x` and every row hold `k` readable values
    /// (`next`, only prefetched, too).
    #[target_feature(enable = "avx512f,avx512bf16")]
    unsafe fn dot8_avx512(
        x: *const u16,
        rows: [*const u16; 8],
        next: Option<[*const u16; 8]>,
        k: usize,
    ) -> [f32; 8] {
        let mut acc = [_mm512_setzero_ps(); 8];
        let whole = k - k % 32;
        let mut i = 0;
        while i < whole {
            // SAFETY: values `i..i + 32 <= k` of `x` and of each row are readable.
            unsafe {
                let xv: __m512bh = std::mem::transmute(_mm512_loadu_si512(x.add(i).cast()));
                if let Some(next) = next {
                    if (2 * i) % PREFETCH_SPAN_BYTES == 0 {
                        for ahead in next {
                            _mm_prefetch::<_MM_HINT_T1>(ahead.add(i).cast());
                        }
                    }
                }
                for (a, row) in acc.iter_mut().zip(rows) {
                    let w: __m512bh = std::mem::transmute(_mm512_loadu_si512(row.add(i).cast()));
                    *a = _mm512_dpbf16_ps(*a, xv, w);
                }
            }
            i += 32;
        }
        let value = |bits: u16| f32::from_bits(u32::from(bits) << 16);
        let mut sums = [0.0f32; 8];
        for ((s, a), row) in sums.iter_mut().zip(acc).zip(rows) {
            *s = _mm512_reduce_add_ps(a);
            for t in whole..k {
                // SAFETY: `t < k`.
                *s += unsafe { value(x.add(t).read()) * value(row.add(t).read()) };
            }
        }
        sums
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::gemm_bf16::tests::{matrix, reference, values};
    use tessera_core::bf16;

    /// `x · Wᵀ` for `x: [1, k]`, `W: [n, k]` (`b` the transposed view) through `dot8`, in f32.
    fn product(dot8: Dot8, (k, n): (usize, usize), threads: usize) -> (Vec<f32>, Vec<f64>) {
        let (dx, dw) = (values(k, 1), values(n * k, 2));
        let a = matrix(&dx, 1, k, false);
        let b = matrix(&dw, k, n, true);
        let mut out = vec![0.0f32; n];
        gemv_with(dot8, &a, &b, threads, &mut out).unwrap();
        (out, reference(&a, &b))
    }

    #[test]
    fn miri_the_portable_dot_computes_the_product_of_the_definition() {
        // Exact: every product and partial sum of these values is an f32.
        for shape in [(1, 1), (7, 3), (33, 9), (64, 17)] {
            let (got, want) = product(portable_dot8, shape, 1);
            let got: Vec<f64> = got.into_iter().map(f64::from).collect();
            assert_eq!(got, want, "{shape:?}");
        }
    }

    #[test]
    fn the_kernel_computes_the_product_of_the_definition() {
        let Some(dot8) = kernel() else {
            eprintln!("skipped: this CPU has no avx512_bf16 (or this build no AVX-512)");
            return;
        };
        // Whole steps of 32, tails, partial groups of eight rows, several tasks on threads.
        for (shape, threads) in [
            ((0, 3), 1),
            ((1, 1), 1),
            ((31, 8), 1),
            ((32, 9), 1),
            ((100, 130), 2),
        ] {
            let (got, want) = product(dot8, shape, threads);
            let got: Vec<f64> = got.into_iter().map(f64::from).collect();
            assert_eq!(got, want, "{shape:?}");
        }
        let (got, want) = product(dot8, (5000, 70), 2);
        let got: Vec<f64> = got.into_iter().map(f64::from).collect();
        assert_eq!(got, want, "k = 5000");
        // Prefetching the next rows (only weights of megabytes do in a product) changes
        // nothing of the sums.
        for k in [31, 32, 100, 777] {
            let (x, w) = (values(k, 5), values(8 * k + 5, 6));
            let bits = |v: &[bf16]| v.iter().map(|b| b.to_bits()).collect::<Vec<u16>>();
            let (x, w) = (bits(&x), bits(&w));
            let rows: [&[u16]; 8] = std::array::from_fn(|r| &w[r * k..(r + 1) * k]);
            let next: [&[u16]; 8] = std::array::from_fn(|r| &w[r * k + 5..(r + 1) * k + 5]);
            assert_eq!(dot8(&x, rows, Some(next)), dot8(&x, rows, None), "k = {k}");
            assert_eq!(
                dot8(&x, rows, None),
                portable_dot8(&x, rows, None),
                "k = {k}"
            );
        }
    }

    #[test]
    fn only_one_contiguous_row_times_contiguous_columns_takes_the_vector_path() {
        let data = values(64, 3);
        let mut out = [bf16::ZERO; 4];
        let two_rows = matrix(&data, 2, 8, false);
        let b = matrix(&data, 8, 4, true);
        assert!(!try_gemv(&two_rows, &b, 1, &mut out[..]).unwrap());
        let row_major_b = matrix(&data, 8, 4, false);
        let x = matrix(&data, 1, 8, false);
        assert!(!try_gemv(&x, &row_major_b, 1, &mut out[..]).unwrap());
    }
}
