//! Accuracy and mean loss of a classifier over a data set, without recording a graph.

use crate::data::{DataLoader, Dataset};
use crate::loss::cross_entropy;
use crate::module::Module;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType, Tensor};

/// The result of [`evaluate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Evaluation {
    /// Fraction of samples whose arg-max logit equals the label.
    pub accuracy: f64,
    /// Mean cross-entropy over the samples.
    pub mean_loss: f64,
    /// Number of samples seen.
    pub samples: usize,
}

/// Evaluates `model` (switched to eval mode, then back to its previous mode) on every batch of
/// `loader`'s epoch 0. Counts are accumulated on the device and read back once at the end.
pub fn evaluate<B, M, D>(
    model: &M,
    loader: &DataLoader<D>,
    backend: &B,
) -> crate::Result<Evaluation>
where
    B: Backend,
    M: Module<B> + ?Sized,
    D: Dataset + 'static,
{
    let was_training = model.is_training();
    model.eval();
    let result = no_grad(|| -> crate::Result<Evaluation> {
        let mut correct = Tensor::zeros((), DType::I64, backend)?;
        let mut loss_sum = Tensor::zeros((), DType::F64, backend)?;
        let mut samples = 0;
        for batch in loader.epoch(0)? {
            let batch = batch?;
            let n = batch.len();
            let (x, y) = batch.into_tensors(backend)?;
            let logits = model.forward(&Var::constant(x))?;
            let loss = cross_entropy(&logits, &y)?.value().to_dtype(DType::F64)?;
            loss_sum = loss_sum.add(&loss.mul_scalar(n as f64)?)?;
            let hits = logits.value().argmax(-1, false)?.eq(&y)?.sum_all()?;
            correct = correct.add(&hits)?;
            samples += n;
        }
        let denom = samples.max(1) as f64;
        Ok(Evaluation {
            accuracy: correct.to_scalar_f64()? / denom,
            mean_loss: loss_sum.to_scalar_f64()? / denom,
            samples,
        })
    });
    model.set_training(was_training);
    result
}
