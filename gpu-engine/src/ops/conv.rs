//! 2-d convolution as im2col (one kernel, `conv.cl.c`, padding handled inline) plus the GEMM,
//! for the forward pass and the weight gradient. The input gradient stays the composite
//! (`col2im` through strided accumulation). Same plan as `backend-opencl`'s.

use crate::driver::{Driver, ModuleKey};
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use crate::view::View;
use std::sync::Arc;
use tessera_core::tensor::conv_output_dims;
use tessera_core::{Backend, BackendStorage, Conv2dParams, Error, Layout, Result, Tensor};

/// The columns `[n, c * kh * kw, oh * ow]` of `x: [n, c, h, w]` (any strides) for a
/// `kh x kw` kernel, as a contiguous storage and its layout.
pub(crate) fn im2col<D: Driver>(
    rt: &Arc<Runtime<D>>,
    x: &GpuStorage<D>,
    l: &Layout,
    kernel: (usize, usize),
    p: Conv2dParams,
    out_hw: (usize, usize),
) -> Result<(GpuStorage<D>, Layout)> {
    if l.rank() != 4 || !x.dtype().is_float() {
        return Err(Error::InvalidArgument {
            op: "conv2d",
            msg: format!("im2col needs a float [n, c, h, w] input, got {}", l.shape()),
        });
    }
    let d = l.dims();
    let taps = d[1] * kernel.0 * kernel.1;
    let positions = out_hw.0 * out_hw.1;
    let total = d[0] * taps * positions;
    let cols = rt.alloc(x.dtype(), total)?;
    let i = |v: usize| Arg::I64(v as i64);
    let args = [
        i(total),
        Arg::Buffer(x),
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
    rt.launch_1d(&ModuleKey::tensor(x.dtype()), "im2col", &args, total)?;
    Ok((cols, Layout::contiguous([d[0], taps, positions])))
}

/// The columns of `x` for a kernel and output size, as a tensor (built by the backend).
pub type Columns<'a, B> = &'a dyn Fn((usize, usize), (usize, usize)) -> Result<Tensor<B>>;

/// `x: [n, c, h, w]` convolved with `weight: [o, c, kh, kw]` (validated by `Tensor::conv2d`).
pub fn conv2d<B: Backend>(
    x: &Tensor<B>,
    weight: &Tensor<B>,
    p: Conv2dParams,
    columns: Columns<'_, B>,
) -> Result<Tensor<B>> {
    let [n, o, oh, ow] = conv_output_dims(x.dims(), weight.dims(), p)?;
    let wd = weight.dims();
    let cols = columns((wd[2], wd[3]), (oh, ow))?;
    let w = weight.reshape([o, wd[1] * wd[2] * wd[3]])?;
    w.matmul(&cols)?.reshape([n, o, oh, ow])
}

/// Gradient with respect to the weight: `sum over the batch of grad_out · colsᵀ`.
pub fn conv2d_backward_weight<B: Backend>(
    x: &Tensor<B>,
    grad_out: &Tensor<B>,
    weight_dims: &[usize],
    columns: Columns<'_, B>,
) -> Result<Tensor<B>> {
    let (n, o) = (x.dims()[0], weight_dims[0]);
    let (oh, ow) = (grad_out.dims()[2], grad_out.dims()[3]);
    let cols = columns((weight_dims[2], weight_dims[3]), (oh, ow))?;
    grad_out
        .reshape([n, o, oh * ow])?
        .matmul(&cols.t()?)?
        .sum(&[0], false)?
        .reshape(weight_dims)
}
