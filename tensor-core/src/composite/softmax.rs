//! Softmax, log-softmax and log-sum-exp, all shifted by the maximum for numerical stability.

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

/// `exp(x) / sum(exp(x))` along `axis`.
pub fn softmax<B: Backend>(x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
    let e = x.sub(&finite_shift(x, axis)?)?.exp()?;
    e.div(&e.sum(&[axis as isize], true)?)
}

/// `x - logsumexp(x)` along `axis`.
pub fn log_softmax<B: Backend>(x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
    x.sub(&logsumexp(x, axis)?)
}
