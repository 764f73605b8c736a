//! The CPU overrides of the fused element-wise composites (ReLU and GELU gradients, Adam step): same-shape
//! contiguous f32/f64 operands go to the one-pass kernels; anything else returns `None` and the
//! backend falls back to the composite default.

use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::{bf16, Layout, Result, Tensor};

use crate::checks::check_storage;
use crate::kernels::adam::{self, AdamFloat, AdamInputs};
use crate::kernels::{gelu_grad, relu_grad};
use crate::storage::CpuElement;
use crate::{Cpu, CpuStorage};

/// The elements of `t` when it holds `T` in a contiguous layout of `dims`, else `None`.
pub(crate) fn contiguous<'t, T: CpuElement>(
    op: &'static str,
    t: &'t Tensor<Cpu>,
    dims: &[usize],
) -> Result<Option<&'t [T]>> {
    check_storage(op, t.storage(), t.layout())?;
    if t.dims() != dims {
        return Ok(None);
    }
    Ok(
        match (T::slice(t.storage()), t.layout().contiguous_range()) {
            // An empty tensor's offset may lie past its (possibly empty) storage.
            (Some(_), _) if t.layout().numel() == 0 => Some(&[]),
            (Some(data), Some(range)) => Some(&data[range]),
            _ => None,
        },
    )
}

/// A tensor of `dims` over fresh contiguous values.
pub(crate) fn tensor<T: CpuElement>(
    dev: &Cpu,
    values: Vec<T>,
    dims: &[usize],
) -> Result<Tensor<Cpu>> {
    Tensor::from_parts(dev, T::into_storage(values), Layout::contiguous(dims))
}

/// [`tessera_core::Backend::relu_backward`] on the CPU.
pub(crate) fn relu_backward(x: &Tensor<Cpu>, grad: &Tensor<Cpu>) -> Result<Option<Tensor<Cpu>>> {
    /// `kernel` over same-shape contiguous `S` operands; `None` for any others.
    fn typed<S: CpuElement>(
        x: &Tensor<Cpu>,
        grad: &Tensor<Cpu>,
        kernel: fn(&[S], &[S]) -> Result<Vec<S>>,
    ) -> Result<Option<Tensor<Cpu>>> {
        let dims = x.dims();
        let (Some(xv), Some(gv)) = (
            contiguous::<S>("relu_backward", x, dims)?,
            contiguous::<S>("relu_backward", grad, dims)?,
        ) else {
            return Ok(None);
        };
        tensor(x.backend(), kernel(xv, gv)?, dims).map(Some)
    }
    match x.storage() {
        CpuStorage::F32(_) => typed(x, grad, relu_grad::relu_backward::<f32, f32>),
        CpuStorage::F64(_) => typed(x, grad, relu_grad::relu_backward::<f64, f64>),
        // Declared in `computes_16_bit`, so never left to the composite: strided or broadcast
        // operands are made contiguous first.
        CpuStorage::BF16(_) if x.dims() == grad.dims() => {
            let (x, grad) = (x.contiguous()?, grad.contiguous()?);
            typed(&x, &grad, relu_grad::relu_backward_bf16)
        }
        _ => Ok(None),
    }
}

/// [`tessera_core::Backend::gelu_backward`] on the CPU.
pub(crate) fn gelu_backward(x: &Tensor<Cpu>, grad: &Tensor<Cpu>) -> Result<Option<Tensor<Cpu>>> {
    fn typed<T: CpuElement + tessera_core::FloatElement>(
        x: &Tensor<Cpu>,
        grad: &Tensor<Cpu>,
        kernel: fn(&[T], &[T]) -> Result<Vec<T>>,
    ) -> Result<Option<Tensor<Cpu>>> {
        let dims = x.dims();
        let (Some(xv), Some(gv)) = (
            contiguous::<T>("gelu_backward", x, dims)?,
            contiguous::<T>("gelu_backward", grad, dims)?,
        ) else {
            return Ok(None);
        };
        tensor(x.backend(), kernel(xv, gv)?, dims).map(Some)
    }
    match x.storage() {
        CpuStorage::F32(_) => typed::<f32>(x, grad, gelu_grad::gelu_backward_f32),
        CpuStorage::F64(_) => typed::<f64>(x, grad, gelu_grad::gelu_backward_exact),
        // Declared in `computes_16_bit`, so never left to the composite (which would round
        // after each of its steps): strided or broadcast operands are made contiguous first.
        CpuStorage::BF16(_) if x.dims() == grad.dims() => {
            let (x, grad) = (x.contiguous()?, grad.contiguous()?);
            typed::<bf16>(&x, &grad, gelu_grad::gelu_backward_bf16)
        }
        _ => Ok(None),
    }
}

/// [`tessera_core::Backend::adam_update`] on the CPU.
pub(crate) fn adam_update(
    param: &Tensor<Cpu>,
    grad: &Tensor<Cpu>,
    exp_avg: &Tensor<Cpu>,
    exp_avg_sq: &Tensor<Cpu>,
    max_exp_avg_sq: Option<&Tensor<Cpu>>,
    update: AdamUpdate,
) -> Result<Option<AdamTensors<Cpu>>> {
    fn typed<T: CpuElement + AdamFloat>(
        param: &Tensor<Cpu>,
        grad: &Tensor<Cpu>,
        exp_avg: &Tensor<Cpu>,
        exp_avg_sq: &Tensor<Cpu>,
        max_exp_avg_sq: Option<&Tensor<Cpu>>,
        update: AdamUpdate,
    ) -> Result<Option<AdamTensors<Cpu>>> {
        const OP: &str = "adam_update";
        let dims = param.dims();
        let max = match max_exp_avg_sq {
            Some(t) => match contiguous::<T>(OP, t, dims)? {
                Some(v) => Some(v),
                None => return Ok(None),
            },
            None => None,
        };
        let (Some(p), Some(g), Some(m), Some(v)) = (
            contiguous::<T>(OP, param, dims)?,
            contiguous::<T>(OP, grad, dims)?,
            contiguous::<T>(OP, exp_avg, dims)?,
            contiguous::<T>(OP, exp_avg_sq, dims)?,
        ) else {
            return Ok(None);
        };
        let inputs = AdamInputs {
            param: p,
            grad: g,
            exp_avg: m,
            exp_avg_sq: v,
            max_exp_avg_sq: max,
        };
        let (p, m, v, max) = adam::adam_update(&inputs, &update)?;
        let dev = param.backend();
        Ok(Some(AdamTensors {
            param: tensor(dev, p, dims)?,
            exp_avg: tensor(dev, m, dims)?,
            exp_avg_sq: tensor(dev, v, dims)?,
            max_exp_avg_sq: max.map(|mx| tensor(dev, mx, dims)).transpose()?,
        }))
    }
    match param.storage() {
        CpuStorage::F32(_) => {
            typed::<f32>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
        }
        CpuStorage::F64(_) => {
            typed::<f64>(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
        }
        _ => Ok(None),
    }
}
