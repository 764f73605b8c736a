//! One supervised optimisation step with cross-entropy.

use crate::distributed::Communicator;
use crate::loss::cross_entropy;
use crate::module::Forward;
use crate::optim::Optimizer;
use crate::precision::{DynamicLossScaler, ScalerStep};
use tessera_autograd::Var;
use tessera_core::{Backend, Result, Tensor};

/// Runs forward, cross-entropy against `labels` (`i64` class indices), backward and one
/// optimizer step. Returns the loss as a rank-0 tensor **without reading it back**, so a GPU
/// backend is not synchronised every step; read it (e.g. `to_scalar_f64`) only when needed.
pub fn train_step<B, M, O>(
    model: &M,
    optimizer: &mut O,
    features: Tensor<B>,
    labels: &Tensor<B>,
) -> Result<Tensor<B>>
where
    B: Backend,
    M: Forward<B> + ?Sized,
    O: Optimizer<B> + ?Sized,
{
    let logits = model.forward(&Var::constant(features))?;
    let loss = cross_entropy(&logits, labels)?;
    optimizer.zero_grad();
    loss.backward()?;
    optimizer.step()?;
    Ok(loss.value())
}

/// [`train_step`] with dynamic loss scaling (f16 training): the scaled loss is
/// differentiated, the gradients of `params` are unscaled, and the optimizer step is skipped
/// when one of them overflowed. Returns the (unscaled) loss and what the scaler decided.
pub fn train_step_scaled<B, M, O>(
    model: &M,
    optimizer: &mut O,
    features: Tensor<B>,
    labels: &Tensor<B>,
    scaler: &mut DynamicLossScaler,
    params: &[Var<B>],
) -> Result<(Tensor<B>, ScalerStep)>
where
    B: Backend,
    M: Forward<B> + ?Sized,
    O: Optimizer<B> + ?Sized,
{
    scaled_step(model, optimizer, features, labels, scaler, |scaler| {
        scaler.unscale_and_update(params)
    })
}

/// [`train_step_scaled`] on one rank of a data-parallel run: the ranks of `comm` agree on
/// whether a gradient overflowed anywhere ([`DynamicLossScaler::unscale_and_update_across`]),
/// so that they all skip or all take the step and keep the same scale. The step's gradient
/// all-reduce (a [`crate::distributed::DistributedOptimizer`]'s) then only runs on steps every
/// rank takes.
pub fn train_step_scaled_across<B, M, O>(
    model: &M,
    optimizer: &mut O,
    features: Tensor<B>,
    labels: &Tensor<B>,
    scaler: &mut DynamicLossScaler,
    params: &[Var<B>],
    comm: &dyn Communicator<B>,
) -> Result<(Tensor<B>, ScalerStep)>
where
    B: Backend,
    M: Forward<B> + ?Sized,
    O: Optimizer<B> + ?Sized,
{
    scaled_step(model, optimizer, features, labels, scaler, |scaler| {
        scaler.unscale_and_update_across(params, comm)
    })
}

fn scaled_step<B, M, O>(
    model: &M,
    optimizer: &mut O,
    features: Tensor<B>,
    labels: &Tensor<B>,
    scaler: &mut DynamicLossScaler,
    decide: impl FnOnce(&mut DynamicLossScaler) -> Result<ScalerStep>,
) -> Result<(Tensor<B>, ScalerStep)>
where
    B: Backend,
    M: Forward<B> + ?Sized,
    O: Optimizer<B> + ?Sized,
{
    let logits = model.forward(&Var::constant(features))?;
    let loss = cross_entropy(&logits, labels)?;
    optimizer.zero_grad();
    scaler.scale_loss(&loss)?.backward()?;
    let decision = decide(scaler)?;
    if decision == ScalerStep::Apply {
        optimizer.step()?;
    }
    Ok((loss.value(), decision))
}
