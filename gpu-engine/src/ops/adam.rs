//! The Adam/AdamW step of one parameter in one kernel (`adam.cl.c`) instead of the composite's
//! dozen element-wise launches: the same operations in the same order, each output written
//! once. Operands of other shapes or dtypes than the parameter's are left to the composite,
//! which reports them.

use super::operands::{dense, scalar};
use crate::driver::{Driver, ModuleKey};
use crate::gpu::Gpu;
use crate::runtime::Arg;
use crate::storage::GpuStorage;
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::{DType, Layout, Result, Tensor};

/// The step on the device, or None when the composite must run (operands whose dims or dtype
/// differ from the parameter's, or a dtype without the kernel).
pub(crate) fn adam_update<D: Driver>(
    gpu: &Gpu<D>,
    param: &Tensor<Gpu<D>>,
    grad: &Tensor<Gpu<D>>,
    (exp_avg, exp_avg_sq): (&Tensor<Gpu<D>>, &Tensor<Gpu<D>>),
    max_exp_avg_sq: Option<&Tensor<Gpu<D>>>,
    u: AdamUpdate,
) -> Result<Option<AdamTensors<Gpu<D>>>> {
    let dtype = param.dtype();
    let mut operands = vec![param, grad, exp_avg, exp_avg_sq];
    operands.extend(max_exp_avg_sq);
    let alike = operands
        .iter()
        .all(|t| t.dims() == param.dims() && t.dtype() == dtype);
    if !alike || !matches!(dtype, DType::F32 | DType::F64) {
        return Ok(None);
    }
    let dense: Vec<(Tensor<Gpu<D>>, i64)> =
        operands.into_iter().map(dense).collect::<Result<_>>()?;
    let rt = gpu.runtime();
    let n = param.numel();
    // The parameter, the moments and the maximum (no output for the gradient).
    let outputs: Vec<GpuStorage<D>> = (1..dense.len())
        .map(|_| rt.alloc(dtype, n))
        .collect::<Result<_>>()?;
    let coefficient = |v: f64| scalar(dtype, v);
    let has_max = max_exp_avg_sq.is_some();
    let flags = (u.coupled_decay != 0.0) as i32
        | ((u.decoupled_factor != 1.0) as i32) << 1
        | (has_max as i32) << 2;
    // Without AMSGrad the maximum's slots take the second moment's buffers, never touched.
    let max_in = if has_max { &dense[4] } else { &dense[3] };
    let max_out = if has_max { &outputs[3] } else { &outputs[2] };
    let mut args = vec![Arg::I64(n as i64)];
    for (t, offset) in dense.iter().take(4).chain([max_in]) {
        args.push(Arg::Buffer(t.storage()));
        args.push(Arg::I64(*offset));
    }
    args.extend([
        Arg::I32(flags),
        coefficient(u.beta1),
        coefficient(1.0 - u.beta1),
        coefficient(u.beta2),
        coefficient(1.0 - u.beta2),
        coefficient(u.coupled_decay),
        coefficient(u.decoupled_factor),
        coefficient(u.bias_correction2_sqrt),
        coefficient(u.eps),
        coefficient(u.step_size),
        Arg::Buffer(&outputs[0]),
        Arg::Buffer(&outputs[1]),
        Arg::Buffer(&outputs[2]),
        Arg::Buffer(max_out),
    ]);
    rt.launch_1d(&ModuleKey::tensor(dtype), "adam_update", &args, n)?;
    drop(args);
    let mut tensors = outputs
        .into_iter()
        .map(|s| Tensor::from_parts(gpu, s, Layout::contiguous(param.dims().to_vec())));
    let mut next = || {
        tensors
            .next()
            .expect("one output per operand but the gradient")
    };
    Ok(Some(AdamTensors {
        param: next()?,
        exp_avg: next()?,
        exp_avg_sq: next()?,
        max_exp_avg_sq: if has_max { Some(next()?) } else { None },
    }))
}
