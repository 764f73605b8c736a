//! Element-wise maps of one operand ([`UnaryOp`]).

use super::map::map1;
use super::vector_math;
use crate::alloc::Zeroable;
use crate::checks::unsupported;
use crate::CpuStorage;
use tessera_core::{BackendStorage, Element, FloatElement, Layout, Result, UnaryOp};

/// Applies `op` to every element of `x` (dtype support as in [`UnaryOp::supports`]).
pub(crate) fn unary(op: UnaryOp, x: &CpuStorage, layout: &Layout) -> Result<CpuStorage> {
    if !op.supports(x.dtype()) {
        return Err(unsupported(op.name(), x.dtype()));
    }
    Ok(match x {
        CpuStorage::F32(v) => CpuStorage::F32(match op {
            // In vector arithmetic (see `vector_math`): the C library's `expf` and `erff` are
            // scalar calls that keep the loop one element at a time.
            UnaryOp::Exp => map1(v, layout, vector_math::exp)?,
            UnaryOp::Gelu => map1(v, layout, |v: f32| v * vector_math::normal_cdf(v))?,
            UnaryOp::Tanh => map1(v, layout, vector_math::tanh)?,
            _ => unary_float(op, v, layout)?,
        }),
        CpuStorage::F64(v) => CpuStorage::F64(unary_float(op, v, layout)?),
        CpuStorage::I64(v) => CpuStorage::I64(unary_int(op, v, layout)?),
        CpuStorage::Bool(v) => CpuStorage::Bool(map1(v, layout, |b: u8| u8::from(b == 0))?),
        // The 16-bit floats are widened to f32 before they get here (`tessera_core::dispatch`).
        other => return Err(unsupported(op.name(), other.dtype())),
    })
}

/// The float ops (f32 exp, tanh and GELU take the vector versions above). Sigmoid evaluates `e^x / (1 + e^x)` for negative `x` so that neither branch
/// overflows; ReLU keeps NaN; GELU is the exact erf form.
fn unary_float<T: FloatElement + Zeroable>(op: UnaryOp, x: &[T], l: &Layout) -> Result<Vec<T>> {
    let zero = T::zero();
    let one = T::one();
    match op {
        UnaryOp::Neg => map1(x, l, |v: T| -v),
        UnaryOp::Abs => map1(x, l, |v: T| v.abs()),
        UnaryOp::Sign => map1(x, l, |v: T| {
            if v > zero {
                one
            } else if v < zero {
                -one
            } else {
                v
            }
        }),
        UnaryOp::Square => map1(x, l, |v: T| v * v),
        UnaryOp::Recip => map1(x, l, |v: T| one / v),
        UnaryOp::Sqrt => map1(x, l, |v: T| v.sqrt()),
        UnaryOp::Exp => map1(x, l, |v: T| v.exp()),
        UnaryOp::Log => map1(x, l, |v: T| v.ln()),
        UnaryOp::Sin => map1(x, l, |v: T| v.sin()),
        UnaryOp::Cos => map1(x, l, |v: T| v.cos()),
        UnaryOp::Tanh => map1(x, l, |v: T| v.tanh()),
        UnaryOp::Sigmoid => map1(x, l, |v: T| {
            if v >= zero {
                one / (one + (-v).exp())
            } else {
                let e = v.exp();
                e / (one + e)
            }
        }),
        UnaryOp::Relu => map1(x, l, |v: T| if v > zero || v.is_nan() { v } else { zero }),
        UnaryOp::Gelu => {
            let half = <T as Element>::from_f64(0.5);
            let inv_sqrt2 = T::FRAC_1_SQRT_2();
            map1(x, l, move |v: T| half * v * (one + (v * inv_sqrt2).erf()))
        }
        UnaryOp::Erf => map1(x, l, |v: T| v.erf()),
        UnaryOp::Floor => map1(x, l, |v: T| v.floor()),
        UnaryOp::Ceil => map1(x, l, |v: T| v.ceil()),
        UnaryOp::Not => Err(unsupported(op.name(), T::DTYPE)),
    }
}

/// The integer ops; negation, absolute value and squaring wrap like the other i64 arithmetic.
fn unary_int(op: UnaryOp, x: &[i64], l: &Layout) -> Result<Vec<i64>> {
    match op {
        UnaryOp::Neg => map1(x, l, i64::wrapping_neg),
        UnaryOp::Abs => map1(x, l, i64::wrapping_abs),
        UnaryOp::Sign => map1(x, l, i64::signum),
        UnaryOp::Square => map1(x, l, |v: i64| v.wrapping_mul(v)),
        _ => Err(unsupported(op.name(), i64::DTYPE)),
    }
}
