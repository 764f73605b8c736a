//! Gradient clipping by global norm.

use crate::distributed::{Communicator, Reduction};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// Scales the gradients of `params` so that their global L2 norm is at most `max_norm`
/// (PyTorch's `clip_grad_norm_`): with `norm = √(Σ ‖g‖²)` over every gradient, each gradient
/// is multiplied by `max_norm / (norm + 1e-6)` when that factor is below 1. Parameters without
/// a gradient are ignored. Returns the norm before clipping (accumulated in f64).
///
/// As in PyTorch, a non-finite norm is returned as is and the gradients are scaled by the
/// resulting NaN factor; check the result to skip such steps.
pub fn clip_grad_norm<'a, B: Backend>(
    params: impl IntoIterator<Item = &'a Var<B>>,
    max_norm: f64,
) -> Result<f64> {
    if !(max_norm.is_finite() && max_norm >= 0.0) {
        return Err(Error::InvalidArgument {
            op: "clip_grad_norm",
            msg: format!("max_norm must be finite and non-negative, got {max_norm}"),
        });
    }
    let with_grads: Vec<(&Var<B>, _)> = params
        .into_iter()
        .filter_map(|var| var.grad().map(|grad| (var, grad)))
        .collect();
    if with_grads.is_empty() {
        return Ok(0.0);
    }
    let norm = global_norm(with_grads.iter().map(|(_, g)| g))?;
    let coefficient = max_norm / (norm + 1e-6);
    if coefficient < 1.0 || coefficient.is_nan() {
        for (var, grad) in with_grads {
            var.set_grad(Some(grad.mul_scalar(coefficient)?));
        }
    }
    Ok(norm)
}

/// The global L2 norm `√(Σ ‖g‖²)` of the gradients of `params` (those without one are
/// ignored; 0 when none has one), accumulated in f64: what [`clip_grad_norm`] returns, without
/// clipping (e.g. to log it). Reads one number back from the device.
pub fn grad_norm<'a, B: Backend>(params: impl IntoIterator<Item = &'a Var<B>>) -> Result<f64> {
    let grads: Vec<Tensor<B>> = params.into_iter().filter_map(Var::grad).collect();
    if grads.is_empty() {
        return Ok(0.0);
    }
    global_norm(grads.iter())
}

/// The global L2 norm of gradients split over the ranks of `comm` (each rank passes its own
/// parameters, e.g. a [`crate::distributed::ShardedOptimizer`]'s shares): `√(Σ ‖g‖²)` with the
/// sum taken over every rank's gradients. A collective.
pub fn grad_norm_across<'a, B: Backend>(
    params: impl IntoIterator<Item = &'a Var<B>>,
    comm: &dyn Communicator<B>,
) -> Result<f64> {
    let local = grad_norm(params)?;
    let mut squares = [local * local];
    if comm.world_size() > 1 {
        comm.all_reduce_host(&mut squares, Reduction::Sum)?;
    }
    Ok(squares[0].sqrt())
}

/// [`clip_grad_norm`] of gradients split over the ranks of `comm`: the norm is
/// [`grad_norm_across`], and every rank scales its own gradients by the same factor. A
/// collective; returns the norm before clipping.
pub fn clip_grad_norm_across<'a, B: Backend>(
    params: impl IntoIterator<Item = &'a Var<B>>,
    max_norm: f64,
    comm: &dyn Communicator<B>,
) -> Result<f64> {
    if !(max_norm.is_finite() && max_norm >= 0.0) {
        return Err(Error::InvalidArgument {
            op: "clip_grad_norm_across",
            msg: format!("max_norm must be finite and non-negative, got {max_norm}"),
        });
    }
    let with_grads: Vec<(&Var<B>, Tensor<B>)> = params
        .into_iter()
        .filter_map(|var| var.grad().map(|grad| (var, grad)))
        .collect();
    let norm = grad_norm_across(with_grads.iter().map(|(v, _)| *v), comm)?;
    let coefficient = max_norm / (norm + 1e-6);
    if coefficient < 1.0 || coefficient.is_nan() {
        for (var, grad) in with_grads {
            var.set_grad(Some(grad.mul_scalar(coefficient)?));
        }
    }
    Ok(norm)
}

/// Elements of a gradient widened to f64 at once by [`global_norm`]: 2 MiB of f64, which stays
/// in a core's cache between the widening, the squares and their sum, where widening a whole
/// gradient (a vocabulary-sized embedding's is tens of megabytes) wrote two temporaries of
/// twice its size to memory.
const NORM_CHUNK: usize = 1 << 18;

/// `√(Σ ‖g‖²)` over `grads` (at least one): the squares summed on the device in f64, each
/// gradient in chunks of [`NORM_CHUNK`] elements.
fn global_norm<'a, B: Backend>(grads: impl Iterator<Item = &'a Tensor<B>>) -> Result<f64> {
    let mut total: Option<Tensor<B>> = None;
    for grad in grads {
        let flat = grad.reshape([grad.numel()])?;
        let mut start = 0;
        while start < flat.numel() {
            let len = NORM_CHUNK.min(flat.numel() - start);
            let chunk = flat.narrow(0, start, len)?;
            let squares = chunk.to_dtype(DType::F64)?.square()?.sum_all()?;
            total = Some(match total {
                None => squares,
                Some(acc) => squares.add(&acc)?,
            });
            start += len;
        }
    }
    Ok(total.map_or(Ok(0.0), |t| t.to_scalar_f64())?.sqrt())
}
