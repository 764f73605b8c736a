//! How far a float result may be from its reference: the tolerances of the conformance harness
//! (`tests` crate) and of [`crate::Checked`], defined once here.

use tessera_core::{BinaryOp, DType, UnaryOp};

/// How far a float result may be from the reference: `|got - expected| <= abs + rel * scale`,
/// where `scale` is `|expected|`, or for accumulating ops a per-element magnitude (e.g. the sum
/// of `|a_ik * b_kj|` for matmul), which bounds rounding error even under cancellation.
///
/// NaN must match NaN, an infinity must match the same infinity, and a finite expected value
/// needs a finite result. Integer and bool dtypes are always compared exactly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute slack.
    pub abs: f64,
    /// Relative slack, multiplied by the scale of the element.
    pub rel: f64,
    /// When true, `+0` and `-0` are told apart (for ops documented to keep the sign of zero).
    pub signed_zero: bool,
}

/// Unit roundoff of f32 (2^-24).
pub const F32_EPS: f64 = 5.960_464_477_539_063e-8;
/// Unit roundoff of f64 (2^-53).
pub const F64_EPS: f64 = 1.110_223_024_625_156_5e-16;
/// The smallest normal f32 (2^-126): below it a device may flush a result to zero.
pub const F32_MIN_NORMAL: f64 = 1.175_494_350_822_287_5e-38;
/// Unit roundoff of f16 (2^-11).
pub const F16_EPS: f64 = 4.882_812_5e-4;
/// Unit roundoff of bf16 (2^-8).
pub const BF16_EPS: f64 = 3.906_25e-3;
/// The smallest normal f16 (2^-14). bf16's is f32's.
pub const F16_MIN_NORMAL: f64 = 6.103_515_625e-5;

/// The 16-bit floats are storage formats computed in f32 (the contract of every backend that
/// supports them, see [`DType::compute_dtype`]): a result is the f32 result rounded once, so
/// its tolerance is the f32 one plus one ulp of the 16-bit format (`2u`: half an ulp for the
/// rounding and as much again for an f32 error that pushes a value across a rounding
/// boundary), with the format's smallest normal number as the absolute slack.
fn sixteen_bit(dtype: DType, f32_tolerance: Tolerance) -> Tolerance {
    let (u, min_normal) = match dtype {
        DType::F16 => (F16_EPS, F16_MIN_NORMAL),
        _ => (BF16_EPS, F32_MIN_NORMAL),
    };
    Tolerance::loose(min_normal, 2.0 * u + f32_tolerance.rel)
}

impl Tolerance {
    /// The tolerance of a 16-bit result computed in f32 with `f32_tolerance` and rounded once
    /// to `dtype` (F16 or BF16): one ulp of the 16-bit format on top of the f32 error, as for
    /// every 16-bit op of [`Tolerance::simple`], [`Tolerance::transcendental`] and
    /// [`Tolerance::accumulation`]. For ops whose f32 error needs its own bound (attention).
    pub fn sixteen_bit(dtype: DType, f32_tolerance: Tolerance) -> Tolerance {
        sixteen_bit(dtype, f32_tolerance)
    }

    /// Bit-exact (up to NaN payloads), with the sign of zero checked.
    pub const EXACT: Tolerance = Tolerance {
        abs: 0.0,
        rel: 0.0,
        signed_zero: true,
    };

    /// Equal values, either sign of zero: for results that are one of the inputs (max, min,
    /// copies, selections) or exact by definition (comparisons, casts, indices).
    pub const SAME_VALUE: Tolerance = Tolerance {
        abs: 0.0,
        rel: 0.0,
        signed_zero: false,
    };

    /// Simple maps and arithmetic (neg, add, div, sqrt, floor, ...), correctly rounded or
    /// nearly so on every IEEE device (OpenCL allows 2.5 ulp for an f32 division and 3 for an
    /// f32 square root): 4 ulp, `rel = 8 * eps` (f32 `4.8e-7`, f64 `8.9e-16`). The absolute
    /// slack is the smallest normal number, so that a device may flush subnormal results to
    /// zero, and nothing more: an absolute slack such as `1e-5` would accept any wrong value
    /// below it.
    pub fn simple(dtype: DType) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance::loose(F32_MIN_NORMAL, 8.0 * F32_EPS),
            DType::F64 => Tolerance::loose(f64::MIN_POSITIVE, 8.0 * F64_EPS),
            DType::F16 | DType::BF16 => sixteen_bit(dtype, Tolerance::simple(DType::F32)),
            _ => Tolerance::EXACT,
        }
    }

    /// Transcendental maps (exp, log, sin, tanh, sigmoid, gelu, erf, pow), whose device versions
    /// are accurate to a few ulps but not correctly rounded (OpenCL allows up to 16 ulp for
    /// `pow` and `erf`): 64 ulp, `rel = 128 * eps` (f32 `7.6e-6`, f64 `1.4e-14`), relative to the
    /// result (or to an op's magnitude where a formula cancels, e.g. gelu's `|x| / 2`). The
    /// absolute slack is the smallest normal number, as for [`Tolerance::simple`].
    pub fn transcendental(dtype: DType) -> Tolerance {
        match dtype {
            DType::F32 => Tolerance::loose(F32_MIN_NORMAL, 128.0 * F32_EPS),
            DType::F64 => Tolerance::loose(f64::MIN_POSITIVE, 128.0 * F64_EPS),
            DType::F16 | DType::BF16 => sixteen_bit(dtype, Tolerance::transcendental(DType::F32)),
            _ => Tolerance::EXACT,
        }
    }

    /// Ops that accumulate `terms` products or sums (reductions, matmul, convolution, pooling):
    /// the classic bound `terms * eps * sum|term|`, with a factor 4 of headroom, on top of the
    /// simple tolerance. Use with a per-element magnitude (`sum|term|`) as the scale. The
    /// 16-bit floats accumulate in f32, so their `eps` here is f32's.
    pub fn accumulation(dtype: DType, terms: usize) -> Tolerance {
        let base = Tolerance::simple(dtype);
        let eps = match dtype {
            DType::F32 | DType::F16 | DType::BF16 => F32_EPS,
            DType::F64 => F64_EPS,
            _ => return Tolerance::EXACT,
        };
        Tolerance::loose(base.abs, base.rel + 4.0 * (terms.max(1) as f64) * eps)
    }

    /// The tolerance of a unary map between two backends: exact for maps whose result is
    /// determined bit for bit (neg, abs, sign, relu, floor, ceil, not), simple for the
    /// correctly rounded ones (square, recip, sqrt), transcendental for the rest.
    pub fn of_unary(op: UnaryOp, dtype: DType) -> Tolerance {
        match op {
            UnaryOp::Neg
            | UnaryOp::Abs
            | UnaryOp::Sign
            | UnaryOp::Relu
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Not => Tolerance::SAME_VALUE,
            UnaryOp::Square | UnaryOp::Recip | UnaryOp::Sqrt => Tolerance::simple(dtype),
            UnaryOp::Exp
            | UnaryOp::Log
            | UnaryOp::Sin
            | UnaryOp::Cos
            | UnaryOp::Tanh
            | UnaryOp::Sigmoid
            | UnaryOp::Gelu
            | UnaryOp::Erf => Tolerance::transcendental(dtype),
        }
    }

    /// The tolerance of a binary op between two backends: exact for maximum and minimum,
    /// transcendental for pow, simple for arithmetic.
    pub fn of_binary(op: BinaryOp, dtype: DType) -> Tolerance {
        match op {
            BinaryOp::Maximum | BinaryOp::Minimum => Tolerance::SAME_VALUE,
            BinaryOp::Pow => Tolerance::transcendental(dtype),
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::Mul | BinaryOp::Div => {
                Tolerance::simple(dtype)
            }
        }
    }

    /// A float tolerance that does not check the sign of zero.
    pub fn loose(abs: f64, rel: f64) -> Tolerance {
        Tolerance {
            abs,
            rel,
            signed_zero: false,
        }
    }

    /// The same tolerance with the sign of zero checked.
    pub fn with_signed_zero(self) -> Tolerance {
        Tolerance {
            signed_zero: true,
            ..self
        }
    }

    /// The same tolerance with both slacks multiplied by `factor` (for a device whose math
    /// library is known to be less accurate).
    pub fn scaled(self, factor: f64) -> Tolerance {
        Tolerance {
            abs: self.abs * factor,
            rel: self.rel * factor,
            ..self
        }
    }

    /// The largest difference allowed for an element whose reference is `expected` and whose
    /// magnitude is `scale`.
    pub fn allowed(&self, expected: f64, scale: f64) -> f64 {
        self.abs + self.rel * scale.abs().max(expected.abs())
    }
}

/// Checks one element; `Err` holds a short reason.
pub fn check_value(got: f64, expected: f64, scale: f64, tol: Tolerance) -> Result<(), String> {
    if expected.is_nan() {
        return if got.is_nan() {
            Ok(())
        } else {
            Err("expected NaN".into())
        };
    }
    if expected.is_infinite() {
        return if got == expected {
            Ok(())
        } else {
            Err("expected an infinity of that sign".into())
        };
    }
    if !got.is_finite() {
        return Err("expected a finite value".into());
    }
    if tol.signed_zero
        && got == 0.0
        && expected == 0.0
        && got.is_sign_negative() != expected.is_sign_negative()
    {
        return Err("sign of zero differs".into());
    }
    let allowed = tol.allowed(expected, scale);
    if (got - expected).abs() > allowed {
        return Err(format!(
            "difference {:e} exceeds {:e}",
            (got - expected).abs(),
            allowed
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_values_and_tolerances() {
        let t = Tolerance::simple(DType::F32);
        assert!(check_value(f64::NAN, f64::NAN, 0.0, t).is_ok());
        assert!(check_value(1.0, f64::NAN, 0.0, t).is_err());
        assert!(check_value(f64::INFINITY, f64::INFINITY, 0.0, t).is_ok());
        assert!(check_value(f64::NEG_INFINITY, f64::INFINITY, 0.0, t).is_err());
        assert!(check_value(f64::NAN, 1.0, 0.0, t).is_err());
        // 4 ulp of f32 pass, 16 do not; no absolute slack hides a wrong small value.
        assert!(check_value(1.0 + 8.0 * F32_EPS, 1.0, 0.0, t).is_ok());
        assert!(check_value(1.0 + 32.0 * F32_EPS, 1.0, 0.0, t).is_err());
        assert!(check_value(1e-7, 0.0, 0.0, t).is_err());
        assert!(check_value(1e-39, 0.0, 0.0, t).is_ok()); // a flushed subnormal
        assert!(check_value(-0.0, 0.0, 0.0, t).is_ok());
        assert!(check_value(-0.0, 0.0, 0.0, Tolerance::EXACT).is_err());
        assert!(check_value(-0.0, 0.0, 0.0, Tolerance::SAME_VALUE).is_ok());
        // A magnitude widens the relative slack under cancellation.
        assert!(check_value(1e-3, 0.0, 100.0, Tolerance::accumulation(DType::F32, 100)).is_ok());
        assert!(check_value(1e-3, 0.0, 0.0, Tolerance::accumulation(DType::F32, 100)).is_err());
        // Scaling loosens both slacks.
        assert!(check_value(1.0 + 32.0 * F32_EPS, 1.0, 0.0, t.scaled(20.0)).is_ok());
    }

    #[test]
    fn per_op_tolerances() {
        assert_eq!(
            Tolerance::of_unary(UnaryOp::Relu, DType::F32),
            Tolerance::SAME_VALUE
        );
        assert_eq!(
            Tolerance::of_unary(UnaryOp::Exp, DType::F64),
            Tolerance::transcendental(DType::F64)
        );
        assert_eq!(
            Tolerance::of_binary(BinaryOp::Add, DType::F32),
            Tolerance::simple(DType::F32)
        );
        assert_eq!(Tolerance::simple(DType::I64), Tolerance::EXACT);
    }
}
