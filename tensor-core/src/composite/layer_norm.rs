//! The unfused definitions of layer normalisation and its gradients (see
//! [`crate::layer_norm`]), as chains of tensor ops. A backend's fused override must agree
//! with them to rounding.

use crate::layer_norm::{check_layer_norm, check_layer_norm_backward};
use crate::{Backend, LayerNormGrads, LayerNormOutput, Result, Tensor};

/// [`crate::Backend::layer_norm`]'s default: the mean, the centred values, the biased variance
/// of the centred values (two passes, as stable as PyTorch's), `rstd`, then the affine map.
pub fn layer_norm<B: Backend>(
    x: &Tensor<B>,
    weight: Option<&Tensor<B>>,
    bias: Option<&Tensor<B>>,
    eps: f64,
) -> Result<LayerNormOutput<B>> {
    check_layer_norm(x, weight, bias, eps)?;
    let mean = x.mean(&[-1], true)?;
    let centered = x.sub(&mean)?;
    let rstd = centered
        .square()?
        .mean(&[-1], true)?
        .add_scalar(eps)?
        .rsqrt()?;
    let mut y = centered.mul(&rstd)?;
    if let Some(w) = weight {
        y = y.mul(w)?;
    }
    if let Some(b) = bias {
        y = y.add(b)?;
    }
    Ok(LayerNormOutput { y, mean, rstd })
}

/// [`crate::Backend::layer_norm_backward`]'s default, from the formulas of
/// [`crate::layer_norm`].
pub fn layer_norm_backward<B: Backend>(
    grad: &Tensor<B>,
    x: &Tensor<B>,
    weight: Option<&Tensor<B>>,
    (mean, rstd): (&Tensor<B>, &Tensor<B>),
    with_bias: bool,
) -> Result<LayerNormGrads<B>> {
    let n = check_layer_norm_backward(grad, x, weight, (mean, rstd))?;
    // The statistics may be f32 for a widened 16-bit input: compute in x's dtype.
    let (mean, rstd) = (mean.to_dtype(x.dtype())?, rstd.to_dtype(x.dtype())?);
    let x_hat = x.sub(&mean)?.mul(&rstd)?;
    let g_hat = match weight {
        Some(w) => grad.mul(w)?,
        None => grad.clone(),
    };
    let mean_g = g_hat.mean(&[-1], true)?;
    let mean_gx = g_hat.mul(&x_hat)?.mean(&[-1], true)?;
    let dx = g_hat.sub(&mean_g)?.sub(&x_hat.mul(&mean_gx)?)?.mul(&rstd)?;
    let rows =
        |t: &Tensor<B>| -> Result<Tensor<B>> { t.reshape([t.numel() / n, n])?.sum(&[0], false) };
    let dweight = weight.map(|_| rows(&grad.mul(&x_hat)?)).transpose()?;
    let dbias = with_bias.then(|| rows(grad)).transpose()?;
    Ok(LayerNormGrads {
        x: dx,
        weight: dweight,
        bias: dbias,
    })
}
