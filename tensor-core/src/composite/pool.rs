//! Max and average pooling over sliding windows, and their gradients.

use super::{pad2d, padded, tap_layout, window_stride};
use crate::tensor::{check_pool2d_backward, interior_taps, pool_output_dims};
use crate::{Backend, DType, Error, Pool2dParams, Result, Tensor};

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
                window_stride(p.stride.0, oh, wp),
                window_stride(p.stride.1, ow, 1),
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
    // Without padding every window starts inside; without any window (an empty batch or
    // channel axis can come with huge spatial sizes) there is nothing to fix, and the per-
    // position table below would be as large as `oh · ow`, not as the (empty) output.
    if p.padding == (0, 0) || max.numel() == 0 {
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

/// Adds `contribution(tap)` for every kernel tap into a zero gradient of the padded input,
/// where `tap` is the window position `i * kw + j` (`None` if it does not fit an `i64`, so no
/// position can name it). Taps that only ever see padding are skipped (their contributions are
/// cut away at the end), so the loop is bounded by the image, not by the kernel.
fn scatter_taps<B: Backend>(
    op: &'static str,
    like: &Tensor<B>,
    input_dims: &[usize],
    p: Pool2dParams,
    mut contribution: impl FnMut(Option<i64>) -> Result<Tensor<B>>,
) -> Result<Tensor<B>> {
    check_pool2d_backward(op, like.dims(), input_dims, p)?;
    let (n, c, h, w) = (input_dims[0], input_dims[1], input_dims[2], input_dims[3]);
    let (oh, ow) = (like.dims()[2], like.dims()[3]);
    let padded_dims = [n, c, padded(h, p.padding.0)?, padded(w, p.padding.1)?];
    let mut grad = Tensor::zeros(padded_dims, like.dtype(), like.backend())?;
    if oh > 0 && ow > 0 {
        let cols: Vec<usize> = interior_taps(p.kernel.1, p.stride.1, p.padding.1, w, ow).collect();
        for i in interior_taps(p.kernel.0, p.stride.0, p.padding.0, h, oh) {
            for &j in &cols {
                let dst = tap_layout(padded_dims, (i, j), (1, 1), p.stride, (oh, ow))?;
                let tap = i
                    .checked_mul(p.kernel.1)
                    .and_then(|t| t.checked_add(j))
                    .and_then(|t| i64::try_from(t).ok());
                let src = contribution(tap)?;
                grad.assign_into(&dst, &src, true)?;
            }
        }
    }
    grad.narrow(2, p.padding.0, h)?
        .narrow(3, p.padding.1, w)?
        .contiguous()
}

/// Gradient of max pooling: each window's gradient goes to the position of its maximum.
///
/// The positions are first passed through a `gather` from `0..kh * kw`, which is the identity
/// on valid positions and makes the backend report any other as [`Error::IndexOutOfRange`]
/// (without waiting for the device on GPU backends: their index errors surface at the next
/// read-back).
pub fn max_pool2d_backward<B: Backend>(
    grad_out: &Tensor<B>,
    window_argmax: &Tensor<B>,
    input_dims: &[usize],
    p: Pool2dParams,
) -> Result<Tensor<B>> {
    const OP: &str = "max_pool2d_backward";
    check_pool2d_backward(OP, grad_out.dims(), input_dims, p)?;
    if window_argmax.shape() != grad_out.shape() {
        return Err(Error::ShapeMismatch {
            op: OP,
            lhs: grad_out.shape().clone(),
            rhs: window_argmax.shape().clone(),
        });
    }
    let window_argmax = checked_positions(OP, window_argmax, p)?;
    let zero = grad_out.scalar_like(0.0)?;
    scatter_taps(OP, grad_out, input_dims, p, |tap| match tap {
        Some(tap) => {
            let tap = Tensor::from_vec(vec![tap], (), grad_out.backend())?;
            window_argmax.eq(&tap)?.where_select(grad_out, &zero)
        }
        None => grad_out.zeros_like(),
    })
}

/// Tables of window positions up to this size are gathered from directly.
const POSITION_TABLE_LIMIT: usize = 1 << 16;

/// `window_argmax` after a `gather` that is the identity on positions inside the window
/// (`0..kh * kw`) and makes the backend report any other as [`Error::IndexOutOfRange`].
///
/// For the usual windows the gather reads the table `0..kh * kw` itself; for a window of more
/// than [`POSITION_TABLE_LIMIT`] taps, valid positions are first mapped to 0 and the gather
/// reads a one-element table, so nothing of the window's size is allocated.
fn checked_positions<B: Backend>(
    op: &'static str,
    window_argmax: &Tensor<B>,
    p: Pool2dParams,
) -> Result<Tensor<B>> {
    let taps = p.kernel.0.saturating_mul(p.kernel.1);
    let dev = window_argmax.backend();
    let flat = window_argmax.reshape([window_argmax.numel()])?;
    let checked = if taps <= POSITION_TABLE_LIMIT {
        Tensor::arange(0.0, taps as f64, 1.0, DType::I64, dev)?.gather(0, &flat)
    } else {
        // `taps` as f64 may round, but only for windows of more than 2^53 taps, whose
        // positions could not be told apart by an f64 comparison either way.
        let inside = flat.ge_scalar(0.0)?.mul(&flat.lt_scalar(taps as f64)?)?;
        let mapped = inside.where_select(&flat.zeros_like()?, &flat)?;
        Tensor::zeros([1], DType::I64, dev)?
            .gather(0, &mapped)
            .map(|_| flat.clone())
    };
    let checked = checked.map_err(|e| match e {
        Error::IndexOutOfRange { index, .. } => Error::IndexOutOfRange {
            op,
            index,
            size: taps,
        },
        other => other,
    })?;
    checked.reshape(window_argmax.shape())
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
    const OP: &str = "avg_pool2d_backward";
    check_pool2d_backward(OP, grad_out.dims(), input_dims, p)?;
    let window = p.kernel.0 as f64 * p.kernel.1 as f64;
    let share = grad_out.div_scalar(window)?;
    scatter_taps(OP, grad_out, input_dims, p, |_| Ok(share.clone()))
}
