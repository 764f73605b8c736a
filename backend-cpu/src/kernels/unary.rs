//! Element-wise maps of one operand ([`UnaryOp`]).

use super::lanes::Lane;
use super::map::map1;
use super::vector_math;
use crate::checks::unsupported;
use crate::CpuStorage;
use tessera_core::{BackendStorage, Element, FloatElement, Layout, Result, UnaryOp};

/// Applies `op` to every element of `x` (dtype support as in [`UnaryOp::supports`]).
pub(crate) fn unary(op: UnaryOp, x: &CpuStorage, layout: &Layout) -> Result<CpuStorage> {
    if !op.supports(x.dtype()) {
        return Err(unsupported(op.name(), x.dtype()));
    }
    Ok(match x {
        CpuStorage::F32(v) => CpuStorage::F32(unary_f32(op, v, layout)?),
        CpuStorage::F64(v) => CpuStorage::F64(unary_float::<f64, f64>(op, v, layout)?),
        // In f32 lanes, rounded once per element (the result tensor-core's widening gives).
        CpuStorage::BF16(v) => CpuStorage::BF16(unary_f32(op, v, layout)?),
        CpuStorage::I64(v) => CpuStorage::I64(unary_int(op, v, layout)?),
        CpuStorage::Bool(v) => CpuStorage::Bool(map1(v, layout, |b: u8| u8::from(b == 0))?),
        // F16 is widened to f32 before it gets here (`tessera_core::dispatch`).
        other => return Err(unsupported(op.name(), other.dtype())),
    })
}

/// The ops on values computed in f32 (stored as `S`, see [`Lane`]). Exp, tanh, sigmoid and
/// GELU take the vector versions of `vector_math`: the C library's `expf` and `erff` are
/// scalar calls that keep the loop one element at a time.
fn unary_f32<S: Lane<f32>>(op: UnaryOp, x: &[S], l: &Layout) -> Result<Vec<S>> {
    match op {
        UnaryOp::Exp => map1(x, l, |v: S| S::store(vector_math::exp(v.load()))),
        UnaryOp::Gelu => map1(x, l, |v: S| {
            let v = v.load();
            S::store(v * vector_math::normal_cdf(v))
        }),
        UnaryOp::Tanh => map1(x, l, |v: S| S::store(vector_math::tanh(v.load()))),
        UnaryOp::Sigmoid => map1(x, l, |v: S| S::store(vector_math::sigmoid(v.load()))),
        _ => unary_float::<f32, S>(op, x, l),
    }
}

/// The float ops computed in `T` (f32 exp, tanh, sigmoid and GELU take the vector versions
/// above).
/// Sigmoid evaluates `e^x / (1 + e^x)` for negative `x` so that neither branch overflows; ReLU
/// keeps NaN; GELU is the exact erf form.
fn unary_float<T: FloatElement, S: Lane<T>>(op: UnaryOp, x: &[S], l: &Layout) -> Result<Vec<S>> {
    // `f` in the computation's type, each value loaded and stored through the lane (a macro,
    // not a closure taking `f`, so that `f` is inlined into the loop).
    macro_rules! map {
        ($f:expr) => {{
            let f = $f;
            map1(x, l, move |v: S| S::store(f(v.load())))
        }};
    }
    let zero = T::zero();
    let one = T::one();
    match op {
        UnaryOp::Neg => map!(|v: T| -v),
        UnaryOp::Abs => map!(|v: T| v.abs()),
        UnaryOp::Sign => map!(|v: T| {
            if v > zero {
                one
            } else if v < zero {
                -one
            } else {
                v
            }
        }),
        UnaryOp::Square => map!(|v: T| v * v),
        UnaryOp::Recip => map!(|v: T| one / v),
        UnaryOp::Sqrt => map!(|v: T| v.sqrt()),
        UnaryOp::Exp => map!(|v: T| v.exp()),
        UnaryOp::Log => map!(|v: T| v.ln()),
        UnaryOp::Sin => map!(|v: T| v.sin()),
        UnaryOp::Cos => map!(|v: T| v.cos()),
        UnaryOp::Tanh => map!(|v: T| v.tanh()),
        UnaryOp::Sigmoid => map!(|v: T| {
            if v >= zero {
                one / (one + (-v).exp())
            } else {
                let e = v.exp();
                e / (one + e)
            }
        }),
        UnaryOp::Relu => map!(|v: T| if v > zero || v.is_nan() { v } else { zero }),
        UnaryOp::Gelu => {
            let half = <T as Element>::from_f64(0.5);
            let inv_sqrt2 = T::FRAC_1_SQRT_2();
            map!(move |v: T| half * v * (one + (v * inv_sqrt2).erf()))
        }
        UnaryOp::Erf => map!(|v: T| v.erf()),
        UnaryOp::Floor => map!(|v: T| v.floor()),
        UnaryOp::Ceil => map!(|v: T| v.ceil()),
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
