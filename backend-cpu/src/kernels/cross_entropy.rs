//! Softmax cross-entropy over rows of class logits and its gradient, one row at a time
//! (definition in `tessera_core::cross_entropy`).
//!
//! Each row is shifted by its maximum `m` (NaN-propagating, so a row holding `+inf` or NaN,
//! or only `-inf`, gives NaN, as the composite's log-softmax does): with `e_j = exp(x_j - m)`
//! and `S = Σ e_j`,
//!
//! ```text
//! loss   = ln S + (1 - s)(m - x_t) - (s / c) Σ_j (x_j - m)
//! dx_j   = g · ((e_j / S - (1 - s)[j = t]) - s / c)
//! ```
//!
//! The loss is written in shifted terms so that logits of `1e4` do not lose their digits to
//! `lse - x_t`. The forward pass reads the row twice (maximum, then `e` into a scratch row
//! that stays in cache) and writes nothing of the row's size; the backward pass reads it
//! twice and writes the gradient once, where the composite makes the log-probabilities, a
//! one-hot matrix and three more temporaries of the logits' size. `exp` is the vector
//! [`super::vector_math::exp`] for f32 and the loops over a row run with the widest vectors the
//! CPU has ([`super::wide`]).

use rayon::prelude::*;
use std::mem::MaybeUninit;
use tessera_core::{FloatElement, Result};

use super::index_check::checked_index;
use super::lanes::Lane;
use super::num::Num;
use super::reducer::{reduce_slice, SumOp};
use super::wide::{map_contiguous, max_contiguous};
use crate::alloc::{assume_init, checked_len, try_uninit, try_zeroed};
use crate::parallel::{chunk_len, try_fill_rows, worth_parallel};

const FORWARD: &str = "cross_entropy";
const BACKWARD: &str = "cross_entropy_backward";

/// A float type the kernels run on: how a row is exponentiated.
pub(crate) trait CrossEntropyFloat: FloatElement + Num + Lane<Self> {
    /// `dst[j] = e^(src[j] - shift)` over the common length.
    fn exp_shifted(dst: &mut [Self], src: &[Self], shift: Self);
}

impl CrossEntropyFloat for f32 {
    fn exp_shifted(dst: &mut [f32], src: &[f32], shift: f32) {
        map_contiguous(dst, src, &|v| super::vector_math::exp(v - shift));
    }
}

impl CrossEntropyFloat for f64 {
    fn exp_shifted(dst: &mut [f64], src: &[f64], shift: f64) {
        map_contiguous(dst, src, &|v: f64| (v - shift).exp());
    }
}

/// The shared part of both passes for one row: the maximum `m`, and `e_j = exp(x_j - m)` in
/// `scratch` (the row's length) with their sum.
fn shifted_exponentials<T: CrossEntropyFloat>(row: &[T], scratch: &mut [T]) -> (T, T) {
    let m = max_contiguous(row);
    T::exp_shifted(scratch, row, m);
    (m, reduce_slice::<T, T, SumOp>(scratch))
}

/// The class of each row, checked to be in `0..c`.
fn checked_targets(op: &'static str, targets: &[i64], c: usize) -> Result<Vec<usize>> {
    targets.iter().map(|&t| checked_index(op, t, c)).collect()
}

/// `(1 - s, s / c)` in `T`: the target's weight and every class's share of the smoothing.
fn coefficients<T: CrossEntropyFloat>(c: usize, label_smoothing: f64) -> (T, T) {
    let from = <T as tessera_core::Element>::from_f64;
    (
        from(1.0 - label_smoothing),
        from(label_smoothing / c as f64),
    )
}

/// Rows handed to one task of the forward pass (whose output has one element per row, so
/// `try_fill_rows` would judge the work by `n` alone): about four chunks per thread, at least
/// enough rows for a few thousand elements, or all rows when the work is small.
fn rows_per_task(n: usize, c: usize) -> usize {
    if !worth_parallel(n.saturating_mul(c)) {
        return n.max(1);
    }
    chunk_len(n, (8 * 1024usize).div_ceil(c.max(1)))
}

/// The per-row losses of `logits: [n, c]` (contiguous) against `targets: [n]`.
pub(crate) fn forward<T: CrossEntropyFloat>(
    logits: &[T],
    targets: &[i64],
    c: usize,
    label_smoothing: f64,
) -> Result<Vec<T>> {
    let n = targets.len();
    let rows = checked_targets(FORWARD, targets, c)?;
    let mut out = try_zeroed::<T>(n)?;
    let (keep, spread) = coefficients::<T>(c, label_smoothing);
    let per_task = rows_per_task(n, c);
    let task = |(chunk, losses): (usize, &mut [T])| -> Result<()> {
        let first = chunk * per_task;
        let mut scratch = try_zeroed::<T>(c)?;
        let mut shifted = if label_smoothing != 0.0 {
            try_zeroed::<T>(c)?
        } else {
            Vec::new()
        };
        for (r, loss) in losses.iter_mut().enumerate() {
            let i = first + r;
            let row = &logits[i * c..(i + 1) * c];
            let (m, sum) = shifted_exponentials(row, &mut scratch);
            let mut value = sum.ln() + keep * (m - row[rows[i]]);
            if label_smoothing != 0.0 {
                map_contiguous(&mut shifted, row, &|v| v - m);
                value = value - spread * reduce_slice::<T, T, SumOp>(&shifted);
            }
            *loss = value;
        }
        Ok(())
    };
    if per_task >= n {
        out.chunks_mut(per_task).enumerate().try_for_each(task)?;
    } else {
        out.par_chunks_mut(per_task)
            .enumerate()
            .try_for_each(task)?;
    }
    Ok(out)
}

/// The gradient `[n, c]` of the per-row losses given their upstream gradient `grad: [n]`.
pub(crate) fn backward<T: CrossEntropyFloat>(
    logits: &[T],
    targets: &[i64],
    grad: &[T],
    c: usize,
    label_smoothing: f64,
) -> Result<Vec<T>> {
    let n = targets.len();
    let rows = checked_targets(BACKWARD, targets, c)?;
    // Every element is written below (no zero-filling pass over the logits' size).
    let mut out = try_uninit::<T>(checked_len(BACKWARD, &[n, c])?)?;
    if c > 0 {
        let (keep, spread) = coefficients::<T>(c, label_smoothing);
        try_fill_rows(&mut out, c, |first, block| {
            let mut scratch = try_zeroed::<T>(c)?;
            for (r, out_row) in block.chunks_mut(c).enumerate() {
                let i = first + r;
                let row = &logits[i * c..(i + 1) * c];
                let (_, sum) = shifted_exponentials(row, &mut scratch);
                let g = grad[i];
                let slope = |e: T| MaybeUninit::new((e / sum - spread) * g);
                map_contiguous(out_row, &scratch, &slope);
                let t = rows[i];
                out_row[t] = MaybeUninit::new(((scratch[t] / sum - keep) - spread) * g);
            }
            Ok(())
        })?;
    }
    // SAFETY: every call succeeded (an error returned above), and each wrote all `c` elements
    // of each row of its block (`map_contiguous` over `scratch`, `c` long); the blocks of
    // whole rows cover the `n * c` elements.
    Ok(unsafe { assume_init(out) })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition in f64, written out plainly: log-softmax by the shifted formula.
    fn reference(x: &[f64], t: usize, s: f64) -> (f64, Vec<f64>) {
        let c = x.len();
        let m = x.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let ln_sum = x.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
        let log_p: Vec<f64> = x.iter().map(|v| (v - m) - ln_sum).collect();
        let loss = -(1.0 - s) * log_p[t] - s / c as f64 * log_p.iter().sum::<f64>();
        let grad = log_p
            .iter()
            .enumerate()
            .map(|(j, lp)| lp.exp() - (1.0 - s) * f64::from(j == t) - s / c as f64)
            .collect();
        (loss, grad)
    }

    #[test]
    fn miri_losses_and_gradients_match_the_definition() {
        // Rows of lengths around the lane count, shifted far from 0, with and without
        // smoothing.
        for (c, s) in [(1, 0.0), (3, 0.1), (17, 0.0), (33, 0.25)] {
            let n = 3;
            let x: Vec<f32> = (0..n * c)
                .map(|k| 1e3 + ((k * 7919) % 23) as f32 * 0.37 - 4.0)
                .collect();
            let targets: Vec<i64> = (0..n).map(|i| ((i * 5) % c) as i64).collect();
            let grad = [1.0f32, -0.5, 2.0];
            let losses = forward(&x, &targets, c, s).unwrap();
            let dx = backward(&x, &targets, &grad, c, s).unwrap();
            for i in 0..n {
                let row: Vec<f64> = x[i * c..(i + 1) * c].iter().map(|&v| v as f64).collect();
                let (loss, g) = reference(&row, targets[i] as usize, s);
                assert!(
                    (losses[i] as f64 - loss).abs() <= 1e-5 * (1.0 + loss.abs()),
                    "{c} {s}"
                );
                for j in 0..c {
                    let want = g[j] * grad[i] as f64;
                    let got = dx[i * c + j] as f64;
                    assert!(
                        (got - want).abs() <= 1e-6,
                        "{c} {s} {i} {j}: {got} vs {want}"
                    );
                }
            }
        }
    }

    #[test]
    fn miri_special_rows_give_nan_and_bad_targets_an_error() {
        let inf = f64::INFINITY;
        let x = [0.0, inf, 1.0, -inf, -inf, -inf, f64::NAN, 0.0, 0.0];
        let losses = forward(&x, &[0, 1, 2], 3, 0.0).unwrap();
        assert!(losses.iter().all(|l| l.is_nan()), "{losses:?}");
        let dx = backward(&x, &[0, 1, 2], &[1.0; 3], 3, 0.0).unwrap();
        assert!(dx.iter().all(|d| d.is_nan()), "{dx:?}");
        for bad in [-1, 3] {
            assert!(forward(&x, &[0, bad, 0], 3, 0.0).is_err());
            assert!(backward(&x, &[0, 0, bad], &[1.0; 3], 3, 0.0).is_err());
        }
    }
}
