//! Softmax, log-softmax and log-sum-exp, all shifted by the maximum for numerical stability.
//!
//! Special values follow PyTorch: softmax and log-softmax of a row that contains `+inf` or
//! NaN, or holds only `-inf`, are NaN for the whole row (the shift is the plain maximum, so
//! `inf - inf` appears); log-sum-exp shifts by the maximum replaced by 0 when it is infinite,
//! so it is `+inf` with a `+inf` in the row and `-inf` for a row of `-inf`.

use crate::{Backend, Result, Tensor};

/// `max(x, axis)` with infinite maxima replaced by 0, so that shifting never makes `inf - inf`.
fn finite_shift<B: Backend>(x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
    let m = x.max(&[axis as isize], true)?;
    let infinite = m.abs()?.eq_scalar(f64::INFINITY)?;
    infinite.where_select(&m.zeros_like()?, &m)
}

/// `log(sum(exp(x)))` along `axis`, kept as size 1.
pub fn logsumexp<B: Backend>(x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
    let shift = finite_shift(x, axis)?;
    x.sub(&shift)?
        .exp()?
        .sum(&[axis as isize], true)?
        .log()?
        .add(&shift)
}

/// `exp(x - max) / sum(exp(x - max))` along `axis`.
pub fn softmax<B: Backend>(x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
    let e = x.sub(&x.max(&[axis as isize], true)?)?.exp()?;
    e.div(&e.sum(&[axis as isize], true)?)
}

/// `(x - max) - log(sum(exp(x - max)))` along `axis`. Subtracting the maximum first keeps the
/// result exact to the last bits near the maximum even when `|x|` is large (`x - logsumexp(x)`
/// would round the large `max + log(sum)` first).
pub fn log_softmax<B: Backend>(x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
    let shifted = x.sub(&x.max(&[axis as isize], true)?)?;
    let log_sum = shifted.exp()?.sum(&[axis as isize], true)?.log()?;
    shifted.sub(&log_sum)
}
