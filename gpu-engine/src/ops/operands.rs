//! Kernel arguments of the ops written at the tensor level (attention, Adam): an operand made
//! dense with its element offset, and a scalar in the element type's precision.

use crate::driver::Driver;
use crate::runtime::Arg;
use tessera_core::{Backend, DType, Result, Tensor};

/// A scalar kernel argument of the element type (f64 for f64, f32 for the other floats, whose
/// kernels compute in f32).
pub(crate) fn scalar<'a, D: Driver>(dtype: DType, value: f64) -> Arg<'a, D> {
    match dtype {
        DType::F64 => Arg::F64(value),
        _ => Arg::F32(value as f32),
    }
}

/// `t` as a contiguous tensor (a copy when it is strided) and its element offset.
pub(crate) fn dense<Bk: Backend>(t: &Tensor<Bk>) -> Result<(Tensor<Bk>, i64)> {
    let t = t.contiguous()?;
    let offset = t.layout().offset() as i64;
    Ok((t, offset))
}
