//! Layer normalisation over the rows of a contiguous `[rows, n]` matrix, forward and backward,
//! each row in a few passes over its `n` values (see [`tessera_core::layer_norm`] for the
//! definition). Rows are split over threads; the sums run in [`LANES`] independent
//! accumulators, which the compiler keeps in vector registers.

use rayon::prelude::*;
use std::mem::MaybeUninit;
use tessera_core::{Element, FloatElement, Result};

use super::num::Num;
use super::reducer::{combine_lanes, SumOp, LANES};
use crate::alloc::{assume_init, try_filled, try_uninit};
use crate::parallel::{chunk_len, worth_parallel};

/// `Σ f(a[i], b[i], c[i])` over three slices of one length, in [`LANES`] partial sums (the
/// slices are walked in whole chunks, so the compiler drops the bounds checks and vectorises).
#[inline(always)]
fn lane_sum3<T: FloatElement + Num>(a: &[T], b: &[T], c: &[T], f: impl Fn(T, T, T) -> T) -> T {
    let mut acc = [T::zero(); LANES];
    let (ca, cb, cc) = (
        a.chunks_exact(LANES),
        b.chunks_exact(LANES),
        c.chunks_exact(LANES),
    );
    let tails = (ca.remainder(), cb.remainder(), cc.remainder());
    for ((xa, xb), xc) in ca.zip(cb).zip(cc) {
        for lane in 0..LANES {
            acc[lane] = acc[lane] + f(xa[lane], xb[lane], xc[lane]);
        }
    }
    for (lane, ((&x, &y), &z)) in tails.0.iter().zip(tails.1).zip(tails.2).enumerate() {
        acc[lane] = acc[lane] + f(x, y, z);
    }
    combine_lanes::<T, SumOp>(acc)
}

/// The operands of the forward pass: `x` holds whole rows of `n` values; `weight` and `bias`
/// have `n` values.
pub(crate) struct Rows<'a, T> {
    /// The input, row after row.
    pub(crate) x: &'a [T],
    /// The row length.
    pub(crate) n: usize,
    /// The scale, if any.
    pub(crate) weight: Option<&'a [T]>,
    /// The shift, if any.
    pub(crate) bias: Option<&'a [T]>,
}

/// The forward pass: `(y, mean, rstd)`, `mean` and `rstd` one value per row.
pub(crate) fn forward<T: FloatElement + Num>(
    r: &Rows<'_, T>,
    eps: f64,
) -> Result<(Vec<T>, Vec<T>, Vec<T>)> {
    let n = r.n;
    let rows = r.x.len() / n;
    let mut y = try_uninit::<T>(rows * n)?;
    let mut mean = try_uninit::<T>(rows)?;
    let mut rstd = try_uninit::<T>(rows)?;
    let (eps, count) = (
        <T as Element>::from_f64(eps),
        <T as Element>::from_f64(n as f64),
    );
    // Absent parameters as ones and zeros, so that every row runs one branch-free loop
    // (`x̂ · 1 + 0` is `x̂` exactly).
    let ones = r
        .weight
        .is_none()
        .then(|| try_filled(n, T::one()))
        .transpose()?;
    let zeros = r
        .bias
        .is_none()
        .then(|| try_filled(n, T::zero()))
        .transpose()?;
    let weight = r.weight.or(ones.as_deref()).expect("given or ones");
    let bias = r.bias.or(zeros.as_deref()).expect("given or zeros");
    let row =
        |x: &[T], y: &mut [MaybeUninit<T>], mean: &mut MaybeUninit<T>, rs: &mut MaybeUninit<T>| {
            let m = lane_sum3(x, x, x, |v, _, _| v) / count;
            let var = lane_sum3(x, x, x, |v, _, _| (v - m) * (v - m)) / count;
            let s = T::one() / (var + eps).sqrt();
            for (((out, &v), &w), &b) in y.iter_mut().zip(x).zip(weight).zip(bias) {
                out.write((v - m) * s * w + b);
            }
            mean.write(m);
            rs.write(s);
        };
    let chunk_rows = if worth_parallel(rows * n) {
        chunk_len(rows, 1)
    } else {
        rows.max(1)
    };
    r.x.par_chunks(chunk_rows * n)
        .zip(y.par_chunks_mut(chunk_rows * n))
        .zip(mean.par_chunks_mut(chunk_rows))
        .zip(rstd.par_chunks_mut(chunk_rows))
        .for_each(|(((x, y), mean), rstd)| {
            let rows = x.chunks_exact(n).zip(y.chunks_exact_mut(n));
            for ((x, y), (m, s)) in rows.zip(mean.iter_mut().zip(rstd.iter_mut())) {
                row(x, y, m, s);
            }
        });
    // SAFETY: the chunks cover every row (`x`, `y` have `rows · n` values, `mean` and `rstd`
    // `rows`, chunked alike), and `row` writes all `n` outputs of its row and both statistics.
    unsafe { Ok((assume_init(y), assume_init(mean), assume_init(rstd))) }
}

/// The operands of the backward pass (rows as in [`Rows`]).
pub(crate) struct BackwardRows<'a, T> {
    /// The upstream gradient, row after row.
    pub(crate) grad: &'a [T],
    /// The forward pass's input.
    pub(crate) x: &'a [T],
    /// The row length.
    pub(crate) n: usize,
    /// The scale, if any.
    pub(crate) weight: Option<&'a [T]>,
    /// The forward pass's means, one per row.
    pub(crate) mean: &'a [T],
    /// The forward pass's `rstd`, one per row.
    pub(crate) rstd: &'a [T],
}

/// The gradients: `(dx, dweight, dbias)`, the last two summed over the rows (`dweight` when
/// there is a weight, `dbias` when `with_bias`).
pub(crate) type Grads<T> = (Vec<T>, Option<Vec<T>>, Option<Vec<T>>);

/// The backward pass. Each chunk of rows writes its rows of `dx` and sums its own partial
/// `dweight` and `dbias`; the partials are then added in chunk order (the same order whatever
/// the thread count for a given chunk size).
pub(crate) fn backward<T: FloatElement + Num>(
    r: &BackwardRows<'_, T>,
    with_bias: bool,
) -> Result<Grads<T>> {
    let n = r.n;
    let rows = r.x.len() / n;
    let mut dx = try_uninit::<T>(rows * n)?;
    let count = <T as Element>::from_f64(n as f64);
    let with_weight = r.weight.is_some();
    let chunk_rows = if worth_parallel(rows * n) {
        chunk_len(rows, 1)
    } else {
        rows.max(1)
    };
    let ones = r
        .weight
        .is_none()
        .then(|| try_filled(n, T::one()))
        .transpose()?;
    let weight = r.weight.or(ones.as_deref()).expect("given or ones");
    let partials: Vec<[Vec<T>; 2]> = dx
        .par_chunks_mut(chunk_rows * n)
        .enumerate()
        .map(|(c, dx)| {
            let first = c * chunk_rows;
            let (mut dw, mut db) = (try_filled(n, T::zero())?, try_filled(n, T::zero())?);
            for (k, dx) in dx.chunks_exact_mut(n).enumerate() {
                let at = (first + k) * n;
                let (x, g) = (&r.x[at..at + n], &r.grad[at..at + n]);
                let (m, s) = (r.mean[first + k], r.rstd[first + k]);
                let mean_g = lane_sum3(g, weight, x, |g, w, _| g * w) / count;
                let mean_gx = lane_sum3(g, weight, x, |g, w, v| (g * w) * ((v - m) * s)) / count;
                let sums = dw.iter_mut().zip(db.iter_mut());
                let terms = dx.iter_mut().zip(x).zip(g).zip(weight).zip(sums);
                for ((((out, &v), &g), &w), (dw, db)) in terms {
                    let x_hat = (v - m) * s;
                    out.write(((g * w) - mean_g - x_hat * mean_gx) * s);
                    *dw = *dw + g * x_hat;
                    *db = *db + g;
                }
            }
            Ok([dw, db])
        })
        .collect::<Result<_>>()?;
    // The sums of output `k` (0: weight, 1: bias) over the chunks, in chunk order.
    let total = |k: usize| -> Result<Vec<T>> {
        let mut sum = try_filled(n, T::zero())?;
        for p in &partials {
            for (s, &v) in sum.iter_mut().zip(&p[k]) {
                *s = *s + v;
            }
        }
        Ok(sum)
    };
    let dweight = with_weight.then(|| total(0)).transpose()?;
    let dbias = with_bias.then(|| total(1)).transpose()?;
    // SAFETY: the chunks of `dx` cover every row (`rows · n` values) and each row's `n` values
    // are written by the loop over `dx.iter_mut()`.
    let dx = unsafe { assume_init(dx) };
    Ok((dx, dweight, dbias))
}

#[cfg(test)]
mod tests {
    //! Miri-sized checks of the `MaybeUninit` outputs: every element is written (on one row,
    //! on rows that do not fill a lane block, with and without the affine parameters), against
    //! the definition computed in f64.
    use super::*;

    fn reference(x: &[f64], n: usize, w: Option<&[f64]>, b: Option<&[f64]>) -> Vec<f64> {
        let mut out = Vec::new();
        for row in x.chunks(n) {
            let m = row.iter().sum::<f64>() / n as f64;
            let var = row.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n as f64;
            let s = 1.0 / (var + 1e-5).sqrt();
            for (i, v) in row.iter().enumerate() {
                out.push((v - m) * s * w.map_or(1.0, |w| w[i]) + b.map_or(0.0, |b| b[i]));
            }
        }
        out
    }

    #[test]
    fn miri_forward_writes_every_output() {
        for (rows, n) in [(1, 1), (3, 5), (2, 17)] {
            let x: Vec<f64> = (0..rows * n).map(|i| (i as f64 * 0.37).sin()).collect();
            let w: Vec<f64> = (0..n).map(|i| 1.0 + i as f64 * 0.1).collect();
            let b: Vec<f64> = (0..n).map(|i| i as f64 * -0.2).collect();
            for affine in [false, true] {
                let (wr, br) = (affine.then_some(&w[..]), affine.then_some(&b[..]));
                let rows_in = Rows {
                    x: &x,
                    n,
                    weight: wr,
                    bias: br,
                };
                let (y, mean, rstd) = forward(&rows_in, 1e-5).unwrap();
                assert_eq!((mean.len(), rstd.len()), (rows, rows));
                for (got, want) in y.iter().zip(reference(&x, n, wr, br)) {
                    assert!((got - want).abs() < 1e-9, "{got} vs {want}");
                }
            }
        }
    }

    #[test]
    fn miri_backward_writes_every_output_and_matches_finite_differences() {
        let (rows, n) = (3, 5);
        let x: Vec<f64> = (0..rows * n).map(|i| (i as f64 * 0.61).cos()).collect();
        let g: Vec<f64> = (0..rows * n).map(|i| (i as f64 * 0.23).sin()).collect();
        let w: Vec<f64> = (0..n).map(|i| 0.5 + i as f64 * 0.3).collect();
        let rows_in = Rows {
            x: &x,
            n,
            weight: Some(&w),
            bias: None,
        };
        let (_, mean, rstd) = forward(&rows_in, 1e-5).unwrap();
        let back = BackwardRows {
            grad: &g,
            x: &x,
            n,
            weight: Some(&w),
            mean: &mean,
            rstd: &rstd,
        };
        let (dx, dw, db) = backward(&back, true).unwrap();
        // d/dx_j of Σ g·y, by central differences of the f64 reference.
        let loss = |x: &[f64]| -> f64 {
            reference(x, n, Some(&w), None)
                .iter()
                .zip(&g)
                .map(|(y, g)| y * g)
                .sum()
        };
        for j in 0..rows * n {
            let (mut up, mut down) = (x.clone(), x.clone());
            up[j] += 1e-6;
            down[j] -= 1e-6;
            let numeric = (loss(&up) - loss(&down)) / 2e-6;
            assert!(
                (dx[j] - numeric).abs() < 1e-6,
                "dx[{j}]: {} vs {numeric}",
                dx[j]
            );
        }
        let db = db.unwrap();
        for i in 0..n {
            let col: f64 = (0..rows).map(|r| g[r * n + i]).sum();
            assert!((db[i] - col).abs() < 1e-12);
        }
        assert_eq!(dw.unwrap().len(), n);
    }
}
