//! Element-wise ops of two operands ([`BinaryOp`]), broadcast already applied by zero strides.

use super::lanes::Lane;
use super::map::map2;
use super::num::Num;
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
        // In f32 lanes, rounded once per element (the result tensor-core's widening gives);
        // F16 is widened to f32 before it gets here (`tessera_core::dispatch`).
        (CpuStorage::BF16(x), CpuStorage::BF16(y)) => {
            CpuStorage::BF16(binary_float::<f32, _>(op, x, la, y, lb)?)
        }
        (CpuStorage::I64(x), CpuStorage::I64(y)) => CpuStorage::I64(binary_int(op, x, la, y, lb)?),
        (CpuStorage::Bool(x), CpuStorage::Bool(y)) => {
            CpuStorage::Bool(binary_bool(op, x, la, y, lb)?)
        }
        _ => return Err(dtype_mismatch(op.name(), a, b)),
    })
}

/// The float ops, computed in `T` on values stored as `S` (see [`Lane`]); maximum and minimum
/// return NaN when either operand is NaN.
fn binary_float<T: FloatElement + Num, S: Lane<T>>(
    op: BinaryOp,
    a: &[S],
    la: &Layout,
    b: &[S],
    lb: &Layout,
) -> Result<Vec<S>> {
    // A macro, not a closure taking `f`, so that `f` is inlined into the loop.
    macro_rules! map {
        ($f:expr) => {{
            let f = $f;
            map2(a, la, b, lb, move |x: S, y: S| {
                S::store(f(x.load(), y.load()))
            })
        }};
    }
    match op {
        BinaryOp::Add => map!(|x: T, y: T| x + y),
        BinaryOp::Sub => map!(|x: T, y: T| x - y),
        BinaryOp::Mul => map!(|x: T, y: T| x * y),
        BinaryOp::Div => map!(|x: T, y: T| x / y),
        BinaryOp::Pow => map!(|x: T, y: T| x.powf(y)),
        BinaryOp::Maximum => map!(T::max_nan),
        BinaryOp::Minimum => map!(T::min_nan),
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
