//! Element-wise ops of two operands ([`BinaryOp`]), broadcast already applied by zero strides.

use super::map::map2;
use super::num::Num;
use crate::alloc::Zeroable;
use crate::checks::{dtype_mismatch, unsupported};
use crate::CpuStorage;
use tessera_core::{BackendStorage, BinaryOp, Element, FloatElement, Layout, Result};

/// Applies `op` element by element (dtype support as in [`BinaryOp::supports`]).
pub(crate) fn binary(
    op: BinaryOp,
    a: &CpuStorage,
    la: &Layout,
    b: &CpuStorage,
    lb: &Layout,
) -> Result<CpuStorage> {
    if !op.supports(a.dtype()) {
        return Err(unsupported(op.name(), a.dtype()));
    }
    Ok(match (a, b) {
        (CpuStorage::F32(x), CpuStorage::F32(y)) => {
            CpuStorage::F32(binary_float(op, x, la, y, lb)?)
        }
        (CpuStorage::F64(x), CpuStorage::F64(y)) => {
            CpuStorage::F64(binary_float(op, x, la, y, lb)?)
        }
        (CpuStorage::I64(x), CpuStorage::I64(y)) => CpuStorage::I64(binary_int(op, x, la, y, lb)?),
        (CpuStorage::Bool(x), CpuStorage::Bool(y)) => {
            CpuStorage::Bool(binary_bool(op, x, la, y, lb)?)
        }
        _ => return Err(dtype_mismatch(op.name(), a, b)),
    })
}

/// The float ops; maximum and minimum return NaN when either operand is NaN.
fn binary_float<T: FloatElement + Num + Zeroable>(
    op: BinaryOp,
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
) -> Result<Vec<T>> {
    match op {
        BinaryOp::Add => map2(a, la, b, lb, |x: T, y: T| x + y),
        BinaryOp::Sub => map2(a, la, b, lb, |x: T, y: T| x - y),
        BinaryOp::Mul => map2(a, la, b, lb, |x: T, y: T| x * y),
        BinaryOp::Div => map2(a, la, b, lb, |x: T, y: T| x / y),
        BinaryOp::Pow => map2(a, la, b, lb, |x: T, y: T| x.powf(y)),
        BinaryOp::Maximum => map2(a, la, b, lb, T::max_nan),
        BinaryOp::Minimum => map2(a, la, b, lb, T::min_nan),
    }
}

/// The integer ops; add, sub and mul wrap on overflow.
fn binary_int(op: BinaryOp, a: &[i64], la: &Layout, b: &[i64], lb: &Layout) -> Result<Vec<i64>> {
    match op {
        BinaryOp::Add => map2(a, la, b, lb, i64::wrapping_add),
        BinaryOp::Sub => map2(a, la, b, lb, i64::wrapping_sub),
        BinaryOp::Mul => map2(a, la, b, lb, i64::wrapping_mul),
        BinaryOp::Maximum => map2(a, la, b, lb, i64::max),
        BinaryOp::Minimum => map2(a, la, b, lb, i64::min),
        BinaryOp::Div | BinaryOp::Pow => Err(unsupported(op.name(), i64::DTYPE)),
    }
}

/// The bool ops: `Mul` and `Minimum` are logical and, `Maximum` is logical or.
fn binary_bool(op: BinaryOp, a: &[u8], la: &Layout, b: &[u8], lb: &Layout) -> Result<Vec<u8>> {
    match op {
        BinaryOp::Mul | BinaryOp::Minimum => {
            map2(a, la, b, lb, |x: u8, y: u8| u8::from(x != 0 && y != 0))
        }
        BinaryOp::Maximum => map2(a, la, b, lb, |x: u8, y: u8| u8::from(x != 0 || y != 0)),
        _ => Err(unsupported(op.name(), u8::DTYPE)),
    }
}
