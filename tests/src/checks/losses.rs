//! Exp-based losses at magnitudes where naive formulas overflow: cross-entropy of logits up to
//! `1e4` (and shifted by up to `1e4`), value and gradient through autograd on the backend, both
//! composed from log-softmax and gather and as the fused op `nn`'s `cross_entropy` calls
//! (`Var::cross_entropy`, the backend's `cross_entropy` and its gradient, then a mean), and
//! the binary cross-entropy on logits in its stable form, against f64 references.
//!
//! Each piece (log-softmax, gather, exp, log, ...) is checked on its own elsewhere; here they
//! run composed, with the backward pass of log-softmax included.

use crate::compare::{compare_values, Tolerance};
use crate::reference::RefArray;
use crate::runner::check_property;
use crate::strategies::{regime_values, ValueRegime};
use proptest::prelude::*;
use tessera_autograd::{enable_grad, Var};
use tessera_core::{Backend, DType, Tensor};

/// A loss checked at large logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossOp {
    /// `mean_i(-log_softmax(x)[i, t_i])` and its gradient `(softmax(x) - onehot(t)) / n`.
    CrossEntropy,
    /// The same through `Var::cross_entropy(targets, 0.0).mean_all()`.
    FusedCrossEntropy,
    /// `mean(max(x, 0) - x y + log(1 + e^-|x|))` (value only: its exact gradient is `nn`'s).
    BceWithLogits,
}

impl LossOp {
    /// Every loss.
    pub const ALL: [LossOp; 3] = [
        LossOp::CrossEntropy,
        LossOp::FusedCrossEntropy,
        LossOp::BceWithLogits,
    ];

    /// Name in the coverage matrix.
    pub fn name(self) -> &'static str {
        match self {
            LossOp::CrossEntropy => "cross_entropy at |x| <= 1e4",
            LossOp::FusedCrossEntropy => "fused cross_entropy at |x| <= 1e4",
            LossOp::BceWithLogits => "bce_with_logits at |x| <= 1e4",
        }
    }
}

/// One loss evaluation: logits `[n, k]`, class targets (cross-entropy) or targets in `[0, 1]`.
#[derive(Clone, Debug)]
pub struct LossCase {
    /// The loss.
    pub op: LossOp,
    /// Logits, row-major `[n, k]`, already rounded to the dtype.
    pub logits: Vec<f64>,
    /// `[n, k]`.
    pub dims: [usize; 2],
    /// Class indices (`n`) or targets (`n * k`).
    pub targets: Vec<f64>,
    /// The dtype.
    pub dtype: DType,
}

/// Cases of `op` on `dtype`: logits uniform in `±1e4` or shifted by up to `1e4`, sometimes
/// ordinary.
pub fn cases(op: LossOp, dtype: DType) -> BoxedStrategy<LossCase> {
    let regime = prop_oneof![
        2 => Just(ValueRegime::Huge),
        2 => Just(ValueRegime::Shifted),
        1 => Just(ValueRegime::Ordinary),
    ];
    (1usize..=4, 2usize..=5, regime)
        .prop_flat_map(move |(n, k, regime)| {
            let targets = match op {
                LossOp::CrossEntropy | LossOp::FusedCrossEntropy => {
                    prop::collection::vec((0..k).prop_map(|t| t as f64), n).boxed()
                }
                LossOp::BceWithLogits => {
                    prop::collection::vec(prop::sample::select(vec![0.0, 0.25, 1.0]), n * k).boxed()
                }
            };
            (Just([n, k]), regime_values(dtype, regime, n * k), targets)
        })
        .prop_map(move |(dims, logits, targets)| LossCase {
            op,
            logits,
            dims,
            targets,
            dtype,
        })
        .boxed()
}

/// Values of a tensor and their error scales.
type Scaled = (Vec<f64>, Vec<f64>);

/// The f64 reference: the loss, its error scale, and for cross-entropy the gradient of the
/// logits with its error scale.
fn reference(case: &LossCase) -> (f64, f64, Option<Scaled>) {
    let [n, k] = case.dims;
    let row = |i: usize| &case.logits[i * k..(i + 1) * k];
    match case.op {
        LossOp::CrossEntropy | LossOp::FusedCrossEntropy => {
            let (mut loss, mut scale) = (0.0, 0.0);
            let mut grad = Vec::with_capacity(n * k);
            for i in 0..n {
                let r = row(i);
                let m = r.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let log_sum = r.iter().map(|v| (v - m).exp()).sum::<f64>().ln();
                let t = case.targets[i] as usize;
                // -log_softmax(x)[t] = log_sum - (x_t - m).
                loss += log_sum - (r[t] - m);
                scale += log_sum + (r[t] - m).abs() + 1.0;
                for (j, &v) in r.iter().enumerate() {
                    let p = (v - m - log_sum).exp();
                    grad.push((p - f64::from(j == t)) / n as f64);
                }
            }
            let grad_scale = vec![2.0 / n as f64; n * k];
            (loss / n as f64, scale / n as f64, Some((grad, grad_scale)))
        }
        LossOp::BceWithLogits => {
            let (mut loss, mut scale) = (0.0, 0.0);
            for (&x, &y) in case.logits.iter().zip(&case.targets) {
                let tail = (-x.abs()).exp().ln_1p();
                loss += x.max(0.0) - x * y + tail;
                scale += x.abs() * (1.0 + y.abs()) + 1.0;
            }
            let count = (n * k) as f64;
            (loss / count, scale / count, None)
        }
    }
}

/// Computes the loss (and for cross-entropy the gradient) on `dev` and compares them with the
/// reference, relative to the sizes of the terms (the loss of a huge logit is a difference of
/// huge numbers).
pub fn check<B: Backend>(dev: &B, case: &LossCase) -> Result<(), String> {
    let dtype = case.dtype;
    let failed = |e: tessera_core::Error| format!("{e}");
    let [n, k] = case.dims;
    let logits = Tensor::from_f64_values(&case.logits, [n, k], dtype, dev).map_err(failed)?;
    let x = Var::param(logits);
    let loss = match case.op {
        LossOp::CrossEntropy => {
            let t: Vec<i64> = case.targets.iter().map(|&t| t as i64).collect();
            let targets = Tensor::from_vec(t, [n, 1], dev).map_err(failed)?;
            enable_grad(|| x.log_softmax(1)?.gather(1, &targets)?.neg()?.mean_all())
        }
        LossOp::FusedCrossEntropy => {
            let t: Vec<i64> = case.targets.iter().map(|&t| t as i64).collect();
            let targets = Tensor::from_vec(t, [n], dev).map_err(failed)?;
            enable_grad(|| x.cross_entropy(&targets, 0.0)?.mean_all())
        }
        LossOp::BceWithLogits => {
            let y = Var::constant(
                Tensor::from_f64_values(&case.targets, [n, k], dtype, dev).map_err(failed)?,
            );
            (|| {
                let tail = x.abs()?.neg()?.exp()?.add_scalar(1.0)?.log()?;
                x.relu()?.sub(&x.mul(&y)?)?.add(&tail)?.mean_all()
            })()
        }
    }
    .map_err(failed)?;
    let (want, scale, grad) = reference(case);
    let tol = Tolerance::accumulation(dtype, 2 * n * k + 8);
    let round = |v: f64| crate::reference::elementwise::round_to(dtype, v);
    let got = loss.value().to_vec_f64().map_err(failed)?;
    compare_values(
        &got,
        &[],
        &RefArray::scalar(round(want)),
        Some(&RefArray::scalar(scale)),
        tol,
    )
    .map_err(|e| format!("{} value: {e}", case.op.name()))?;
    if let Some((g, g_scale)) = grad {
        loss.backward().map_err(failed)?;
        let got = x
            .grad()
            .ok_or("no gradient reached the logits")?
            .to_vec_f64()
            .map_err(failed)?;
        let want = RefArray::new(vec![n, k], g.into_iter().map(round).collect());
        let g_scale = RefArray::new(vec![n, k], g_scale);
        compare_values(&got, &[n, k], &want, Some(&g_scale), tol)
            .map_err(|e| format!("{} gradient: {e}", case.op.name()))?;
    }
    Ok(())
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: LossOp, dtype: DType) {
    check_property(
        &format!("loss {} {dtype}", op.name()),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
