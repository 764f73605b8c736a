//! Scaled dot-product attention on [`Checked`]: both passes run on the backend under test (its
//! fused kernels, or the composite) and on the reference, and every result is compared with
//! an accumulation tolerance scaled by the magnitude of what produced it.

use crate::tolerance::Tolerance;
use crate::Checked;
use tessera_core::attention::{AttentionGrads, AttentionInputs, AttentionOutput, AttentionParams};
use tessera_core::dispatch;
use tessera_core::{Backend, DType, Result, Tensor};

/// The largest finite `|x|` of `t` (0 for none).
fn largest<R: Backend>(t: &Tensor<R>) -> Result<f64> {
    Ok(t.to_vec_f64()?
        .into_iter()
        .filter(|v| v.is_finite())
        .fold(0.0f64, |m, v| m.max(v.abs())))
}

/// A mask as each side sees it.
type SplitMask<B, R> = (Option<Tensor<B>>, Option<Tensor<R>>);

impl<B: Backend, R: Backend> Checked<B, R> {
    fn split_mask(&self, mask: Option<&Tensor<Self>>) -> Result<SplitMask<B, R>> {
        Ok(match mask {
            Some(m) => {
                let (b, r) = self.split(m)?;
                (Some(b), Some(r))
            }
            None => (None, None),
        })
    }

    /// `1 + ` a bound on the magnitude of the scores (their rounding error grows with it).
    fn score_bound(
        &self,
        q: &Tensor<R>,
        k: &Tensor<R>,
        mask: Option<&Tensor<R>>,
        params: &AttentionParams,
    ) -> Result<f64> {
        let e = *q.dims().last().unwrap_or(&1) as f64;
        let mask_part = match mask {
            Some(m) if m.dtype() != DType::Bool => largest(m)?,
            _ => 0.0,
        };
        Ok(1.0 + params.scale.abs() * e * largest(q)? * largest(k)? + mask_part)
    }

    /// A tensor of `like`'s shape filled with `value`, on the reference.
    fn flat_scale(&self, like: &Tensor<R>, value: f64) -> Result<Tensor<R>> {
        Tensor::full(like.shape().clone(), value, DType::F64, self.reference())
    }

    pub(crate) fn checked_attention(
        &self,
        inputs: AttentionInputs<'_, Self>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Self>> {
        let AttentionInputs { q, k, v, mask } = inputs;
        let ((qb, qr), (kb, kr), (vb, vr)) = (self.split(q)?, self.split(k)?, self.split(v)?);
        let (mb, mr) = self.split_mask(mask)?;
        let b = dispatch::attention(
            AttentionInputs {
                q: &qb,
                k: &kb,
                v: &vb,
                mask: mb.as_ref(),
            },
            params,
        )?;
        let r = dispatch::attention(
            AttentionInputs {
                q: &qr,
                k: &kr,
                v: &vr,
                mask: mr.as_ref(),
            },
            params,
        )?;
        let bound = self.score_bound(&qr, &kr, mr.as_ref(), params)?;
        let abs_v = vr.abs()?;
        let weighted_v = dispatch::attention(
            AttentionInputs {
                q: &qr,
                k: &kr,
                v: &abs_v,
                mask: mr.as_ref(),
            },
            params,
        )?
        .out;
        let out_scale = weighted_v.mul_scalar(bound)?.to_dtype(DType::F64)?;
        let lse_scale = self.flat_scale(&r.logsumexp, bound + largest(&r.logsumexp)?)?;
        let terms = k.dims()[k.rank() - 2] + q.dims()[q.rank() - 1];
        let tolerance = Tolerance::accumulation(q.dtype(), terms + 4).scaled(4.0);
        let mut inputs = vec![q, k, v];
        inputs.extend(mask);
        let name = "scaled_dot_product_attention";
        Ok(AttentionOutput {
            out: self.settle_tensors(name, &inputs, tolerance, b.out, r.out, Some(out_scale))?,
            logsumexp: self.settle_tensors(
                name,
                &inputs,
                tolerance,
                b.logsumexp,
                r.logsumexp,
                Some(lse_scale),
            )?,
        })
    }

    pub(crate) fn checked_attention_backward(
        &self,
        grad_out: &Tensor<Self>,
        inputs: AttentionInputs<'_, Self>,
        forward: &AttentionOutput<Self>,
        params: &AttentionParams,
    ) -> Result<AttentionGrads<Self>> {
        let AttentionInputs { q, k, v, mask } = inputs;
        let ((qb, qr), (kb, kr), (vb, vr)) = (self.split(q)?, self.split(k)?, self.split(v)?);
        let (gb, gr) = self.split(grad_out)?;
        let (mb, mr) = self.split_mask(mask)?;
        let (ob, or) = self.split(&forward.out)?;
        let (lb, lr) = self.split(&forward.logsumexp)?;
        let fb = AttentionOutput {
            out: ob,
            logsumexp: lb,
        };
        let fr = AttentionOutput {
            out: or,
            logsumexp: lr,
        };
        let b = dispatch::attention_backward(
            &gb,
            AttentionInputs {
                q: &qb,
                k: &kb,
                v: &vb,
                mask: mb.as_ref(),
            },
            &fb,
            params,
        )?;
        let r = dispatch::attention_backward(
            &gr,
            AttentionInputs {
                q: &qr,
                k: &kr,
                v: &vr,
                mask: mr.as_ref(),
            },
            &fr,
            params,
        )?;
        // Every gradient element sums terms bounded by |dO|·|v|·|q or k| (times the dropout
        // factor) scaled by the score bound: one flat scale per gradient.
        let bound = self.score_bound(&qr, &kr, mr.as_ref(), params)?;
        let factor = params.dropout.map_or(1.0, |d| 1.0 / (1.0 - d.p));
        let (g, qm, km, vm) = (largest(&gr)?, largest(&qr)?, largest(&kr)?, largest(&vr)?);
        let s = k.dims()[k.rank() - 2] as f64;
        let ev = v.dims()[v.rank() - 1] as f64;
        let common = bound * factor * g * (1.0 + 2.0 * ev * vm * params.scale.abs() * s);
        let tolerance = Tolerance::accumulation(q.dtype(), s as usize + ev as usize + 4);
        let tolerance = tolerance.scaled(4.0);
        let mut inputs = vec![grad_out, q, k, v];
        inputs.extend(mask);
        let name = "scaled_dot_product_attention_backward";
        let dq_scale = self.flat_scale(&r.q, common * km)?;
        let dk_scale = self.flat_scale(&r.k, common * qm)?;
        let dv_scale = self.flat_scale(&r.v, bound * factor * g * s)?;
        Ok(AttentionGrads {
            q: self.settle_tensors(name, &inputs, tolerance, b.q, r.q, Some(dq_scale))?,
            k: self.settle_tensors(name, &inputs, tolerance, b.k, r.k, Some(dk_scale))?,
            v: self.settle_tensors(name, &inputs, tolerance, b.v, r.v, Some(dv_scale))?,
        })
    }
}
