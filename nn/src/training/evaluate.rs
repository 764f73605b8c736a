//! Accuracy and mean loss of a classifier over a data set, without recording a graph.

use crate::data::{DataLoader, Dataset};
use crate::distributed::{Communicator, Reduction};
use crate::loss::cross_entropy;
use crate::module::Forward;
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
    M: Forward<B> + ?Sized,
    D: Dataset + 'static,
{
    evaluate_passes(model, loader, backend, 0)
}

/// [`evaluate`] on every rank of `comm` at once, for a model whose forward pass is a
/// collective (level 3's sharded units gather their parameters as they run): the ranks' data
/// may differ in length, so every rank runs as many forward passes as the rank with the most
/// batches, a rank past its own batches repeating its last one (one item of zeros if it has
/// none) and ignoring what it computes. The figures are this rank's own.
pub fn evaluate_in_lockstep<B, M, D>(
    model: &M,
    loader: &DataLoader<D>,
    backend: &B,
    comm: &dyn Communicator<B>,
) -> crate::Result<Evaluation>
where
    B: Backend,
    M: Forward<B> + ?Sized,
    D: Dataset + 'static,
{
    let own = loader.batches_per_epoch();
    let mut most = [own as f64];
    comm.all_reduce_host(&mut most, Reduction::Max)?;
    evaluate_passes(model, loader, backend, most[0] as usize - own)
}

/// [`evaluate`], then `extra` forward passes whose results are ignored (see
/// [`evaluate_in_lockstep`]).
fn evaluate_passes<B, M, D>(
    model: &M,
    loader: &DataLoader<D>,
    backend: &B,
    extra: usize,
) -> crate::Result<Evaluation>
where
    B: Backend,
    M: Forward<B> + ?Sized,
    D: Dataset + 'static,
{
    let was_training = model.is_training();
    model.eval();
    let result = no_grad(|| -> crate::Result<Evaluation> {
        let mut correct = Tensor::zeros((), DType::I64, backend)?;
        let mut loss_sum = Tensor::zeros((), DType::F64, backend)?;
        let mut samples = 0;
        let mut last = None;
        for batch in loader.epoch(0)? {
            let batch = batch?;
            let n = batch.len();
            let (x, y) = batch.into_tensors(backend)?;
            let logits = model.forward(&Var::constant(x.clone()))?;
            let loss = cross_entropy(&logits, &y)?.value().to_dtype(DType::F64)?;
            loss_sum = loss_sum.add(&loss.mul_scalar(n as f64)?)?;
            let hits = logits.value().argmax(-1, false)?.eq(&y)?.sum_all()?;
            correct = correct.add(&hits)?;
            samples += n;
            last = Some(x);
        }
        if extra > 0 {
            let filler = match last {
                Some(x) => x,
                None => {
                    let mut dims = vec![1];
                    dims.extend_from_slice(loader.dataset().item_dims());
                    Tensor::zeros(dims, DType::F32, backend)?
                }
            };
            for _ in 0..extra {
                model.forward(&Var::constant(filler.clone()))?;
            }
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
