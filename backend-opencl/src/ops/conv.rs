//! 2-d convolution as im2col (one kernel, `conv.cl.c`, padding handled inline) plus the GEMM,
//! for the forward pass and the weight gradient. The input gradient stays the composite
//! (`col2im` through strided accumulation).

use crate::runtime::{Arg, ProgramKey};
use crate::view::View;
use crate::OpenCl;
use tensor_core::tensor::conv_output_dims;
use tensor_core::{Conv2dParams, Layout, Result, Tensor};

/// The columns `[n, c * kh * kw, oh * ow]` of `x: [n, c, h, w]` for a `kh x kw` kernel.
fn im2col(
    dev: &OpenCl,
    x: &Tensor<OpenCl>,
    kernel: (usize, usize),
    p: Conv2dParams,
    out_hw: (usize, usize),
) -> Result<Tensor<OpenCl>> {
    let rt = dev.runtime();
    crate::checks::check_operand("conv2d", rt, x.storage(), x.layout())?;
    let d = x.dims();
    let taps = d[1] * kernel.0 * kernel.1;
    let positions = out_hw.0 * out_hw.1;
    let total = d[0] * taps * positions;
    let cols = rt.alloc(x.dtype(), total)?;
    let l = x.layout();
    let i = |v: usize| Arg::I64(v as i64);
    let args = [
        i(total),
        Arg::Buffer(x.storage()),
        Arg::View(View::new(l.dims(), l.strides(), l.offset())),
        i(kernel.0),
        i(kernel.1),
        i(p.stride.0),
        i(p.stride.1),
        i(p.padding.0),
        i(p.padding.1),
        i(p.dilation.0),
        i(p.dilation.1),
        i(out_hw.0),
        i(out_hw.1),
        Arg::Buffer(&cols),
    ];
    rt.launch_1d(&ProgramKey::tensor(x.dtype()), "im2col", &args, total)?;
    Tensor::from_parts(dev, cols, Layout::contiguous([d[0], taps, positions]))
}

/// `x: [n, c, h, w]` convolved with `weight: [o, c, kh, kw]` (validated by `Tensor::conv2d`).
pub(crate) fn conv2d(
    dev: &OpenCl,
    x: &Tensor<OpenCl>,
    weight: &Tensor<OpenCl>,
    p: Conv2dParams,
) -> Result<Tensor<OpenCl>> {
    let [n, o, oh, ow] = conv_output_dims(x.dims(), weight.dims(), p)?;
    let wd = weight.dims();
    let cols = im2col(dev, x, (wd[2], wd[3]), p, (oh, ow))?;
    let w = weight.reshape([o, wd[1] * wd[2] * wd[3]])?;
    w.matmul(&cols)?.reshape([n, o, oh, ow])
}

/// Gradient with respect to the weight: `sum over the batch of grad_out · colsᵀ`.
pub(crate) fn conv2d_backward_weight(
    dev: &OpenCl,
    x: &Tensor<OpenCl>,
    grad_out: &Tensor<OpenCl>,
    weight_dims: &[usize],
    p: Conv2dParams,
) -> Result<Tensor<OpenCl>> {
    let (n, o) = (x.dims()[0], weight_dims[0]);
    let (oh, ow) = (grad_out.dims()[2], grad_out.dims()[3]);
    let cols = im2col(dev, x, (weight_dims[2], weight_dims[3]), p, (oh, ow))?;
    grad_out
        .reshape([n, o, oh * ow])?
        .matmul(&cols.t()?)?
        .sum(&[0], false)?
        .reshape(weight_dims)
}
