//! Element-wise kernels on contiguous data: unary maps, binary ops, comparisons, select, casts.
//! The definitions follow the documentation of the op enums in `tessera_core::ops`.

use crate::alloc::collect;
use crate::floats::{from_f64s, to_f64s};
use tessera_core::dtype::rounding::{f64_to_bf16, f64_to_f16, i64_to_bf16, i64_to_f16};
use tessera_core::{bf16, f16, BinaryOp, CmpOp, DType, Error, HostData, Result, UnaryOp};

fn unsupported(op: &'static str, dtype: DType) -> Error {
    Error::UnsupportedDType { op, dtype }
}

fn dtype_mismatch(op: &'static str, lhs: &HostData, rhs: &HostData) -> Error {
    Error::DTypeMismatch {
        op,
        lhs: lhs.dtype(),
        rhs: rhs.dtype(),
    }
}

/// `op(x)` on one float.
fn unary_float(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        // 1 or -1 by sign; ±0 and NaN are returned unchanged.
        UnaryOp::Sign if x > 0.0 => 1.0,
        UnaryOp::Sign if x < 0.0 => -1.0,
        UnaryOp::Sign => x,
        UnaryOp::Square => x * x,
        UnaryOp::Recip => 1.0 / x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        // Both branches avoid overflowing exp for large |x|.
        UnaryOp::Sigmoid if x >= 0.0 => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Sigmoid => {
            let e = x.exp();
            e / (1.0 + e)
        }
        // NaN > 0 is false, so NaN is kept explicitly.
        UnaryOp::Relu if x > 0.0 || x.is_nan() => x,
        UnaryOp::Relu => 0.0,
        UnaryOp::Gelu => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Not => unreachable!("logical_not is rejected for floats before"),
    }
}

/// `op` applied to every element.
pub(crate) fn unary(op: UnaryOp, x: HostData) -> Result<HostData> {
    let dtype = x.dtype();
    if !op.supports(dtype) {
        return Err(unsupported(op.name(), dtype));
    }
    // The input is a fresh copy (read through its layout): update it in place.
    match x {
        HostData::I64(mut v) => {
            for x in &mut v {
                *x = match op {
                    UnaryOp::Neg => x.wrapping_neg(),
                    UnaryOp::Abs => x.wrapping_abs(),
                    UnaryOp::Sign => x.signum(),
                    _ => x.wrapping_mul(*x), // Square, the last op defined for i64
                };
            }
            Ok(HostData::I64(v))
        }
        HostData::Bool(mut v) => {
            for b in &mut v {
                *b = u8::from(*b == 0);
            }
            Ok(HostData::Bool(v))
        }
        floats => {
            let mut v = to_f64s(op.name(), &floats)?;
            for x in &mut v {
                *x = unary_float(op, *x);
            }
            from_f64s(dtype, v)
        }
    }
}

/// `op(a, b)` on two floats; maximum and minimum propagate NaN.
fn binary_float(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        _ if a.is_nan() || b.is_nan() => f64::NAN,
        BinaryOp::Maximum => {
            if a >= b {
                a
            } else {
                b
            }
        }
        BinaryOp::Minimum => {
            if a <= b {
                a
            } else {
                b
            }
        }
    }
}

/// `op(a, b)` on two i64 (wrapping arithmetic).
fn binary_int(op: BinaryOp, a: i64, b: i64) -> i64 {
    match op {
        BinaryOp::Add => a.wrapping_add(b),
        BinaryOp::Sub => a.wrapping_sub(b),
        BinaryOp::Mul => a.wrapping_mul(b),
        BinaryOp::Maximum => a.max(b),
        _ => a.min(b), // Minimum; Div and Pow are rejected for i64 before
    }
}

/// `op` on two operands of one shape and dtype, element by element.
pub(crate) fn binary(op: BinaryOp, lhs: HostData, rhs: HostData) -> Result<HostData> {
    let dtype = lhs.dtype();
    if rhs.dtype() != dtype {
        return Err(dtype_mismatch(op.name(), &lhs, &rhs));
    }
    if !op.supports(dtype) {
        return Err(unsupported(op.name(), dtype));
    }
    match (lhs, rhs) {
        (HostData::I64(mut a), HostData::I64(b)) => {
            for (x, &y) in a.iter_mut().zip(&b) {
                *x = binary_int(op, *x, y);
            }
            Ok(HostData::I64(a))
        }
        // Bool: mul and minimum are `and`, maximum is `or`.
        (HostData::Bool(mut a), HostData::Bool(b)) => {
            for (x, &y) in a.iter_mut().zip(&b) {
                *x = match op {
                    BinaryOp::Maximum => u8::from(*x != 0 || y != 0),
                    _ => u8::from(*x != 0 && y != 0),
                };
            }
            Ok(HostData::Bool(a))
        }
        (a, b) => {
            let (mut a, b) = (to_f64s(op.name(), &a)?, to_f64s(op.name(), &b)?);
            for (x, &y) in a.iter_mut().zip(&b) {
                *x = binary_float(op, *x, y);
            }
            from_f64s(dtype, a)
        }
    }
}

/// IEEE comparison: every comparison with NaN is false except `Ne`.
fn holds<T: PartialOrd>(op: CmpOp, a: T, b: T) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

/// `op(a, b)` element by element, as a bool vector.
pub(crate) fn compare(op: CmpOp, lhs: HostData, rhs: HostData) -> Result<HostData> {
    let out: Vec<u8> = match (&lhs, &rhs) {
        (HostData::F32(a), HostData::F32(b)) => zip_cmp(op, a, b)?,
        (HostData::F64(a), HostData::F64(b)) => zip_cmp(op, a, b)?,
        // `half`'s comparisons are IEEE's, NaN and -0 included.
        (HostData::F16(a), HostData::F16(b)) => zip_cmp(op, a, b)?,
        (HostData::BF16(a), HostData::BF16(b)) => zip_cmp(op, a, b)?,
        (HostData::I64(a), HostData::I64(b)) => zip_cmp(op, a, b)?,
        (HostData::Bool(a), HostData::Bool(b)) => zip_cmp(op, a, b)?,
        _ => return Err(dtype_mismatch(op.name(), &lhs, &rhs)),
    };
    Ok(HostData::Bool(out))
}

fn zip_cmp<T: PartialOrd + Copy>(op: CmpOp, a: &[T], b: &[T]) -> Result<Vec<u8>> {
    collect(
        a.len(),
        a.iter().zip(b).map(|(&x, &y)| u8::from(holds(op, x, y))),
    )
}

/// `cond ? on_true : on_false` element by element.
pub(crate) fn where_select(
    cond: HostData,
    on_true: HostData,
    on_false: HostData,
) -> Result<HostData> {
    let HostData::Bool(cond) = cond else {
        return Err(Error::DTypeMismatch {
            op: "where",
            lhs: cond.dtype(),
            rhs: DType::Bool,
        });
    };
    fn choose<T: Copy>(cond: &[u8], t: &[T], f: &[T]) -> Result<Vec<T>> {
        let picks = cond.iter().zip(t.iter().zip(f));
        collect(
            cond.len(),
            picks.map(|(&c, (&t, &f))| if c != 0 { t } else { f }),
        )
    }
    Ok(match (&on_true, &on_false) {
        (HostData::F32(t), HostData::F32(f)) => HostData::F32(choose(&cond, t, f)?),
        (HostData::F64(t), HostData::F64(f)) => HostData::F64(choose(&cond, t, f)?),
        (HostData::F16(t), HostData::F16(f)) => HostData::F16(choose(&cond, t, f)?),
        (HostData::BF16(t), HostData::BF16(f)) => HostData::BF16(choose(&cond, t, f)?),
        (HostData::I64(t), HostData::I64(f)) => HostData::I64(choose(&cond, t, f)?),
        (HostData::Bool(t), HostData::Bool(f)) => HostData::Bool(choose(&cond, t, f)?),
        _ => return Err(dtype_mismatch("where", &on_true, &on_false)),
    })
}

/// Every element converted to `to`: floats to i64 truncate toward zero, saturating, NaN to 0
/// (Rust's `as` does exactly that); anything to bool is `x != 0`. Conversions to the 16-bit
/// floats round once, to nearest even: from f32 with `half`'s `from_f32`, from f64 and i64 with
/// `tessera_core::dtype::rounding` (an i64 through f64 or f32 would round twice).
pub(crate) fn cast(x: HostData, to: DType) -> Result<HostData> {
    fn map<T: Copy, U>(v: &[T], f: impl Fn(T) -> U) -> Result<Vec<U>> {
        collect(v.len(), v.iter().map(|&x| f(x)))
    }
    // A 16-bit source is widened to f32 (exact), then cast like an f32.
    let x = match x {
        HostData::F16(v) if to != DType::F16 => HostData::F32(map(&v, f32::from)?),
        HostData::BF16(v) if to != DType::BF16 => HostData::F32(map(&v, f32::from)?),
        other => other,
    };
    Ok(match (x, to) {
        (HostData::F32(v), DType::F64) => HostData::F64(map(&v, |x| x as f64)?),
        (HostData::F32(v), DType::F16) => HostData::F16(map(&v, f16::from_f32)?),
        (HostData::F32(v), DType::BF16) => HostData::BF16(map(&v, bf16::from_f32)?),
        (HostData::F32(v), DType::I64) => HostData::I64(map(&v, |x| x as i64)?),
        (HostData::F32(v), DType::Bool) => HostData::Bool(map(&v, |x| u8::from(x != 0.0))?),
        (HostData::F64(v), DType::F32) => HostData::F32(map(&v, |x| x as f32)?),
        (HostData::F64(v), DType::F16) => HostData::F16(map(&v, f64_to_f16)?),
        (HostData::F64(v), DType::BF16) => HostData::BF16(map(&v, f64_to_bf16)?),
        (HostData::F64(v), DType::I64) => HostData::I64(map(&v, |x| x as i64)?),
        (HostData::F64(v), DType::Bool) => HostData::Bool(map(&v, |x| u8::from(x != 0.0))?),
        (HostData::I64(v), DType::F32) => HostData::F32(map(&v, |x| x as f32)?),
        (HostData::I64(v), DType::F64) => HostData::F64(map(&v, |x| x as f64)?),
        (HostData::I64(v), DType::F16) => HostData::F16(map(&v, i64_to_f16)?),
        (HostData::I64(v), DType::BF16) => HostData::BF16(map(&v, i64_to_bf16)?),
        (HostData::I64(v), DType::Bool) => HostData::Bool(map(&v, |x| u8::from(x != 0))?),
        (HostData::Bool(v), DType::F32) => HostData::F32(map(&v, f32::from)?),
        (HostData::Bool(v), DType::F64) => HostData::F64(map(&v, f64::from)?),
        (HostData::Bool(v), DType::F16) => HostData::F16(map(&v, f16::from)?),
        (HostData::Bool(v), DType::BF16) => HostData::BF16(map(&v, bf16::from)?),
        (HostData::Bool(v), DType::I64) => HostData::I64(map(&v, i64::from)?),
        (same, _) => same, // to its own dtype: the fresh copy read through the layout
    })
}
