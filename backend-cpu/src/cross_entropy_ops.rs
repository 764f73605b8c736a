//! The CPU overrides of [`tessera_core::Backend::cross_entropy`] and its gradient: f32 and f64
//! logits go to the row kernels of [`crate::kernels::cross_entropy`] (strided operands are
//! made contiguous first: a copy costs less than the composite's passes); other dtypes return
//! `None` and the backend falls back to the composite default (16-bit logits never get here:
//! tensor-core's dispatch widens them).

use tessera_core::cross_entropy::{check_cross_entropy, check_cross_entropy_backward};
use tessera_core::{Result, Tensor};

use crate::fused_ops::{contiguous, tensor};
use crate::kernels::cross_entropy::{self, CrossEntropyFloat};
use crate::storage::CpuElement;
use crate::{Cpu, CpuStorage};

/// [`tessera_core::Backend::cross_entropy`] on the CPU.
pub(crate) fn cross_entropy(
    logits: &Tensor<Cpu>,
    targets: &Tensor<Cpu>,
    label_smoothing: f64,
) -> Result<Option<Tensor<Cpu>>> {
    fn typed<T: CpuElement + CrossEntropyFloat>(
        logits: &Tensor<Cpu>,
        targets: &Tensor<Cpu>,
        (n, c): (usize, usize),
        label_smoothing: f64,
    ) -> Result<Option<Tensor<Cpu>>> {
        const OP: &str = "cross_entropy";
        let (logits, targets) = (logits.contiguous()?, targets.contiguous()?);
        let (Some(x), Some(t)) = (
            contiguous::<T>(OP, &logits, &[n, c])?,
            contiguous::<i64>(OP, &targets, &[n])?,
        ) else {
            return Ok(None);
        };
        let losses = cross_entropy::forward(x, t, c, label_smoothing)?;
        tensor(logits.backend(), losses, &[n]).map(Some)
    }
    let shape = check_cross_entropy(logits, targets, label_smoothing)?;
    match logits.storage() {
        CpuStorage::F32(_) => typed::<f32>(logits, targets, shape, label_smoothing),
        CpuStorage::F64(_) => typed::<f64>(logits, targets, shape, label_smoothing),
        _ => Ok(None),
    }
}

/// [`tessera_core::Backend::cross_entropy_backward`] on the CPU.
pub(crate) fn cross_entropy_backward(
    logits: &Tensor<Cpu>,
    targets: &Tensor<Cpu>,
    grad: &Tensor<Cpu>,
    label_smoothing: f64,
) -> Result<Option<Tensor<Cpu>>> {
    fn typed<T: CpuElement + CrossEntropyFloat>(
        logits: &Tensor<Cpu>,
        targets: &Tensor<Cpu>,
        grad: &Tensor<Cpu>,
        (n, c): (usize, usize),
        label_smoothing: f64,
    ) -> Result<Option<Tensor<Cpu>>> {
        const OP: &str = "cross_entropy_backward";
        let (logits, targets) = (logits.contiguous()?, targets.contiguous()?);
        let grad = grad.contiguous()?;
        let (Some(x), Some(t), Some(g)) = (
            contiguous::<T>(OP, &logits, &[n, c])?,
            contiguous::<i64>(OP, &targets, &[n])?,
            contiguous::<T>(OP, &grad, &[n])?,
        ) else {
            return Ok(None);
        };
        let dx = cross_entropy::backward(x, t, g, c, label_smoothing)?;
        tensor(logits.backend(), dx, &[n, c]).map(Some)
    }
    let shape = check_cross_entropy_backward(logits, targets, grad, label_smoothing)?;
    match logits.storage() {
        CpuStorage::F32(_) => typed::<f32>(logits, targets, grad, shape, label_smoothing),
        CpuStorage::F64(_) => typed::<f64>(logits, targets, grad, shape, label_smoothing),
        _ => Ok(None),
    }
}
