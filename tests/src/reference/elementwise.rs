//! Element-wise reference ops: unary maps, broadcasting binary ops, comparisons, select, casts.
//!
//! Float results are computed in f64 and rounded once to the emulated dtype (so an f32 overflow
//! becomes `inf` as it does on a device); i64 results use wrapping i64 arithmetic.

use super::{views::broadcast_to, RefArray};
use tessera_core::{BinaryOp, CmpOp, DType, UnaryOp};

/// Rounds an exact f64 result to the nearest value of `dtype` (f32 and the 16-bit floats to
/// nearest even, i64 truncation with saturation and NaN to 0, bool `!= 0`), returned as f64
/// again.
pub fn round_to(dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 => x as f32 as f64,
        DType::F64 => x,
        DType::F16 => round_to_format(x, 11, -14, 15),
        DType::BF16 => round_to_format(x, 8, -126, 127),
        DType::I64 => (x as i64) as f64,
        DType::Bool => bool_f64(x != 0.0),
        other => panic!("reference: no rounding for {other}"),
    }
}

/// `x` rounded to nearest, ties to even, in a binary format with `p` significant bits and
/// normal exponents `emin..=emax` (subnormals below, infinity above), by f64 math alone: the
/// harness's own reference for the 16-bit floats, independent of the `half` crate and of
/// `tessera_core`'s conversions. Exact for every f64 `x` (the scaling by a power of two and
/// the rounding to an integer are exact in f64).
pub fn round_to_format(x: f64, p: i32, emin: i32, emax: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let a = x.abs();
    // floor(log2(a)) from the f64 exponent (f64 subnormals are far below either format).
    let e = ((a.to_bits() >> 52) as i32 - 1023).max(emin);
    let quantum = 2f64.powi(e - p + 1);
    let rounded = (a / quantum).round_ties_even() * quantum;
    let max_finite = (2.0 - 2f64.powi(1 - p)) * 2f64.powi(emax);
    let r = if rounded > max_finite {
        f64::INFINITY
    } else {
        rounded
    };
    r.copysign(x)
}

fn bool_f64(b: bool) -> f64 {
    if b {
        1.0
    } else {
        0.0
    }
}

/// `op(x)` for one element of `dtype`, from the definitions in `tessera_core::ops`.
pub fn unary_value(op: UnaryOp, dtype: DType, x: f64) -> f64 {
    match dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => round_to(dtype, unary_float(op, x)),
        DType::I64 => {
            let v = x as i64;
            let r = match op {
                UnaryOp::Neg => v.wrapping_neg(),
                UnaryOp::Abs => v.wrapping_abs(),
                UnaryOp::Sign => v.signum(),
                UnaryOp::Square => v.wrapping_mul(v),
                _ => panic!("reference: {op:?} is not defined for i64"),
            };
            r as f64
        }
        DType::Bool => match op {
            UnaryOp::Not => bool_f64(x == 0.0),
            _ => panic!("reference: {op:?} is not defined for bool"),
        },
        other => panic!("reference: no {op:?} for {other}"),
    }
}

fn unary_float(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x // ±0 and NaN are kept
            }
        }
        UnaryOp::Square => x * x,
        UnaryOp::Recip => 1.0 / x,
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        // NaN > 0 is false, so NaN is kept explicitly.
        UnaryOp::Relu => {
            if x > 0.0 || x.is_nan() {
                x
            } else {
                0.0
            }
        }
        UnaryOp::Gelu => 0.5 * x * (1.0 + libm::erf(x / std::f64::consts::SQRT_2)),
        UnaryOp::Erf => libm::erf(x),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Not => panic!("reference: logical_not is only defined for bool"),
    }
}

/// `op` applied to every element.
pub fn unary(op: UnaryOp, dtype: DType, x: &RefArray) -> RefArray {
    x.map(|v| unary_value(op, dtype, v))
}

/// The NumPy broadcast of two shapes (aligned from the right, equal or 1), or `None`.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> Option<Vec<usize>> {
    let rank = a.len().max(b.len());
    let dim = |s: &[usize], from_right: usize| {
        if from_right < s.len() {
            s[s.len() - 1 - from_right]
        } else {
            1
        }
    };
    let mut out = vec![0; rank];
    for (i, o) in out.iter_mut().enumerate() {
        let from_right = rank - 1 - i;
        let (x, y) = (dim(a, from_right), dim(b, from_right));
        *o = if x == y || y == 1 {
            x
        } else if x == 1 {
            y
        } else {
            return None;
        };
    }
    Some(out)
}

/// `op(a, b)` for one pair of elements of `dtype`.
pub fn binary_value(op: BinaryOp, dtype: DType, a: f64, b: f64) -> f64 {
    match dtype {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
            let r = match op {
                BinaryOp::Add => a + b,
                BinaryOp::Sub => a - b,
                BinaryOp::Mul => a * b,
                BinaryOp::Div => a / b,
                BinaryOp::Pow => a.powf(b),
                BinaryOp::Maximum => nan_or(a, b, if a >= b { a } else { b }),
                BinaryOp::Minimum => nan_or(a, b, if a <= b { a } else { b }),
            };
            round_to(dtype, r)
        }
        DType::I64 => {
            let (x, y) = (a as i64, b as i64);
            let r = match op {
                BinaryOp::Add => x.wrapping_add(y),
                BinaryOp::Sub => x.wrapping_sub(y),
                BinaryOp::Mul => x.wrapping_mul(y),
                BinaryOp::Maximum => x.max(y),
                BinaryOp::Minimum => x.min(y),
                BinaryOp::Div | BinaryOp::Pow => panic!("reference: {op:?} is not defined for i64"),
            };
            r as f64
        }
        DType::Bool => {
            let (x, y) = (a != 0.0, b != 0.0);
            bool_f64(match op {
                BinaryOp::Mul | BinaryOp::Minimum => x && y,
                BinaryOp::Maximum => x || y,
                _ => panic!("reference: {op:?} is not defined for bool"),
            })
        }
        other => panic!("reference: no {op:?} for {other}"),
    }
}

/// NaN when either operand is NaN, `otherwise` else.
fn nan_or(a: f64, b: f64, otherwise: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        otherwise
    }
}

/// Applies `f` to the two operands broadcast to their common shape. Panics when the shapes are
/// incompatible (the reference is only called on valid inputs).
pub fn zip_broadcast(a: &RefArray, b: &RefArray, f: impl Fn(f64, f64) -> f64) -> RefArray {
    let shape = broadcast_shapes(&a.shape, &b.shape).unwrap_or_else(|| {
        panic!(
            "reference: {:?} and {:?} do not broadcast",
            a.shape, b.shape
        )
    });
    let (a, b) = (broadcast_to(a, &shape), broadcast_to(b, &shape));
    RefArray::new(
        shape,
        a.data.iter().zip(&b.data).map(|(&x, &y)| f(x, y)).collect(),
    )
}

/// `op(a, b)` with NumPy broadcasting.
pub fn binary(op: BinaryOp, dtype: DType, a: &RefArray, b: &RefArray) -> RefArray {
    zip_broadcast(a, b, |x, y| binary_value(op, dtype, x, y))
}

/// IEEE comparison of two elements (every comparison with NaN is false except `Ne`).
pub fn compare_value(op: CmpOp, a: f64, b: f64) -> bool {
    match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    }
}

/// `op(a, b)` with broadcasting, as 0/1.
pub fn compare(op: CmpOp, a: &RefArray, b: &RefArray) -> RefArray {
    zip_broadcast(a, b, |x, y| bool_f64(compare_value(op, x, y)))
}

/// `cond ? on_true : on_false` with three-way broadcasting.
pub fn where_select(cond: &RefArray, on_true: &RefArray, on_false: &RefArray) -> RefArray {
    let shape = broadcast_shapes(&cond.shape, &on_true.shape)
        .and_then(|s| broadcast_shapes(&s, &on_false.shape))
        .expect("reference: where operands do not broadcast");
    let c = broadcast_to(cond, &shape);
    let t = broadcast_to(on_true, &shape);
    let f = broadcast_to(on_false, &shape);
    let data = (0..c.numel())
        .map(|i| {
            if c.data[i] != 0.0 {
                t.data[i]
            } else {
                f.data[i]
            }
        })
        .collect();
    RefArray::new(shape, data)
}

/// One element of dtype `to` converted from a value: floats to i64 truncate toward zero,
/// saturating, NaN to 0; anything to bool is `x != 0` (so NaN is true); to f32 rounds.
pub fn cast_value(to: DType, x: f64) -> f64 {
    match to {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => round_to(to, x),
        DType::I64 => {
            if x.is_nan() {
                0.0
            } else if x >= 9_223_372_036_854_775_807.0 {
                i64::MAX as f64
            } else if x <= -9_223_372_036_854_775_808.0 {
                i64::MIN as f64
            } else {
                x.trunc()
            }
        }
        DType::Bool => bool_f64(x != 0.0),
        other => panic!("reference: no cast to {other}"),
    }
}

/// Every element converted to `to`.
pub fn cast(x: &RefArray, to: DType) -> RefArray {
    x.map(|v| cast_value(to, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        assert_eq!(
            unary_value(UnaryOp::Sign, DType::F32, -0.0).to_bits(),
            (-0.0f64).to_bits()
        );
        assert!(unary_value(UnaryOp::Relu, DType::F64, f64::NAN).is_nan());
        assert_eq!(unary_value(UnaryOp::Exp, DType::F32, 100.0), f64::INFINITY);
        assert!(
            (unary_value(UnaryOp::Gelu, DType::F64, 1.0) - 0.841_344_746_068_542_9).abs() < 1e-15
        );
        assert_eq!(
            binary_value(BinaryOp::Add, DType::I64, i64::MAX as f64, 1.0),
            i64::MIN as f64
        );
        assert!(binary_value(BinaryOp::Maximum, DType::F32, f64::NAN, 1.0).is_nan());
        assert_eq!(cast_value(DType::I64, -2.7), -2.0);
        assert_eq!(cast_value(DType::I64, 1e30), i64::MAX as f64);
        assert_eq!(cast_value(DType::Bool, f64::NAN), 1.0);
        assert_eq!(broadcast_shapes(&[3, 1, 5], &[4, 5]), Some(vec![3, 4, 5]));
        assert_eq!(broadcast_shapes(&[2, 3], &[4]), None);
    }

    /// `x` rounded to nearest even in the format `(p, emin, emax)` with integer operations on
    /// the bits of `x` alone (no f64 arithmetic on the value): a second, independent
    /// derivation of the rounding the cast references rely on.
    fn round_by_bits(x: f64, p: i32, emin: i32, emax: i32) -> f64 {
        if x == 0.0 || !x.is_finite() {
            return x;
        }
        let bits = x.abs().to_bits();
        let field = (bits >> 52) as i32;
        let fraction = bits & ((1u64 << 52) - 1);
        // |x| = m * 2^e with an integer m.
        let (m, e) = if field == 0 {
            (fraction, -1074)
        } else {
            (fraction | (1u64 << 52), field - 1075)
        };
        let log2 = e + 63 - m.leading_zeros() as i32;
        // The exponent of the target's last significant bit at this magnitude.
        let q = log2.max(emin) - p + 1;
        let shift = q - e;
        let kept = if shift <= 0 {
            return x;
        } else if shift > 60 {
            0 // m < 2^53 is below half of 2^shift: rounds to zero
        } else {
            let kept = m >> shift;
            let rest = m & ((1u64 << shift) - 1);
            let half = 1u64 << (shift - 1);
            if rest > half || (rest == half && kept & 1 == 1) {
                kept + 1
            } else {
                kept
            }
        };
        // kept * 2^q, built from bits: the value kept has at most p + 1 bits.
        let scale = |v: u64, q: i32| {
            if v == 0 {
                return 0.0;
            }
            let top = 63 - v.leading_zeros() as i32; // v = 1.f * 2^top
            let exp = top + q;
            if exp > emax {
                return f64::INFINITY;
            }
            // Normal in f64 for every format here but f64 itself, which has no rounding.
            let frac = (v << (52 - top)) & ((1u64 << 52) - 1);
            f64::from_bits((((exp + 1023) as u64) << 52) | frac)
        };
        scale(kept, q).copysign(x)
    }

    /// A deterministic stream of f64 bit patterns (splitmix64).
    fn stream(mut state: u64) -> impl Iterator<Item = u64> {
        std::iter::from_fn(move || {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            Some(z ^ (z >> 31))
        })
    }

    /// The rounding of the cast references (`round_to_format` for the 16-bit floats, Rust's
    /// `as f32`) agrees with the bit-level derivation on every 16-bit tie and the f64 values one
    /// ulp either side, on both neighbours, and on random f64 values of every magnitude those
    /// formats reach; and gives the known results at the limits.
    #[test]
    fn cast_rounding_is_correct() {
        let formats = [
            (DType::F16, 11, -14, 15),
            (DType::BF16, 8, -126, 127),
            (DType::F32, 24, -126, 127),
        ];
        let check = |x: f64| {
            for (dtype, p, emin, emax) in formats {
                let want = round_by_bits(x, p, emin, emax);
                let got = round_to(dtype, x);
                assert_eq!(
                    got.to_bits(),
                    want.to_bits(),
                    "{dtype} {x:e} ({:#x})",
                    x.to_bits()
                );
            }
        };
        // Every finite 16-bit value, the tie above it and one f64 ulp either side of both.
        for (p, emin, fields) in [(11, -14, 31u64), (8, -126, 255)] {
            for field in 0..fields {
                for fraction in 0..(1u64 << (p - 1)) {
                    let (sig, e) = if field == 0 {
                        (fraction, emin - p + 1)
                    } else {
                        (fraction | (1 << (p - 1)), field as i32 + emin - 1 - p + 1)
                    };
                    let v = sig as f64 * 2f64.powi(e);
                    let tie = v + 2f64.powi(e) / 2.0; // 2^e is the spacing above v
                    for y in [v, tie] {
                        let below = if y > 0.0 {
                            f64::from_bits(y.to_bits() - 1)
                        } else {
                            y
                        };
                        for z in [y, f64::from_bits(y.to_bits() + 1), below] {
                            check(z);
                            check(-z);
                        }
                    }
                }
            }
        }
        // Random f64 values from below f32's subnormals to beyond its range.
        for bits in stream(7).take(100_000) {
            let x = f64::from_bits(bits);
            let exp = ((bits >> 52) & 0x7ff) as i32 - 1023;
            if x.is_finite() && (-160..=130).contains(&exp) {
                check(x);
            }
            // The same significand brought into f32's subnormals and the 16-bit ranges.
            for e in [-140i64, -130, -20, -10, 0, 10, 15, 16] {
                let y =
                    f64::from_bits((bits & 0x800f_ffff_ffff_ffff) | (((e + 1023) as u64) << 52));
                check(y);
            }
        }
        // Known results.
        let f16 = |x: f64| round_to(DType::F16, x);
        let bf16 = |x: f64| round_to(DType::BF16, x);
        assert_eq!(f16(2f64.powi(-25)), 0.0); // half the smallest subnormal: to even, 0
        assert_eq!(f16(2f64.powi(-25) * (1.0 + 2f64.powi(-52))), 2f64.powi(-24));
        assert_eq!(f16(3.0 * 2f64.powi(-25)), 2.0 * 2f64.powi(-24)); // 1.5 ulp: to even
        assert_eq!(f16(65519.999), 65504.0);
        assert_eq!(f16(65520.0), f64::INFINITY);
        assert_eq!(f16(-65520.0), f64::NEG_INFINITY);
        assert_eq!(f16(1.0 + 2f64.powi(-11)), 1.0);
        assert_eq!(
            f16(1.0 + 2f64.powi(-11) + 2f64.powi(-52)),
            1.0 + 2f64.powi(-10)
        );
        assert_eq!(bf16(1.0 + 2f64.powi(-8)), 1.0);
        assert_eq!(
            bf16(1.0 + 2f64.powi(-8) + 2f64.powi(-40)),
            1.0 + 2f64.powi(-7)
        );
        assert_eq!(bf16(2f64.powi(-134)), 0.0);
        assert_eq!(bf16(2f64.powi(-134) * 1.5), 2f64.powi(-133));
        assert_eq!(bf16(f64::from(f32::MAX)), f64::INFINITY);
        assert_eq!(round_to(DType::F32, 2f64.powi(-150)), 0.0);
        assert_eq!(round_to(DType::F32, 2f64.powi(-150) * 1.5), 2f64.powi(-149));
    }
}
