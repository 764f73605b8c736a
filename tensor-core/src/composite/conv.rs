//! 2-D convolution as im2col + batched matmul, and its two gradients.

use super::{pad2d, padded, tap_layout, windows_view};
use crate::tensor::{check_conv2d, check_conv2d_backward_input, check_conv2d_backward_weight};
use crate::{Backend, Conv2dParams, Result, Tensor};

/// im2col: the columns `[n, c * kh * kw, oh * ow]` of `x` for a `[.., kh, kw]` kernel.
fn im2col<B: Backend>(
    x: &Tensor<B>,
    kernel: (usize, usize),
    p: Conv2dParams,
    out_hw: (usize, usize),
) -> Result<Tensor<B>> {
    let padded = pad2d(x, p.padding.0, p.padding.1, 0.0)?;
    let d = x.dims();
    windows_view(&padded, kernel, p.dilation, p.stride, out_hw)?.reshape([
        d[0],
        d[1] * kernel.0 * kernel.1,
        out_hw.0 * out_hw.1,
    ])
}

/// Convolution of `x: [n, c, h, w]` with `weight: [o, c, kh, kw]`, giving `[n, o, oh, ow]`.
pub fn conv2d<B: Backend>(x: &Tensor<B>, weight: &Tensor<B>, p: Conv2dParams) -> Result<Tensor<B>> {
    let [n, o, oh, ow] = check_conv2d(x.dims(), weight.dims(), p)?;
    let wd = weight.dims();
    let cols = im2col(x, (wd[2], wd[3]), p, (oh, ow))?;
    let w = weight.reshape([o, wd[1] * wd[2] * wd[3]])?;
    w.matmul(&cols)?.reshape([n, o, oh, ow])
}

/// Gradient with respect to the input: `col2im(weightᵀ · grad_out)`.
pub fn conv2d_backward_input<B: Backend>(
    grad_out: &Tensor<B>,
    weight: &Tensor<B>,
    input_dims: &[usize],
    p: Conv2dParams,
) -> Result<Tensor<B>> {
    check_conv2d_backward_input(grad_out.dims(), weight.dims(), input_dims, p)?;
    let wd = weight.dims();
    let (n, c, h, w) = (input_dims[0], input_dims[1], input_dims[2], input_dims[3]);
    let (o, kh, kw) = (wd[0], wd[2], wd[3]);
    let (oh, ow) = (grad_out.dims()[2], grad_out.dims()[3]);
    let w_t = weight.reshape([o, c * kh * kw])?.t()?;
    let cols = w_t
        .matmul(&grad_out.reshape([n, o, oh * ow])?)?
        .reshape([n, c, kh, kw, oh, ow])?;
    let padded_dims = [n, c, padded(h, p.padding.0)?, padded(w, p.padding.1)?];
    let mut grad = Tensor::zeros(padded_dims, grad_out.dtype(), grad_out.backend())?;
    // One pass per tap: kh·kw passes, which the (padded) input bounds (every window fits it)
    // unless the gradient has no element at all, when there is nothing to accumulate.
    if oh > 0 && ow > 0 && grad.numel() > 0 {
        for i in 0..kh {
            for j in 0..kw {
                let tap = cols
                    .narrow(2, i, 1)?
                    .narrow(3, j, 1)?
                    .reshape([n, c, oh, ow])?;
                let dst = tap_layout(padded_dims, (i, j), p.dilation, p.stride, (oh, ow))?;
                grad.assign_into(&dst, &tap, true)?;
            }
        }
    }
    grad.narrow(2, p.padding.0, h)?
        .narrow(3, p.padding.1, w)?
        .contiguous()
}

/// Gradient with respect to the weight: `sum over the batch of grad_out · colsᵀ`.
pub fn conv2d_backward_weight<B: Backend>(
    x: &Tensor<B>,
    grad_out: &Tensor<B>,
    weight_dims: &[usize],
    p: Conv2dParams,
) -> Result<Tensor<B>> {
    check_conv2d_backward_weight(x.dims(), grad_out.dims(), weight_dims, p)?;
    let (n, o) = (x.dims()[0], weight_dims[0]);
    let (oh, ow) = (grad_out.dims()[2], grad_out.dims()[3]);
    let cols = im2col(x, (weight_dims[2], weight_dims[3]), p, (oh, ow))?;
    grad_out
        .reshape([n, o, oh * ow])?
        .matmul(&cols.t()?)?
        .sum(&[0], false)?
        .reshape(weight_dims)
}
