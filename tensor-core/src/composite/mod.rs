//! Default implementations of the composite ops of [`crate::Backend`], written with `Tensor`
//! methods (so with the backend's primitives). A backend overrides a composite when it has a
//! faster fused kernel; these defaults stay the reference its override is tested against.

mod attention;
mod concat;
mod conv;
mod cross_entropy;
mod fused;
pub mod in_f32;
mod layer_norm;
mod matmul_bias;
mod pool;
mod softmax;

pub use attention::{scaled_dot_product_attention, scaled_dot_product_attention_backward};
pub use concat::concat;
pub use conv::{conv2d, conv2d_backward_input, conv2d_backward_weight};
pub use cross_entropy::{cross_entropy, cross_entropy_backward};
pub use fused::{adam_update, gelu_backward, relu_backward};
pub use in_f32::{attention_backward_in_f32, in_f32, Narrow};
pub use layer_norm::{layer_norm, layer_norm_backward};
pub use matmul_bias::matmul_bias;
pub use pool::{avg_pool2d, avg_pool2d_backward, max_pool2d, max_pool2d_backward};
pub use softmax::{log_softmax, logsumexp, softmax};

use crate::{Backend, Layout, Result, Tensor};

/// A contiguous copy of `x: [n, c, h, w]` with `ph`/`pw` elements of `value` added on each side.
pub(crate) fn pad2d<B: Backend>(
    x: &Tensor<B>,
    ph: usize,
    pw: usize,
    value: f64,
) -> Result<Tensor<B>> {
    if ph == 0 && pw == 0 {
        return x.contiguous();
    }
    let d = x.dims();
    let mut out = Tensor::full(
        [d[0], d[1], padded(d[2], ph)?, padded(d[3], pw)?],
        value,
        x.dtype(),
        x.backend(),
    )?;
    let interior = out.layout().narrow(2, ph, d[2])?.narrow(3, pw, d[3])?;
    out.assign_into(&interior, x, false)?;
    Ok(out)
}

/// `len + 2 * padding`, or [`crate::Error::SizeOverflow`] when it overflows.
pub(crate) fn padded(len: usize, padding: usize) -> Result<usize> {
    padding
        .checked_mul(2)
        .and_then(|both| both.checked_add(len))
        .ok_or_else(|| crate::Error::SizeOverflow {
            op: "pad2d",
            msg: format!("{len} + 2 * {padding} overflows"),
        })
}

/// The layout, inside a contiguous `[n, c, hp, wp]` tensor, of the input positions that kernel
/// tap `(i, j)` touches for every output position: shape `[n, c, oh, ow]`.
pub(crate) fn tap_layout(
    padded_dims: [usize; 4],
    tap: (usize, usize),
    dilation: (usize, usize),
    stride: (usize, usize),
    out_hw: (usize, usize),
) -> Result<Layout> {
    let (oh, ow) = out_hw;
    let top = tap.0 * dilation.0;
    let left = tap.1 * dilation.1;
    Layout::contiguous(padded_dims)
        .slice(2, top, top + (oh.max(1) - 1) * stride.0 + 1, stride.0)?
        .slice(3, left, left + (ow.max(1) - 1) * stride.1 + 1, stride.1)
}

/// The stride of a window axis that steps `count` times by `step` elements of `unit`: exact
/// when it is used (`count >= 2`: the window fits, so `step * (count - 1)` is inside the
/// padded input), 0 when it is not, however large `step` is (a stride or dilation of
/// `usize::MAX` with a single output or tap is valid).
pub(crate) fn window_stride(step: usize, count: usize, unit: isize) -> isize {
    if count < 2 {
        return 0;
    }
    isize::try_from(step)
        .ok()
        .and_then(|s| s.checked_mul(unit))
        .unwrap_or(isize::MAX)
}

/// The read-only sliding-window view `[n, c, kh, kw, oh, ow]` of a contiguous padded input.
pub(crate) fn windows_view<B: Backend>(
    padded: &Tensor<B>,
    kernel: (usize, usize),
    dilation: (usize, usize),
    stride: (usize, usize),
    out_hw: (usize, usize),
) -> Result<Tensor<B>> {
    let d = padded.dims();
    let (c, hp, wp) = (d[1] as isize, d[2] as isize, d[3] as isize);
    padded.as_strided(
        [d[0], d[1], kernel.0, kernel.1, out_hw.0, out_hw.1],
        vec![
            c * hp * wp,
            hp * wp,
            window_stride(dilation.0, kernel.0, wp),
            window_stride(dilation.1, kernel.1, 1),
            window_stride(stride.0, out_hw.0, wp),
            window_stride(stride.1, out_hw.1, 1),
        ],
        padded.layout().offset(),
    )
}
