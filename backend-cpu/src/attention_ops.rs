//! The CPU overrides of scaled dot-product attention and its gradient: f32/f64 operands go to
//! the fused kernels of `kernels::attention`, read in place through their strides; 16-bit
//! operands (`F16`, `BF16`, all of one dtype) are widened to f32 for the same kernels and the
//! results rounded back once, the backward pass computing `D` without the rounded forward
//! output (see `Saved::out`) instead of running the forward pass again as the dispatch's
//! widening rule does; anything else returns `None` and the backend falls back to the
//! composite default.

use tessera_core::attention::{AttentionGrads, AttentionOutput, AttentionParams};
use tessera_core::{DType, Layout, Result, Tensor};

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
        DType::F32 => typed::<f32>(q, k, v, mask, params),
        DType::F64 => typed::<f64>(q, k, v, mask, params),
        half if half.is_half() => {
            let Some([q, k, v]) = widened(half, [q, k, v])? else {
                return Ok(None);
            };
            let mask = widened_mask(half, mask)?;
            let Some(f) = typed::<f32>(&q, &k, &v, mask.as_ref(), params)? else {
                return Ok(None);
            };
            Ok(Some(AttentionOutput {
                out: f.out.to_dtype(half)?,
                logsumexp: f.logsumexp,
            }))
        }
        _ => Ok(None),
    }
}

/// `operands` widened to f32 when every one is `half`; `None` otherwise (a mismatch the
/// composite reports).
fn widened<const N: usize>(
    half: DType,
    operands: [&Tensor<Cpu>; N],
) -> Result<Option<[Tensor<Cpu>; N]>> {
    if operands.iter().any(|t| t.dtype() != half) {
        return Ok(None);
    }
    let wide = operands
        .iter()
        .map(|t| t.to_dtype(DType::F32))
        .collect::<Result<Vec<_>>>()?;
    Ok(wide.try_into().ok())
}

/// A mask for a problem widened from `half`: an additive mask of that dtype widened to f32,
/// any other (bool, or a dtype the kernel then refuses) as it is.
fn widened_mask(half: DType, mask: Option<&Tensor<Cpu>>) -> Result<Option<Tensor<Cpu>>> {
    mask.map(|m| {
        if m.dtype() == half {
            m.to_dtype(DType::F32)
        } else {
            Ok(m.clone())
        }
    })
    .transpose()
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
        // A 16-bit problem's output was rounded: not read (see `Saved::out`).
        let widened = forward.out.dtype() != q.dtype();
        let out = forward.out.contiguous()?;
        let lse = forward.logsumexp.to_dtype(q.dtype())?.contiguous()?;
        let (Some(qd), Some(kd), Some(vd), Some(gd), Some(m)) = (
            data::<T>(q)?,
            data::<T>(k)?,
            data::<T>(v)?,
            data::<T>(grad_out)?,
            mask_data::<T>(mask)?,
        ) else {
            return Ok(None);
        };
        let od = if widened {
            &[][..]
        } else {
            match data::<T>(&out)? {
                Some(od) => od,
                None => return Ok(None),
            }
        };
        let Some(ld) = data::<T>(&lse)? else {
            return Ok(None);
        };
        let range = |t: &Tensor<Cpu>| t.layout().contiguous_range().unwrap_or(0..0);
        let saved = Saved {
            grad_out: Operand::new(gd, grad_out.layout()),
            out: (!widened).then(|| &od[range(&out)]),
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
        DType::F32 => typed::<f32>(grad_out, (q, k, v), mask, forward, params),
        DType::F64 => typed::<f64>(grad_out, (q, k, v), mask, forward, params),
        half if half.is_half() => {
            if forward.out.dtype() != half {
                return Ok(None);
            }
            let Some([g, q, k, v]) = widened(half, [grad_out, q, k, v])? else {
                return Ok(None);
            };
            let mask = widened_mask(half, mask)?;
            let Some(grads) = typed::<f32>(&g, (&q, &k, &v), mask.as_ref(), forward, params)?
            else {
                return Ok(None);
            };
            Ok(Some(AttentionGrads {
                q: grads.q.to_dtype(half)?,
                k: grads.k.to_dtype(half)?,
                v: grads.v.to_dtype(half)?,
            }))
        }
        _ => Ok(None),
    }
}
