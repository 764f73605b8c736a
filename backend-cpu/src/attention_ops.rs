//! The CPU overrides of scaled dot-product attention and its gradient: f32/f64 operands go to
//! the fused kernels of `kernels::attention`, read in place through their strides; anything
//! else returns `None` and the backend falls back to the composite default.

use tessera_core::attention::{AttentionGrads, AttentionOutput, AttentionParams};
use tessera_core::{Layout, Result, Tensor};

use crate::checks::check_storage;
use crate::kernels::attention::{AttentionFloat, MaskData, Operand, Problem, Saved};
use crate::storage::CpuElement;
use crate::Cpu;

const OP: &str = "scaled_dot_product_attention";

/// The elements of `t` (checked to fit its layout) when it holds `T`.
fn data<T: CpuElement>(t: &Tensor<Cpu>) -> Result<Option<&[T]>> {
    check_storage(OP, t.storage(), t.layout())?;
    Ok(T::slice(t.storage()))
}

/// A mask's data and layout as the kernel reads them.
type KernelMask<'m, T> = Option<(MaskData<'m, T>, &'m Layout)>;

/// The mask as the kernel reads it, `Ok(None)` when its dtype is neither bool nor `T`.
fn mask_data<'m, T: CpuElement>(
    mask: Option<&'m Tensor<Cpu>>,
) -> Result<Option<KernelMask<'m, T>>> {
    let Some(m) = mask else {
        return Ok(Some(None));
    };
    check_storage(OP, m.storage(), m.layout())?;
    if let Some(bits) = m.storage().as_bool_slice() {
        return Ok(Some(Some((MaskData::Bool(bits), m.layout()))));
    }
    Ok(T::slice(m.storage()).map(|add| Some((MaskData::Additive(add), m.layout()))))
}

/// A contiguous tensor of `dims` over `values`.
fn tensor<T: CpuElement>(dev: &Cpu, values: Vec<T>, dims: Vec<usize>) -> Result<Tensor<Cpu>> {
    Tensor::from_parts(dev, T::into_storage(values), Layout::contiguous(dims))
}

/// `dims` with the last one replaced by `last`.
fn with_last(dims: &[usize], last: usize) -> Vec<usize> {
    let mut d = dims.to_vec();
    *d.last_mut().expect("rank >= 2") = last;
    d
}

/// [`tessera_core::Backend::scaled_dot_product_attention`] on the CPU.
pub(crate) fn attention(
    q: &Tensor<Cpu>,
    k: &Tensor<Cpu>,
    v: &Tensor<Cpu>,
    mask: Option<&Tensor<Cpu>>,
    params: &AttentionParams,
) -> Result<Option<AttentionOutput<Cpu>>> {
    fn typed<T: AttentionFloat + CpuElement>(
        q: &Tensor<Cpu>,
        k: &Tensor<Cpu>,
        v: &Tensor<Cpu>,
        mask: Option<&Tensor<Cpu>>,
        params: &AttentionParams,
    ) -> Result<Option<AttentionOutput<Cpu>>> {
        let (Some(qd), Some(kd), Some(vd), Some(m)) = (
            data::<T>(q)?,
            data::<T>(k)?,
            data::<T>(v)?,
            mask_data::<T>(mask)?,
        ) else {
            return Ok(None);
        };
        let problem = Problem::new(
            (qd, kd, vd),
            [q.layout(), k.layout(), v.layout()],
            m,
            None,
            params,
        );
        let (out, lse) = problem.forward()?;
        let ev = *v.dims().last().expect("rank >= 2");
        let dev = q.backend();
        Ok(Some(AttentionOutput {
            out: tensor(dev, out, with_last(q.dims(), ev))?,
            logsumexp: tensor(dev, lse, q.dims()[..q.rank() - 1].to_vec())?,
        }))
    }
    match q.dtype() {
        tessera_core::DType::F32 => typed::<f32>(q, k, v, mask, params),
        tessera_core::DType::F64 => typed::<f64>(q, k, v, mask, params),
        _ => Ok(None),
    }
}

/// [`tessera_core::Backend::scaled_dot_product_attention_backward`] on the CPU.
pub(crate) fn attention_backward(
    grad_out: &Tensor<Cpu>,
    (q, k, v): (&Tensor<Cpu>, &Tensor<Cpu>, &Tensor<Cpu>),
    mask: Option<&Tensor<Cpu>>,
    forward: &AttentionOutput<Cpu>,
    params: &AttentionParams,
) -> Result<Option<AttentionGrads<Cpu>>> {
    fn typed<T: AttentionFloat + CpuElement>(
        grad_out: &Tensor<Cpu>,
        (q, k, v): (&Tensor<Cpu>, &Tensor<Cpu>, &Tensor<Cpu>),
        mask: Option<&Tensor<Cpu>>,
        forward: &AttentionOutput<Cpu>,
        params: &AttentionParams,
    ) -> Result<Option<AttentionGrads<Cpu>>> {
        let out = forward.out.contiguous()?;
        let lse = forward.logsumexp.contiguous()?;
        let (Some(qd), Some(kd), Some(vd), Some(gd), Some(m)) = (
            data::<T>(q)?,
            data::<T>(k)?,
            data::<T>(v)?,
            data::<T>(grad_out)?,
            mask_data::<T>(mask)?,
        ) else {
            return Ok(None);
        };
        let (Some(od), Some(ld)) = (data::<T>(&out)?, data::<T>(&lse)?) else {
            return Ok(None);
        };
        let range = |t: &Tensor<Cpu>| t.layout().contiguous_range().unwrap_or(0..0);
        let saved = Saved {
            grad_out: Operand::new(gd, grad_out.layout()),
            out: &od[range(&out)],
            lse: &ld[range(&lse)],
        };
        let problem = Problem::new(
            (qd, kd, vd),
            [q.layout(), k.layout(), v.layout()],
            m,
            Some(grad_out.layout()),
            params,
        );
        let (dq, dk, dv) = problem.backward(&saved)?;
        let dev = q.backend();
        Ok(Some(AttentionGrads {
            q: tensor(dev, dq, q.dims().to_vec())?,
            k: tensor(dev, dk, k.dims().to_vec())?,
            v: tensor(dev, dv, v.dims().to_vec())?,
        }))
    }
    match q.dtype() {
        tessera_core::DType::F32 => typed::<f32>(grad_out, (q, k, v), mask, forward, params),
        tessera_core::DType::F64 => typed::<f64>(grad_out, (q, k, v), mask, forward, params),
        _ => Ok(None),
    }
}
