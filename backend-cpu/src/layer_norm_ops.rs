//! The CPU overrides of layer normalisation and its gradient: contiguous f32/f64 operands go to
//! the row kernels of [`crate::kernels::layer_norm`]; anything else returns `None` and the
//! backend falls back to the composite default.

use tessera_core::layer_norm::{check_layer_norm, check_layer_norm_backward, stats_dims};
use tessera_core::{FloatElement, LayerNormGrads, LayerNormOutput, Result, Tensor};

use crate::fused_ops::{contiguous, tensor};
use crate::kernels::layer_norm::{self, BackwardRows, Rows};
use crate::kernels::num::Num;
use crate::storage::CpuElement;
use crate::{Cpu, CpuStorage};

/// An optional operand of `dims` for the kernels: `Some(None)` when absent, `Some(Some(values))`
/// when present and contiguous, `None` when present in another layout (the composite runs).
fn optional<'t, T: CpuElement>(
    op: &'static str,
    t: Option<&'t Tensor<Cpu>>,
    dims: &[usize],
) -> Result<Option<Option<&'t [T]>>> {
    match t {
        None => Ok(Some(None)),
        Some(t) => Ok(contiguous::<T>(op, t, dims)?.map(Some)),
    }
}

/// [`tessera_core::Backend::layer_norm`] on the CPU.
pub(crate) fn layer_norm(
    x: &Tensor<Cpu>,
    weight: Option<&Tensor<Cpu>>,
    bias: Option<&Tensor<Cpu>>,
    eps: f64,
) -> Result<Option<LayerNormOutput<Cpu>>> {
    fn typed<T: CpuElement + FloatElement + Num>(
        x: &Tensor<Cpu>,
        weight: Option<&Tensor<Cpu>>,
        bias: Option<&Tensor<Cpu>>,
        eps: f64,
        n: usize,
    ) -> Result<Option<LayerNormOutput<Cpu>>> {
        const OP: &str = "layer_norm";
        let dims = x.dims();
        let (Some(xv), Some(w), Some(b)) = (
            contiguous::<T>(OP, x, dims)?,
            optional::<T>(OP, weight, &[n])?,
            optional::<T>(OP, bias, &[n])?,
        ) else {
            return Ok(None);
        };
        let rows = Rows {
            x: xv,
            n,
            weight: w,
            bias: b,
        };
        let (y, mean, rstd) = layer_norm::forward(&rows, eps)?;
        let dev = x.backend();
        let stats = stats_dims(dims);
        Ok(Some(LayerNormOutput {
            y: tensor(dev, y, dims)?,
            mean: tensor(dev, mean, &stats)?,
            rstd: tensor(dev, rstd, &stats)?,
        }))
    }
    let n = check_layer_norm(x, weight, bias, eps)?;
    match x.storage() {
        CpuStorage::F32(_) => typed::<f32>(x, weight, bias, eps, n),
        CpuStorage::F64(_) => typed::<f64>(x, weight, bias, eps, n),
        _ => Ok(None),
    }
}

/// [`tessera_core::Backend::layer_norm_backward`] on the CPU.
pub(crate) fn layer_norm_backward(
    grad: &Tensor<Cpu>,
    x: &Tensor<Cpu>,
    weight: Option<&Tensor<Cpu>>,
    (mean, rstd): (&Tensor<Cpu>, &Tensor<Cpu>),
    with_bias: bool,
) -> Result<Option<LayerNormGrads<Cpu>>> {
    fn typed<T: CpuElement + FloatElement + Num>(
        grad: &Tensor<Cpu>,
        x: &Tensor<Cpu>,
        weight: Option<&Tensor<Cpu>>,
        (mean, rstd): (&Tensor<Cpu>, &Tensor<Cpu>),
        with_bias: bool,
        n: usize,
    ) -> Result<Option<LayerNormGrads<Cpu>>> {
        const OP: &str = "layer_norm_backward";
        let dims = x.dims();
        let stats = stats_dims(dims);
        let (Some(xv), Some(gv), Some(w), Some(m), Some(s)) = (
            contiguous::<T>(OP, x, dims)?,
            contiguous::<T>(OP, grad, dims)?,
            optional::<T>(OP, weight, &[n])?,
            contiguous::<T>(OP, mean, &stats)?,
            contiguous::<T>(OP, rstd, &stats)?,
        ) else {
            return Ok(None);
        };
        let rows = BackwardRows {
            grad: gv,
            x: xv,
            n,
            weight: w,
            mean: m,
            rstd: s,
        };
        let (dx, dw, db) = layer_norm::backward(&rows, with_bias)?;
        let dev = x.backend();
        Ok(Some(LayerNormGrads {
            x: tensor(dev, dx, dims)?,
            weight: dw.map(|v| tensor(dev, v, &[n])).transpose()?,
            bias: db.map(|v| tensor(dev, v, &[n])).transpose()?,
        }))
    }
    let n = check_layer_norm_backward(grad, x, weight, (mean, rstd))?;
    let same = |t: &Tensor<Cpu>| t.dtype() == x.dtype();
    if !(same(mean) && same(rstd)) {
        return Ok(None);
    }
    match x.storage() {
        CpuStorage::F32(_) => typed::<f32>(grad, x, weight, (mean, rstd), with_bias, n),
        CpuStorage::F64(_) => typed::<f64>(grad, x, weight, (mean, rstd), with_bias, n),
        _ => Ok(None),
    }
}
