//! Layer normalisation and its gradient under [`Checked`]: both sides run their own
//! (fused or default) implementation, and every output is compared with an accumulation
//! tolerance scaled by the magnitudes of the terms that produce it (the reference side's
//! inputs in absolute value, as the conformance harness's `fused` family does).

use crate::tolerance::Tolerance;
use crate::Checked;
use tessera_core::dispatch;
use tessera_core::{Backend, LayerNormGrads, LayerNormOutput, Result, Tensor};

type Pair<B, R> = (Option<Tensor<B>>, Option<Tensor<R>>);

impl<B: Backend, R: Backend> Checked<B, R> {
    fn split_optional(&self, t: Option<&Tensor<Self>>) -> Result<Pair<B, R>> {
        Ok(match t {
            Some(t) => {
                let (b, r) = self.split(t)?;
                (Some(b), Some(r))
            }
            None => (None, None),
        })
    }

    pub(crate) fn checked_layer_norm(
        &self,
        x: &Tensor<Self>,
        weight: Option<&Tensor<Self>>,
        bias: Option<&Tensor<Self>>,
        eps: f64,
    ) -> Result<LayerNormOutput<Self>> {
        let (xb, xr) = self.split(x)?;
        let (wb, wr) = self.split_optional(weight)?;
        let (bb, br) = self.split_optional(bias)?;
        let b = dispatch::layer_norm(&xb, wb.as_ref(), bb.as_ref(), eps)?;
        let r = dispatch::layer_norm(&xr, wr.as_ref(), br.as_ref(), eps)?;
        let n = x.dims().last().copied().unwrap_or(1);
        // Scales: mean|x| (the mean's error), then as `tests/src/reference/fused.rs`.
        let xf = xr.to_dtype(r.mean.dtype())?;
        let mean_abs = xf.abs()?.mean(&[-1], true)?;
        let rstd = &r.rstd;
        let spread = mean_abs.mul(rstd)?;
        let mut y_scale = xf.sub(&r.mean)?.mul(rstd)?.abs()?.add(&spread)?;
        if let Some(w) = &wr {
            y_scale = y_scale.mul(&w.to_dtype(y_scale.dtype())?.abs()?)?;
        }
        if let Some(b) = &br {
            y_scale = y_scale.add(&b.to_dtype(y_scale.dtype())?.abs()?)?;
        }
        let rstd_scale = rstd.mul(&spread.add_scalar(1.0)?)?;
        let tolerance = Tolerance::accumulation(x.dtype(), 2 * n + 4);
        let mut inputs = vec![x];
        inputs.extend(weight);
        inputs.extend(bias);
        let name = "layer_norm";
        Ok(LayerNormOutput {
            y: self.settle_tensors(name, &inputs, tolerance, b.y, r.y, Some(y_scale))?,
            mean: self.settle_tensors(name, &inputs, tolerance, b.mean, r.mean, Some(mean_abs))?,
            rstd: self.settle_tensors(
                name,
                &inputs,
                tolerance,
                b.rstd,
                r.rstd,
                Some(rstd_scale),
            )?,
        })
    }

    pub(crate) fn checked_layer_norm_backward(
        &self,
        grad: &Tensor<Self>,
        x: &Tensor<Self>,
        weight: Option<&Tensor<Self>>,
        (mean, rstd): (&Tensor<Self>, &Tensor<Self>),
        with_bias: bool,
    ) -> Result<LayerNormGrads<Self>> {
        let ((gb, gr), (xb, xr)) = (self.split(grad)?, self.split(x)?);
        let (wb, wr) = self.split_optional(weight)?;
        let ((mb, mr), (sb, sr)) = (self.split(mean)?, self.split(rstd)?);
        let b = dispatch::layer_norm_backward(&gb, &xb, wb.as_ref(), (&mb, &sb), with_bias)?;
        let r = dispatch::layer_norm_backward(&gr, &xr, wr.as_ref(), (&mr, &sr), with_bias)?;
        let n = x.dims().last().copied().unwrap_or(1);
        let rows = x.numel() / n.max(1);
        // Scales: every term in absolute value, widened by the spread `1 + mean|x| · rstd`.
        let dtype = mr.dtype();
        let (xf, gf) = (xr.to_dtype(dtype)?, gr.to_dtype(dtype)?);
        let spread = xf.abs()?.mean(&[-1], true)?.mul(&sr)?;
        let x_hat = xf.sub(&mr)?.mul(&sr)?.abs()?;
        let g_hat = match &wr {
            Some(w) => gf.mul(&w.to_dtype(dtype)?)?.abs()?,
            None => gf.abs()?,
        };
        let dx_scale = g_hat
            .add(&g_hat.mean(&[-1], true)?)?
            .add(&x_hat.mul(&g_hat.mul(&x_hat)?.mean(&[-1], true)?)?)?
            .mul(&sr)?
            .mul(&spread.add_scalar(1.0)?)?;
        let over_rows =
            |t: Tensor<R>| -> Result<Tensor<R>> { t.reshape([rows, n])?.sum(&[0], false) };
        let dw_scale = over_rows(gf.abs()?.mul(&x_hat.add(&spread)?)?)?;
        let db_scale = over_rows(gf.abs()?)?;
        let x_tolerance = Tolerance::accumulation(x.dtype(), 4 * n + 8);
        let sum_tolerance = Tolerance::accumulation(x.dtype(), rows + 2 * n + 8);
        let mut inputs = vec![grad, x];
        inputs.extend(weight);
        let name = "layer_norm_backward";
        let pair = |b: Option<Tensor<B>>, r: Option<Tensor<R>>, scale: Tensor<R>| match (b, r) {
            (Some(b), Some(r)) => self
                .settle_tensors(name, &inputs, sum_tolerance, b, r, Some(scale))
                .map(Some),
            (None, None) => Ok(None),
            _ => Err(tessera_core::Error::Backend {
                backend: "checked",
                op: name,
                msg: "one side returned a parameter gradient the other did not".into(),
            }),
        };
        Ok(LayerNormGrads {
            x: self.settle_tensors(name, &inputs, x_tolerance, b.x, r.x, Some(dx_scale))?,
            weight: pair(b.weight, r.weight, dw_scale)?,
            bias: pair(b.bias, r.bias, db_scale)?,
        })
    }

    pub(crate) fn checked_gelu_backward(
        &self,
        x: &Tensor<Self>,
        grad: &Tensor<Self>,
    ) -> Result<Tensor<Self>> {
        let ((xb, xr), (gb, gr)) = (self.split(x)?, self.split(grad)?);
        let b = dispatch::gelu_backward(&xb, &gb)?;
        let r = dispatch::gelu_backward(&xr, &gr)?;
        // `(1 + erf(x/√2)) / 2` rounds in absolute terms: the scale is `|grad|`.
        let scale = gr.abs()?;
        let tolerance = Tolerance::transcendental(x.dtype());
        self.settle_tensors("gelu_backward", &[x, grad], tolerance, b, r, Some(scale))
    }
}
