//! The gradient of the exact GELU in one pass: `grad · (Φ(x) + x φ(x))`.

use rayon::prelude::*;
use std::mem::MaybeUninit;
use tessera_core::{bf16, Element, FloatElement, Result};

use super::lanes::zip_through_f32;
use super::vector_math;
use super::wide::zip_contiguous;
use crate::alloc::{assume_init, try_uninit, try_with_capacity};
use crate::parallel::{chunk_len, worth_parallel};

/// `1 / √(2π)`.
const INV_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// The f32 gradient in vector arithmetic: `Φ` from [`vector_math::normal_cdf`] (relative error
/// below 2e-6 in both tails, where `(1 + erf(x/√2)) / 2` cancels) and `φ` from
/// [`vector_math::exp`]; within a few ulp of the exact gradient wherever it is not tiny.
#[inline(always)]
fn slope(v: f32, g: f32) -> f32 {
    let pdf = vector_math::exp(-0.5 * (v * v)) * INV_SQRT_2PI as f32;
    g * (vector_math::normal_cdf(v) + v * pdf)
}

/// The gradient on f32 values, [`slope`] per element in one pass.
pub(crate) fn gelu_backward_f32(x: &[f32], grad: &[f32]) -> Result<Vec<f32>> {
    // SAFETY: `zip_contiguous` writes every output of the chunk (all three lengths agree).
    unsafe {
        in_chunks(x, grad, |out, x, g| {
            zip_contiguous(out, x, g, &|v, g| MaybeUninit::new(slope(v, g)))
        })
    }
}

/// The gradient on bf16 values computed in f32 and rounded once per element (what
/// tensor-core's widening gives, bit for bit), through f32 blocks on the stack
/// ([`zip_through_f32`]: the f32 loop of [`gelu_backward_f32`], which the conversions would
/// keep from being inlined).
pub(crate) fn gelu_backward_bf16(x: &[bf16], grad: &[bf16]) -> Result<Vec<bf16>> {
    // SAFETY: `zip_through_f32` writes every output of the chunk (all three lengths agree).
    unsafe {
        in_chunks(x, grad, |out, x, g| {
            zip_through_f32(out, x, g, |out, x, g| zip_contiguous(out, x, g, &slope))
        })
    }
}

/// `kernel(out, x, grad)` over the common length, split into chunks over rayon's threads when
/// that pays.
///
/// # Safety
/// `kernel` must write every output of the chunk it is given.
unsafe fn in_chunks<S: Copy + Send + Sync>(
    x: &[S],
    grad: &[S],
    kernel: impl Fn(&mut [MaybeUninit<S>], &[S], &[S]) + Sync,
) -> Result<Vec<S>> {
    let len = x.len().min(grad.len());
    let mut out = try_uninit::<S>(len)?;
    if worth_parallel(len) {
        let chunk = chunk_len(len, 4096);
        out.par_chunks_mut(chunk)
            .zip(x.par_chunks(chunk).zip(grad.par_chunks(chunk)))
            .for_each(|(out, (x, g))| kernel(out, x, g));
    } else {
        kernel(&mut out, &x[..len], &grad[..len]);
    }
    // SAFETY: `kernel` writes every one of the `len` outputs of its chunks (the contract; the
    // chunks of `out`, `x` and `grad` line up, all `len` long).
    Ok(unsafe { assume_init(out) })
}

/// `out[i] = grad[i] · (Φ(x[i]) + x[i] φ(x[i]))` with the operations of
/// [`tessera_core::composite::gelu_backward`] in its order (each constant rounded to `T`
/// once), so that the two agree bit for bit: the f64 path.
pub(crate) fn gelu_backward_exact<T: FloatElement + Send + Sync>(
    x: &[T],
    grad: &[T],
) -> Result<Vec<T>> {
    let c = |v: f64| <T as Element>::from_f64(v);
    let (inv_sqrt2, one, half) = (c(std::f64::consts::FRAC_1_SQRT_2), c(1.0), c(0.5));
    let (minus_half, inv_sqrt_2pi) = (c(-0.5), c(INV_SQRT_2PI));
    let slope = move |(&v, &g): (&T, &T)| {
        let cdf = ((v * inv_sqrt2).erf() + one) * half;
        let pdf = ((v * v) * minus_half).exp() * inv_sqrt_2pi;
        g * (cdf + v * pdf)
    };
    let mut out = try_with_capacity(x.len().min(grad.len()))?;
    if worth_parallel(x.len()) {
        out.par_extend(x.par_iter().zip(grad).map(slope));
    } else {
        out.extend(x.iter().zip(grad).map(slope));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miri_the_f32_gradient_writes_every_element_and_matches_the_f64_definition() {
        let x: Vec<f32> = (0..37).map(|i| (i as f32 - 18.0) * 0.41).collect();
        let g: Vec<f32> = (0..37).map(|i| 1.0 + (i % 5) as f32 * 0.25).collect();
        let got = gelu_backward_f32(&x, &g).unwrap();
        let (xd, gd): (Vec<f64>, Vec<f64>) = x
            .iter()
            .zip(&g)
            .map(|(&a, &b)| (a as f64, b as f64))
            .unzip();
        let want = gelu_backward_exact(&xd, &gd).unwrap();
        assert_eq!(got.len(), 37);
        for (((&got, &want), &v), &g) in got.iter().zip(&want).zip(&x).zip(&g) {
            // Within a few ulp of the terms `Φ(x)` and `x φ(x)` (which cancel near x = -0.75),
            // widened by the condition number `1 + x²` of the tails.
            let (v, g) = (v as f64, g as f64);
            let cdf = 0.5 * libm::erfc(-v / std::f64::consts::SQRT_2);
            let terms = g.abs() * (cdf + v.abs() * (-0.5 * v * v).exp() * INV_SQRT_2PI);
            let bound = 4.0 * f32::EPSILON as f64 * terms * (1.0 + v * v);
            assert!(
                (got as f64 - want).abs() <= bound,
                "x = {v}: {got} vs {want}"
            );
        }
    }
}
