//! Softmax cross-entropy and its gradient as chains of tensor ops: the definition in
//! [`crate::cross_entropy`], through the backend's `log_softmax`/`softmax`, `gather` and
//! `scatter_add`. A fused override gives the same values to rounding.

use crate::cross_entropy::{check_cross_entropy, check_cross_entropy_backward};
use crate::{Backend, Result, Tensor};

/// The per-row losses `[n]`: `-(1 - s) · log_p[i][t_i] - (s / c) · Σ_j log_p[i][j]`.
pub fn cross_entropy<B: Backend>(
    logits: &Tensor<B>,
    targets: &Tensor<B>,
    label_smoothing: f64,
) -> Result<Tensor<B>> {
    let (n, c) = check_cross_entropy(logits, targets, label_smoothing)?;
    let log_p = logits.log_softmax(1)?;
    let picked = log_p.gather(1, &targets.reshape([n, 1])?)?.reshape([n])?;
    let loss = picked.mul_scalar(-(1.0 - label_smoothing))?;
    if label_smoothing == 0.0 {
        return Ok(loss);
    }
    let uniform = log_p
        .sum(&[1], false)?
        .mul_scalar(label_smoothing / c as f64)?;
    loss.sub(&uniform)
}

/// The gradient `[n, c]` of the per-row losses with respect to the logits, given the upstream
/// gradient `grad: [n]`: `grad[i] · (softmax(logits[i]) - (1 - s) · onehot(t_i) - s / c)`.
pub fn cross_entropy_backward<B: Backend>(
    logits: &Tensor<B>,
    targets: &Tensor<B>,
    grad: &Tensor<B>,
    label_smoothing: f64,
) -> Result<Tensor<B>> {
    let (n, c) = check_cross_entropy_backward(logits, targets, grad, label_smoothing)?;
    let p = logits.softmax(1)?;
    let weight = Tensor::full([n, 1], 1.0 - label_smoothing, p.dtype(), p.backend())?;
    let one_hot = p
        .zeros_like()?
        .scatter_add(1, &targets.reshape([n, 1])?, &weight)?;
    let mut d = p.sub(&one_hot)?;
    if label_smoothing != 0.0 {
        d = d.add_scalar(-label_smoothing / c as f64)?;
    }
    d.mul(&grad.reshape([n, 1])?)
}
