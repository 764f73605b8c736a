//! Max and average pooling over sliding windows, and their gradients.

use super::{pad2d, tap_layout};
use crate::tensor::pool_output_dims;
use crate::{Backend, DType, Pool2dParams, Result, Tensor};

/// The windows of `x` as `[n, c, oh, ow, kh * kw]` (a copy), padded with `pad_value`.
fn windows<B: Backend>(x: &Tensor<B>, p: Pool2dParams, pad_value: f64) -> Result<Tensor<B>> {
    let [n, c, oh, ow] = pool_output_dims("pool2d", x.dims(), p)?;
    let padded = pad2d(x, p.padding.0, p.padding.1, pad_value)?;
    let d = padded.dims();
    let (hp, wp) = (d[2] as isize, d[3] as isize);
    padded
        .as_strided(
            [n, c, oh, ow, p.kernel.0, p.kernel.1],
            vec![
                c as isize * hp * wp,
                hp * wp,
                p.stride.0 as isize * wp,
                p.stride.1 as isize,
                wp,
                1,
            ],
            padded.layout().offset(),
        )?
        .reshape([n, c, oh, ow, p.kernel.0 * p.kernel.1])
}

/// Max pooling: the maxima and their positions inside each window (the first on ties, the
/// first NaN; a window where nothing beats `-inf` points at its first position inside the
/// input, as PyTorch, rather than at the padding).
pub fn max_pool2d<B: Backend>(x: &Tensor<B>, p: Pool2dParams) -> Result<(Tensor<B>, Tensor<B>)> {
    let win = windows(x, p, f64::NEG_INFINITY)?;
    let (max, arg) = (win.max(&[-1], false)?, win.argmax(-1, false)?);
    if p.padding == (0, 0) {
        return Ok((max, arg));
    }
    let d = x.dims();
    let (oh, ow) = (max.dims()[2], max.dims()[3]);
    let first = |o: usize, k: usize, s: usize, pad: usize, len: usize| {
        (0..k).find(|&t| (o * s + t).checked_sub(pad).is_some_and(|i| i < len))
    };
    let mut first_inside = Vec::with_capacity(oh * ow);
    for oy in 0..oh {
        for ox in 0..ow {
            let ky = first(oy, p.kernel.0, p.stride.0, p.padding.0, d[2]);
            let kx = first(ox, p.kernel.1, p.stride.1, p.padding.1, d[3]);
            let tap = match (ky, kx) {
                (Some(ky), Some(kx)) => ky * p.kernel.1 + kx,
                _ => 0,
            };
            first_inside.push(tap as i64);
        }
    }
    let first_inside = Tensor::from_vec(first_inside, [oh, ow], x.backend())?;
    let arg = max
        .eq_scalar(f64::NEG_INFINITY)?
        .where_select(&first_inside, &arg)?;
    Ok((max, arg))
}

/// Adds `contribution(tap)` for every kernel tap into a zero gradient of the padded input.
fn scatter_taps<B: Backend>(
    like: &Tensor<B>,
    input_dims: &[usize],
    p: Pool2dParams,
    mut contribution: impl FnMut(usize) -> Result<Tensor<B>>,
) -> Result<Tensor<B>> {
    let (n, c, h, w) = (input_dims[0], input_dims[1], input_dims[2], input_dims[3]);
    let (oh, ow) = (like.dims()[2], like.dims()[3]);
    let padded_dims = [n, c, h + 2 * p.padding.0, w + 2 * p.padding.1];
    let mut grad = Tensor::zeros(padded_dims, like.dtype(), like.backend())?;
    if oh > 0 && ow > 0 {
        for i in 0..p.kernel.0 {
            for j in 0..p.kernel.1 {
                let dst = tap_layout(padded_dims, (i, j), (1, 1), p.stride, (oh, ow))?;
                let src = contribution(i * p.kernel.1 + j)?;
                grad.assign_into(&dst, &src, true)?;
            }
        }
    }
    grad.narrow(2, p.padding.0, h)?
        .narrow(3, p.padding.1, w)?
        .contiguous()
}

/// Gradient of max pooling: each window's gradient goes to the position of its maximum.
pub fn max_pool2d_backward<B: Backend>(
    grad_out: &Tensor<B>,
    window_argmax: &Tensor<B>,
    input_dims: &[usize],
    p: Pool2dParams,
) -> Result<Tensor<B>> {
    let zero = grad_out.scalar_like(0.0)?;
    scatter_taps(grad_out, input_dims, p, |tap| {
        let hit = window_argmax.eq(&Tensor::full(
            (),
            tap as f64,
            DType::I64,
            grad_out.backend(),
        )?)?;
        hit.where_select(grad_out, &zero)
    })
}

/// Average pooling (padding counts as zeros, the divisor is the full window size).
pub fn avg_pool2d<B: Backend>(x: &Tensor<B>, p: Pool2dParams) -> Result<Tensor<B>> {
    windows(x, p, 0.0)?.mean(&[-1], false)
}

/// Gradient of average pooling: each window spreads its gradient evenly.
pub fn avg_pool2d_backward<B: Backend>(
    grad_out: &Tensor<B>,
    input_dims: &[usize],
    p: Pool2dParams,
) -> Result<Tensor<B>> {
    let share = grad_out.div_scalar((p.kernel.0 * p.kernel.1) as f64)?;
    scatter_taps(grad_out, input_dims, p, |_| Ok(share.clone()))
}
