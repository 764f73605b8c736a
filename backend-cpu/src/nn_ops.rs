//! The CPU overrides of the convolution and pooling composites: contiguous operands are handed
//! to the direct kernels in `kernels::conv` and `kernels::pool`; other dtypes return `None` so
//! that the backend falls back to the composite defaults.
//!
//! `Backend` methods are public, so each entry runs the checks of `tessera_core::Tensor`'s own
//! method again (ranks, channels, parameters, `grad_out` shapes) before a kernel sees the data.

use std::borrow::Cow;

use tessera_core::tensor::{
    check_conv2d, check_conv2d_backward_input, check_conv2d_backward_weight, check_pool2d_backward,
    pool_output_dims,
};
use tessera_core::{bf16, Conv2dParams, Layout, Pool2dParams, Result, Tensor};

use crate::alloc::Zeroable;
use crate::checks::check_storage;
use crate::kernels::conv::{self, ConvGeometry};
use crate::kernels::conv_bf16;
use crate::kernels::copy;
use crate::kernels::pool::{self, PoolGeometry};
use crate::kernels::pool_bf16;
use crate::storage::CpuElement;
use crate::{Cpu, CpuStorage};

/// The elements of `t` in row-major order: borrowed when its layout is contiguous, else
/// copied. `None` when `t` does not hold `T`.
fn values<'t, T: CpuElement + Zeroable>(
    op: &'static str,
    t: &'t Tensor<Cpu>,
) -> Result<Option<Cow<'t, [T]>>> {
    check_storage(op, t.storage(), t.layout())?;
    let Some(data) = T::slice(t.storage()) else {
        return Ok(None);
    };
    if t.layout().numel() == 0 {
        // An empty tensor's offset may lie past its (possibly empty) storage.
        return Ok(Some(Cow::Borrowed(&[])));
    }
    Ok(Some(match t.layout().contiguous_range() {
        Some(range) => Cow::Borrowed(&data[range]),
        None => Cow::Owned(copy::copy_strided(data, t.layout())?),
    }))
}

/// A tensor over a fresh contiguous storage.
fn tensor(dev: &Cpu, storage: CpuStorage, dims: &[usize]) -> Result<Tensor<Cpu>> {
    Tensor::from_parts(dev, storage, Layout::contiguous(dims))
}

/// Runs `$body` with `$t` bound to the float element type of `$x` (f32 or f64) and `$wrap` to
/// the storage constructor; evaluates to `Ok(None)` for other dtypes.
macro_rules! per_float {
    ($x:expr, |$t:ident, $wrap:ident| $body:block) => {
        match $x.dtype() {
            tessera_core::DType::F32 => {
                type $t = f32;
                let $wrap = CpuStorage::F32;
                $body
            }
            tessera_core::DType::F64 => {
                type $t = f64;
                let $wrap = CpuStorage::F64;
                $body
            }
            _ => Ok(None),
        }
    };
}

/// Whether bf16 convolutions run in bf16 here (on the bf16 GEMM) rather than widened to f32
/// by tensor-core: what [`crate::Cpu`]'s `computes_16_bit` declares.
pub(crate) fn bf16_convolutions() -> bool {
    crate::kernels::gemm_bf16::has_fast_kernel()
}

/// [`tessera_core::Backend::conv2d`] on the CPU.
pub(crate) fn conv2d(
    x: &Tensor<Cpu>,
    weight: &Tensor<Cpu>,
    p: Conv2dParams,
) -> Result<Option<Tensor<Cpu>>> {
    let out_dims = check_conv2d(x.dims(), weight.dims(), p)?;
    let g = ConvGeometry::new("conv2d", x.dims(), weight.dims(), &out_dims, p)?;
    if bf16_convolutions() {
        if let (Some(xv), Some(wv)) = (values("conv2d", x)?, values("conv2d", weight)?) {
            let out = conv_bf16::conv2d(&xv, &wv, &g)?;
            return tensor(x.backend(), CpuStorage::BF16(out), &out_dims).map(Some);
        }
    }
    per_float!(x, |T, wrap| {
        let (Some(xv), Some(wv)) = (values::<T>("conv2d", x)?, values::<T>("conv2d", weight)?)
        else {
            return Ok(None);
        };
        let out = conv::conv2d(&xv, &wv, &g)?;
        tensor(x.backend(), wrap(out), &out_dims).map(Some)
    })
}

/// [`tessera_core::Backend::conv2d_backward_input`] on the CPU.
pub(crate) fn conv2d_backward_input(
    grad_out: &Tensor<Cpu>,
    weight: &Tensor<Cpu>,
    input_dims: &[usize],
    p: Conv2dParams,
) -> Result<Option<Tensor<Cpu>>> {
    const OP: &str = "conv2d_backward_input";
    check_conv2d_backward_input(grad_out.dims(), weight.dims(), input_dims, p)?;
    let g = ConvGeometry::new(OP, input_dims, weight.dims(), grad_out.dims(), p)?;
    if bf16_convolutions() {
        if let (Some(gv), Some(wv)) = (values(OP, grad_out)?, values(OP, weight)?) {
            let dx = conv_bf16::conv2d_backward_input(&gv, &wv, &g)?;
            return tensor(grad_out.backend(), CpuStorage::BF16(dx), input_dims).map(Some);
        }
    }
    per_float!(grad_out, |T, wrap| {
        let (Some(gv), Some(wv)) = (values::<T>(OP, grad_out)?, values::<T>(OP, weight)?) else {
            return Ok(None);
        };
        let dx = conv::conv2d_backward_input(&gv, &wv, &g)?;
        tensor(grad_out.backend(), wrap(dx), input_dims).map(Some)
    })
}

/// [`tessera_core::Backend::conv2d_backward_weight`] on the CPU.
pub(crate) fn conv2d_backward_weight(
    x: &Tensor<Cpu>,
    grad_out: &Tensor<Cpu>,
    weight_dims: &[usize],
    p: Conv2dParams,
) -> Result<Option<Tensor<Cpu>>> {
    const OP: &str = "conv2d_backward_weight";
    check_conv2d_backward_weight(x.dims(), grad_out.dims(), weight_dims, p)?;
    let g = ConvGeometry::new(OP, x.dims(), weight_dims, grad_out.dims(), p)?;
    if bf16_convolutions() {
        if let (Some(xv), Some(gv)) = (values(OP, x)?, values(OP, grad_out)?) {
            let dw = conv_bf16::conv2d_backward_weight(&xv, &gv, &g)?;
            return tensor(x.backend(), CpuStorage::BF16(dw), weight_dims).map(Some);
        }
    }
    per_float!(x, |T, wrap| {
        let (Some(xv), Some(gv)) = (values::<T>(OP, x)?, values::<T>(OP, grad_out)?) else {
            return Ok(None);
        };
        let dw = conv::conv2d_backward_weight(&xv, &gv, &g)?;
        tensor(x.backend(), wrap(dw), weight_dims).map(Some)
    })
}

/// [`tessera_core::Backend::max_pool2d`] on the CPU.
pub(crate) fn max_pool2d(
    x: &Tensor<Cpu>,
    p: Pool2dParams,
) -> Result<Option<(Tensor<Cpu>, Tensor<Cpu>)>> {
    let out_dims = pool_output_dims("max_pool2d", x.dims(), p)?;
    let g = PoolGeometry::new("max_pool2d", x.dims(), &out_dims, p)?;
    let dev = x.backend();
    if let Some(xv) = values::<bf16>("max_pool2d", x)? {
        let (out, arg) = pool_bf16::max_pool2d(&xv, &g)?;
        return Ok(Some((
            tensor(dev, CpuStorage::BF16(out), &out_dims)?,
            tensor(dev, CpuStorage::I64(arg), &out_dims)?,
        )));
    }
    per_float!(x, |T, wrap| {
        let Some(xv) = values::<T>("max_pool2d", x)? else {
            return Ok(None);
        };
        let (out, arg) = pool::max_pool2d(&xv, &g)?;
        Ok(Some((
            tensor(dev, wrap(out), &out_dims)?,
            tensor(dev, CpuStorage::I64(arg), &out_dims)?,
        )))
    })
}

/// [`tessera_core::Backend::max_pool2d_backward`] on the CPU.
pub(crate) fn max_pool2d_backward(
    grad_out: &Tensor<Cpu>,
    window_argmax: &Tensor<Cpu>,
    input_dims: &[usize],
    p: Pool2dParams,
) -> Result<Option<Tensor<Cpu>>> {
    const OP: &str = "max_pool2d_backward";
    check_pool2d_backward(OP, grad_out.dims(), input_dims, p)?;
    let g = PoolGeometry::new(OP, input_dims, grad_out.dims(), p)?;
    if window_argmax.dims() != grad_out.dims() {
        return Ok(None);
    }
    if let (Some(gv), Some(av)) = (
        values::<bf16>(OP, grad_out)?,
        values::<i64>(OP, window_argmax)?,
    ) {
        let dx = pool_bf16::max_pool2d_backward(&gv, &av, &g)?;
        return tensor(grad_out.backend(), CpuStorage::BF16(dx), input_dims).map(Some);
    }
    per_float!(grad_out, |T, wrap| {
        let (Some(gv), Some(av)) = (
            values::<T>(OP, grad_out)?,
            values::<i64>(OP, window_argmax)?,
        ) else {
            return Ok(None);
        };
        let dx = pool::max_pool2d_backward(&gv, &av, &g)?;
        tensor(grad_out.backend(), wrap(dx), input_dims).map(Some)
    })
}

/// [`tessera_core::Backend::avg_pool2d`] on the CPU.
pub(crate) fn avg_pool2d(x: &Tensor<Cpu>, p: Pool2dParams) -> Result<Option<Tensor<Cpu>>> {
    let out_dims = pool_output_dims("avg_pool2d", x.dims(), p)?;
    let g = PoolGeometry::new("avg_pool2d", x.dims(), &out_dims, p)?;
    let window = p.kernel.0 as f64 * p.kernel.1 as f64;
    if let Some(xv) = values::<bf16>("avg_pool2d", x)? {
        let out = pool_bf16::avg_pool2d(&xv, &g, window as f32)?;
        return tensor(x.backend(), CpuStorage::BF16(out), &out_dims).map(Some);
    }
    per_float!(x, |T, wrap| {
        let Some(xv) = values::<T>("avg_pool2d", x)? else {
            return Ok(None);
        };
        let out = pool::avg_pool2d(&xv, &g, window as T)?;
        tensor(x.backend(), wrap(out), &out_dims).map(Some)
    })
}

/// [`tessera_core::Backend::avg_pool2d_backward`] on the CPU.
pub(crate) fn avg_pool2d_backward(
    grad_out: &Tensor<Cpu>,
    input_dims: &[usize],
    p: Pool2dParams,
) -> Result<Option<Tensor<Cpu>>> {
    const OP: &str = "avg_pool2d_backward";
    check_pool2d_backward(OP, grad_out.dims(), input_dims, p)?;
    let g = PoolGeometry::new(OP, input_dims, grad_out.dims(), p)?;
    let window = p.kernel.0 as f64 * p.kernel.1 as f64;
    if let Some(gv) = values::<bf16>(OP, grad_out)? {
        let dx = pool_bf16::avg_pool2d_backward(&gv, &g, window as f32)?;
        return tensor(grad_out.backend(), CpuStorage::BF16(dx), input_dims).map(Some);
    }
    per_float!(grad_out, |T, wrap| {
        let Some(gv) = values::<T>(OP, grad_out)? else {
            return Ok(None);
        };
        let dx = pool::avg_pool2d_backward(&gv, &g, window as T)?;
        tensor(grad_out.backend(), wrap(dx), input_dims).map(Some)
    })
}
