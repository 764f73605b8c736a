//! The CPU overrides of scaled dot-product attention and its gradient: f32/f64 operands go to
//! the fused kernels of `kernels::attention`, read in place through their strides; 16-bit
//! operands (`F16`, `BF16`, all of one dtype) are widened to f32 for the same kernels and the
//! results rounded back once, the backward pass computing `D` without the rounded forward
//! output (see `Saved::out`) instead of running the forward pass again as the dispatch's
//! widening rule does; anything else returns `None` and the backend falls back to the
//! composite default.

use std::sync::Arc;
use tessera_core::attention::{AttentionGrads, AttentionOutput, AttentionParams};
use tessera_core::{BackendStorage, DType, Layout, Result, Tensor};

use crate::checks::check_storage;
use crate::kernels::attention::{AttentionFloat, MaskData, Operand, Problem, Saved};
use crate::kernels::cast;
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

/// `operands` widened to f32 when every one is `half`, each the same view (strides) of an f32
/// copy of the storage it reaches; `None` otherwise (a mismatch the composite reports).
///
/// Heads are strided views of one projection (`[b, t, 3E]` split into `q`, `k` and `v`), and a
/// view-by-view cast walks runs of one head's width: the span of storage the operands that
/// share a storage reach is converted once instead, as one contiguous run, when it holds at
/// most twice their elements (otherwise each operand's own span, or, for a sparse view, the
/// view itself through `to_dtype`).
fn widened<const N: usize>(
    half: DType,
    operands: [&Tensor<Cpu>; N],
) -> Result<Option<[Tensor<Cpu>; N]>> {
    if operands.iter().any(|t| t.dtype() != half) {
        return Ok(None);
    }
    // The storage range each operand reaches.
    let span = |t: &Tensor<Cpu>| -> Option<std::ops::Range<usize>> {
        let last = t.layout().checked_max_offset()?;
        (t.numel() > 0).then(|| t.layout().offset()..last + 1)
    };
    let spans: Vec<_> = operands.iter().map(|t| span(t)).collect();
    let same = |a: &Tensor<Cpu>, b: &Tensor<Cpu>| Arc::ptr_eq(a.storage_arc(), b.storage_arc());
    let mut copies: Vec<(usize, std::ops::Range<usize>, Arc<crate::CpuStorage>)> = Vec::new();
    let mut wide = Vec::with_capacity(N);
    for (i, t) in operands.iter().enumerate() {
        let Some(own) = spans[i].clone() else {
            wide.push(t.to_dtype(DType::F32)?);
            continue;
        };
        // The union of the spans of the operands sharing this storage, if dense enough; else
        // the operand's own span, if dense enough; else the view by itself.
        let (mut union, mut elements) = (own.clone(), 0);
        for (j, u) in operands.iter().enumerate() {
            if let (true, Some(r)) = (same(t, u), &spans[j]) {
                union = union.start.min(r.start)..union.end.max(r.end);
                elements += u.numel();
            }
        }
        let range = if union.len() <= 2 * elements {
            union
        } else if own.len() <= 2 * t.numel() {
            own
        } else {
            wide.push(t.to_dtype(DType::F32)?);
            continue;
        };
        let copy = match copies.iter().find(|(owner, r, _)| {
            same(operands[*owner], t) && r.start <= range.start && range.end <= r.end
        }) {
            Some((_, r, copy)) => (r.start, copy.clone()),
            None => {
                let run = Layout::strided([range.len()], vec![1], range.start, t.storage().len())?;
                let copy = Arc::new(cast::cast(t.storage(), &run, DType::F32)?);
                copies.push((i, range.clone(), copy.clone()));
                (range.start, copy)
            }
        };
        let (start, storage) = copy;
        let layout = Layout::strided(
            t.dims().to_vec(),
            t.layout().strides().to_vec(),
            t.layout().offset() - start,
            storage.len(),
        )?;
        wide.push(Tensor::from_shared(t.backend(), storage, layout)?);
    }
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
        let rounded_output = forward.out.dtype() != q.dtype();
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
        let od = if rounded_output {
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
            out: (!rounded_output).then(|| &od[range(&out)]),
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

#[cfg(test)]
mod tests {
    use crate::Cpu;
    use tessera_core::{AttentionOptions, DType, Result, Tensor};

    /// `[b, t, 3E]` values, distinct enough that a wrong element shows.
    fn projection(dev: &Cpu, (b, t, e): (usize, usize, usize)) -> Result<Tensor<Cpu>> {
        let values: Vec<f32> = (0..b * t * 3 * e)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 40.0)
            .collect();
        Tensor::from_vec(values, [b, t, 3 * e], dev)?.to_dtype(DType::BF16)
    }

    /// Heads `[b, h, t, d]` of columns `start..start + E` (a strided view of the projection).
    fn heads(x: &Tensor<Cpu>, start: usize, h: usize) -> Result<Tensor<Cpu>> {
        let (b, t, e) = (x.dims()[0], x.dims()[1], x.dims()[2] / 3);
        x.narrow(2, start, e)?
            .reshape([b, t, h, e / h])?
            .permute(&[0, 2, 1, 3])
    }

    /// 16-bit views of one storage (a fused projection's heads, widened as one span), a view
    /// with a span of its own (from an offset), a sparse view (widened by itself) and their
    /// contiguous copies give the same bits forward and backward: widening is exact, and the
    /// kernel reads the same values.
    #[test]
    fn strided_16_bit_views_attend_like_their_contiguous_copies() -> Result<()> {
        let dev = Cpu::new();
        let (b, t, e, h) = (2, 5, 8, 2);
        let x = projection(&dev, (b, t, e))?;
        let q = heads(&x, 0, h)?;
        let k = heads(&x, e, h)?;
        // Columns 1..E + 1 of a `[b, t, E + 1]` tensor: a span of its own from offset 1.
        let wider = projection(&dev, (b, t, e))?
            .narrow(2, 0, e + 1)?
            .contiguous()?;
        let v = wider
            .narrow(2, 1, e)?
            .reshape([b, t, h, e / h])?
            .permute(&[0, 2, 1, 3])?;
        // Every third time step of a longer projection: a span three times its elements.
        let grad = heads(&projection(&dev, (b, 3 * t, e))?, 0, h)?.slice(2, 0, 3 * t, 3)?;
        let options = AttentionOptions::new().causal(true);
        let run = |q: &Tensor<Cpu>, k: &Tensor<Cpu>, v: &Tensor<Cpu>, g: &Tensor<Cpu>| {
            let f = q.scaled_dot_product_attention_with_lse(k, v, &options)?;
            let grads = g.scaled_dot_product_attention_backward(q, k, v, &options, &f)?;
            [f.out, f.logsumexp, grads.q, grads.k, grads.v]
                .iter()
                .map(|t| t.to_vec_f64())
                .collect::<Result<Vec<_>>>()
        };
        let strided = run(&q, &k, &v, &grad)?;
        let copies = run(
            &q.contiguous()?,
            &k.contiguous()?,
            &v.contiguous()?,
            &grad.contiguous()?,
        )?;
        assert_eq!(strided, copies);
        Ok(())
    }
}
