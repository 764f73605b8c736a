//! Wider vectors for the compiler-vectorised element-wise loops and a row's maximum: each function
//! here runs its loop compiled with AVX-512F or else AVX2 enabled when the CPU has it (detected at
//! run time, cached by `std`), so the maps use 512- or 256-bit vectors instead of the x86-64
//! baseline's 128-bit SSE2. AVX-512 also gives the long loops (GELU and its gradient, `exp`) 32
//! vector registers instead of 16, so their constants stay in registers: GELU's forward and
//! gradient ran 1.8-1.9x faster than with AVX2 on a Zen 4 (which splits 512-bit operations in two).
//! The loops are ordinary safe code; only the call through the target-feature wrapper is `unsafe`.
//! Results are bit-for-bit those of the baseline build: Rust never contracts a multiply and an add
//! into an FMA, and the loops do the same operations on wider registers.
//!
//! The loops take their slices as arguments (not captured by a closure), so the compiler knows the
//! output does not alias the inputs and keeps everything in registers.

use super::num::Num;
use num_traits::Zero;

/// Whether to take the AVX2 copies (never under Miri, which has no target features).
#[inline(always)]
pub(crate) fn avx2() -> bool {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    {
        false
    }
}

/// Whether to take the AVX-512 copies: where the build has the intrinsics' target features
/// stable and the CPU has AVX-512F (never under Miri).
#[inline(always)]
pub(crate) fn avx512() -> bool {
    #[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
    {
        std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(all(target_arch = "x86_64", tessera_avx512, not(miri))))]
    {
        false
    }
}

/// Defines a public-in-crate function that runs a plain loop compiled with AVX-512F where the
/// CPU has it, else with AVX2, else for the x86-64 baseline: the loop is safe code, and only the
/// calls through the target-feature copies are `unsafe` (each after its feature was detected).
/// The loop takes the same generic parameters in the same order.
macro_rules! widest {
    (
        $(#[$doc:meta])*
        fn $name:ident<$($gen:ident),*>($($arg:ident: $ty:ty),*) $(-> $ret:ty)?
        where [$($bounds:tt)*]
        = $loop:ident
    ) => {
        $(#[$doc])*
        #[inline(always)]
        pub(crate) fn $name<$($gen),*>($($arg: $ty),*) $(-> $ret)?
        where
            $($bounds)*
        {
            #[cfg(all(target_arch = "x86_64", tessera_avx512))]
            if $crate::kernels::wide::avx512() {
                /// The loop compiled for AVX-512.
                ///
                /// # Safety
                /// The CPU must have AVX-512F.
                #[target_feature(enable = "avx512f")]
                unsafe fn wide512<$($gen),*>($($arg: $ty),*) $(-> $ret)?
                where
                    $($bounds)*
                {
                    $loop::<$($gen),*>($($arg),*)
                }
                // SAFETY: AVX-512F was detected just above; the loop is safe code.
                return unsafe { wide512::<$($gen),*>($($arg),*) };
            }
            #[cfg(target_arch = "x86_64")]
            if $crate::kernels::wide::avx2() {
                /// The loop compiled for AVX2.
                ///
                /// # Safety
                /// The CPU must have AVX2.
                #[target_feature(enable = "avx2")]
                unsafe fn wide<$($gen),*>($($arg: $ty),*) $(-> $ret)?
                where
                    $($bounds)*
                {
                    $loop::<$($gen),*>($($arg),*)
                }
                // SAFETY: AVX2 was detected just above; the loop is safe code.
                return unsafe { wide::<$($gen),*>($($arg),*) };
            }
            $loop::<$($gen),*>($($arg),*)
        }
    };
}

pub(crate) use widest;

/// `dst[i] = f(src[i])` over the common length.
#[inline(always)]
fn map_loop<T: Copy, U, F: Fn(T) -> U>(dst: &mut [U], src: &[T], f: &F) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = f(v);
    }
}

/// `dst[i] = f(a[i], b[i])` over the common length.
#[inline(always)]
fn zip_loop<A: Copy, B: Copy, U, F: Fn(A, B) -> U>(dst: &mut [U], a: &[A], b: &[B], f: &F) {
    for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
        *d = f(x, y);
    }
}

/// `acc[i] = f(acc[i], src[i])` over the common length.
#[inline(always)]
fn fold_into_loop<T: Copy, S: Copy, F: Fn(T, S) -> T>(acc: &mut [T], src: &[S], f: &F) {
    for (a, &v) in acc.iter_mut().zip(src) {
        *a = f(*a, v);
    }
}

/// Partial results kept apart in [`max_loop`] and [`map_sum_loop`], so that the compiler keeps
/// them in vector registers (a fold over one accumulator runs at one operation's latency per
/// element).
const LANES: usize = 16;

/// The largest element of `src`, NaN when any element is NaN, `T::LOWEST` when it is empty:
/// [`Num::max_nan`] over [`LANES`] partial maxima, then over those in order.
#[inline(always)]
fn max_loop<T: Num + Copy>(src: &[T]) -> T {
    let mut lanes = [T::LOWEST; LANES];
    let mut chunks = src.chunks_exact(LANES);
    for chunk in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(chunk) {
            *m = m.max_nan(v);
        }
    }
    let tail = chunks
        .remainder()
        .iter()
        .fold(T::LOWEST, |m, &v| m.max_nan(v));
    lanes.iter().fold(tail, |m, &v| m.max_nan(v))
}

/// `data[i] = f(data[i])`.
#[inline(always)]
fn map_in_place_loop<T: Copy, F: Fn(T) -> T>(data: &mut [T], f: &F) {
    for x in data {
        *x = f(*x);
    }
}

/// `data[i] = f(data[i])`, returning the sum of the new values: [`LANES`] partial sums over
/// whole chunks, the remainder summed in order, then the partial sums added to it in order.
#[inline(always)]
fn map_sum_loop<T: Zero + Copy, F: Fn(T) -> T>(data: &mut [T], f: &F) -> T {
    let mut lanes = [T::zero(); LANES];
    let mut chunks = data.chunks_exact_mut(LANES);
    for chunk in &mut chunks {
        for (sum, x) in lanes.iter_mut().zip(chunk) {
            *x = f(*x);
            *sum = *sum + *x;
        }
    }
    let mut tail = T::zero();
    for x in chunks.into_remainder() {
        *x = f(*x);
        tail = tail + *x;
    }
    lanes.iter().fold(tail, |s, &x| s + x)
}

widest! {
    /// `dst[i] = f(src[i])` over the common length, with the widest vectors the CPU has.
    fn map_contiguous<T, U, F>(dst: &mut [U], src: &[T], f: &F)
    where [T: Copy, F: Fn(T) -> U]
    = map_loop
}

widest! {
    /// `dst[i] = f(a[i], b[i])` over the common length, with the widest vectors the CPU has.
    fn zip_contiguous<A, B, U, F>(dst: &mut [U], a: &[A], b: &[B], f: &F)
    where [A: Copy, B: Copy, F: Fn(A, B) -> U]
    = zip_loop
}

widest! {
    /// `acc[i] = f(acc[i], src[i])` over the common length, with the widest vectors the CPU
    /// has (a row folded into a tile of partial sums).
    fn fold_into<T, S, F>(acc: &mut [T], src: &[S], f: &F)
    where [T: Copy, S: Copy, F: Fn(T, S) -> T]
    = fold_into_loop
}

widest! {
    /// [`max_loop`] with the widest vectors the CPU has (a row's maximum, e.g. the shift of a
    /// softmax over a vocabulary).
    fn max_contiguous<T>(src: &[T]) -> T
    where [T: Num + Copy]
    = max_loop
}

widest! {
    /// `data[i] = f(data[i])` with the widest vectors the CPU has (a row of scores turned into
    /// probabilities in place).
    fn map_in_place<T, F>(data: &mut [T], f: &F)
    where [T: Copy, F: Fn(T) -> T]
    = map_in_place_loop
}

widest! {
    /// [`map_sum_loop`] with the widest vectors the CPU has: a row exponentiated in place and
    /// its sum, bit for bit what the same loop gives at the baseline's width.
    fn map_sum_in_place<T, F>(data: &mut [T], f: &F) -> T
    where [T: Zero + Copy, F: Fn(T) -> T]
    = map_sum_loop
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under Miri these run the baseline loops; natively, the AVX2 ones where the CPU has them.
    /// Lengths around the vector widths, outputs compared with scalar loops.
    #[test]
    fn miri_wide_loops_match_scalar_loops() {
        for len in [0, 1, 7, 8, 9, 17, 33] {
            let a: Vec<f32> = (0..len).map(|i| i as f32 * 0.75 - 5.0).collect();
            let b: Vec<f32> = (0..len).map(|i| 3.0 - i as f32 * 0.5).collect();
            let relu = |v: f32| if v > 0.0 || v.is_nan() { v } else { 0.0 };
            let mut got = vec![f32::NAN; len];
            map_contiguous(&mut got, &a, &relu);
            let want: Vec<f32> = a.iter().map(|&v| relu(v)).collect();
            assert_eq!(got, want, "map, len {len}");
            let mut got = vec![f32::NAN; len];
            zip_contiguous(&mut got, &a, &b, &|x: f32, y: f32| x * y + 1.0);
            let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x * y + 1.0).collect();
            assert_eq!(got, want, "zip, len {len}");
            let want = a.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
            assert_eq!(max_contiguous(&a), want, "max, len {len}");
            let mut got = b.clone();
            fold_into(&mut got, &a, &|x: f32, y: f32| x - 2.0 * y);
            let want: Vec<f32> = b.iter().zip(&a).map(|(x, y)| x - 2.0 * y).collect();
            assert_eq!(got, want, "fold into, len {len}");
            let shifted_exp = |v: f32| super::super::vector_math::exp(v - 1.5);
            let mut got = a.clone();
            map_in_place(&mut got, &shifted_exp);
            let want: Vec<f32> = a.iter().map(|&v| shifted_exp(v)).collect();
            assert_eq!(got, want, "map in place, len {len}");
            let mut got = a.clone();
            let sum = map_sum_in_place(&mut got, &shifted_exp);
            assert_eq!(got, want, "map and sum in place, len {len}");
            let mut baseline = a.clone();
            let baseline_sum = map_sum_loop(&mut baseline, &shifted_exp);
            assert_eq!(sum.to_bits(), baseline_sum.to_bits(), "sum, len {len}");
            let exact: f64 = want.iter().map(|&v| f64::from(v)).sum();
            assert!(
                (f64::from(sum) - exact).abs() <= 1e-6 * exact.abs(),
                "sum {sum} against {exact}, len {len}"
            );
            if len > 0 {
                let mut with_nan = a.clone();
                with_nan[len / 2] = f32::NAN;
                assert!(
                    max_contiguous(&with_nan).is_nan(),
                    "max with NaN, len {len}"
                );
            }
        }
    }
}
