//! Correctly rounded conversions to the 16-bit floats: one rounding to nearest, ties to even,
//! from every source dtype.
//!
//! `half`'s `from_f32` rounds correctly, but its `from_f64` ignores the low 32 bits of the f64
//! (a value just above a tie can round down), and going `i64 -> f32 -> f16` rounds twice. Both
//! are fixed the standard way: first round to f32 *to odd* (truncate, then set the last bit
//! when anything was dropped), then to the 16-bit format to nearest even. Rounding to odd at a
//! precision of at least `p + 2` bits keeps the information the final rounding to `p` bits
//! needs, so the composition is a single correct rounding (Boldo and Melquiond, "When double
//! rounding is odd", 2005); f32's 24 bits exceed bf16's 8 + 2 and f16's 11 + 2, and f32's
//! exponent range covers both formats' subnormals.

use half::{bf16, f16};

/// `x` rounded to f32 toward zero, with the last significand bit set when the rounding was
/// inexact (round to odd). NaN stays NaN; magnitudes beyond f32's range give `±f32::MAX` with
/// its odd last bit, which the final rounding still sends to infinity.
pub fn f64_to_f32_round_to_odd(x: f64) -> f32 {
    let nearest = x as f32;
    if x.is_nan() || f64::from(nearest) == x {
        return nearest;
    }
    // `nearest` is the f32 next to `x` on one side; step back toward zero when it lies beyond.
    let truncated = if f64::from(nearest).abs() > x.abs() {
        f32::from_bits(nearest.to_bits() - 1)
    } else {
        nearest
    };
    f32::from_bits(truncated.to_bits() | 1)
}

/// `x` rounded to f32 to odd, exactly from the integer (no intermediate f64 rounding).
pub fn i64_to_f32_round_to_odd(x: i64) -> f32 {
    let magnitude = x.unsigned_abs();
    let bits = u64::BITS - magnitude.leading_zeros();
    let value = if bits <= f32::MANTISSA_DIGITS {
        magnitude as f32
    } else {
        let shift = bits - f32::MANTISSA_DIGITS;
        let mut kept = magnitude >> shift;
        if magnitude & ((1u64 << shift) - 1) != 0 {
            kept |= 1;
        }
        // Exact: `kept` has 24 bits and the scale is a power of two.
        kept as f32 * 2f32.powi(shift as i32)
    };
    if x < 0 {
        -value
    } else {
        value
    }
}

/// `x` as f16, rounded once to nearest even.
pub fn f64_to_f16(x: f64) -> f16 {
    f16::from_f32(f64_to_f32_round_to_odd(x))
}

/// `x` as bf16, rounded once to nearest even.
pub fn f64_to_bf16(x: f64) -> bf16 {
    bf16::from_f32(f64_to_f32_round_to_odd(x))
}

/// `x` as f16, rounded once to nearest even (beyond ±65519 it is infinite).
pub fn i64_to_f16(x: i64) -> f16 {
    f16::from_f32(i64_to_f32_round_to_odd(x))
}

/// `x` as bf16, rounded once to nearest even.
pub fn i64_to_bf16(x: i64) -> bf16 {
    bf16::from_f32(i64_to_f32_round_to_odd(x))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The correctly rounded value of `x` among the finite 16-bit values and infinity, found by
    /// brute force: the nearest of all positive values of the format (ties to the even bit
    /// pattern), with the overflow threshold of IEEE rounding (half an ulp above the largest
    /// finite value rounds to infinity).
    fn brute_force(x: f64, to_f64: impl Fn(u16) -> f64, inf_bits: u16) -> u16 {
        let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
        let a = x.abs();
        let max_bits = inf_bits - 1;
        let max = to_f64(max_bits);
        let ulp_at_max = max - to_f64(max_bits - 1);
        if a >= max + ulp_at_max / 2.0 {
            return sign | inf_bits;
        }
        let mut best = 0u16;
        for bits in 0..=max_bits {
            let (db, dc) = ((to_f64(best) - a).abs(), (to_f64(bits) - a).abs());
            if dc < db || (dc == db && bits % 2 == 0 && best % 2 == 1) {
                best = bits;
            }
        }
        sign | best
    }

    fn f16_value(bits: u16) -> f64 {
        f16::from_bits(bits).to_f64()
    }

    fn bf16_value(bits: u16) -> f64 {
        bf16::from_bits(bits).to_f64()
    }

    /// Values next to the ties of the 16-bit formats, where a second rounding goes wrong.
    fn near_ties() -> Vec<f64> {
        let mut xs = Vec::new();
        for bits in [0x0001u16, 0x03ff, 0x0400, 0x3c00, 0x3c01, 0x7bfe, 0x7bff] {
            let lo = f16_value(bits);
            let hi = f16_value(bits + 1);
            let mid = (lo + hi) / 2.0;
            xs.extend([mid, mid * (1.0 + 1e-12), mid * (1.0 - 1e-12), lo, hi]);
        }
        for bits in [0x0001u16, 0x007f, 0x0080, 0x3f80, 0x3f81, 0x7f7e, 0x7f7f] {
            let lo = bf16_value(bits);
            let hi = bf16_value(bits + 1);
            let mid = (lo + hi) / 2.0;
            // 1 + 2^-40 relative: lost by `half`'s truncation of the low 32 bits.
            xs.extend([
                mid,
                mid * (1.0 + 2f64.powi(-40)),
                mid * (1.0 - 2f64.powi(-40)),
                lo,
                hi,
            ]);
        }
        xs.extend([
            0.0, 1e-30, 65504.0, 65519.99, 65520.0, 3.4e38, 3.5e38, 1e300,
        ]);
        xs.iter().flat_map(|&x| [x, -x]).collect()
    }

    #[test]
    fn f64_conversions_round_once_to_nearest_even() {
        for x in near_ties() {
            assert_eq!(
                f64_to_f16(x).to_bits(),
                brute_force(x, f16_value, 0x7c00),
                "f16 {x:e}"
            );
            assert_eq!(
                f64_to_bf16(x).to_bits(),
                brute_force(x, bf16_value, 0x7f80),
                "bf16 {x:e}"
            );
        }
    }

    #[test]
    fn integer_conversions_round_once_to_nearest_even() {
        // 2^24 + 2^16 + 1 is just above a bf16 tie; `as f32` would round it onto the tie.
        let cases = [
            0i64,
            1,
            -3,
            2049,
            2051,
            65519,
            65520,
            (1 << 24) + (1 << 16) + 1,
            (1 << 24) + (1 << 16),
            (1 << 40) + (1 << 32) + 1,
            i64::MAX,
            i64::MIN,
        ];
        for x in cases.iter().flat_map(|&x| [x, x.wrapping_neg()]) {
            // Every case is exact in f64 except the extremes, which are far from any tie.
            let exact = x as f64;
            assert_eq!(
                i64_to_f16(x).to_bits(),
                brute_force(exact, f16_value, 0x7c00),
                "{x}"
            );
            assert_eq!(
                i64_to_bf16(x).to_bits(),
                brute_force(exact, bf16_value, 0x7f80),
                "{x}"
            );
        }
    }

    #[test]
    fn special_values_keep_their_meaning() {
        assert!(f64_to_bf16(f64::NAN).is_nan());
        assert!(f64_to_f16(f64::NAN).is_nan());
        assert_eq!(f64_to_f16(f64::INFINITY), f16::INFINITY);
        assert_eq!(f64_to_bf16(f64::NEG_INFINITY), bf16::NEG_INFINITY);
        assert!(f64_to_f16(-0.0).is_sign_negative());
        assert_eq!(
            f64_to_f32_round_to_odd(1.0 + 2f64.powi(-30)).to_bits(),
            1f32.to_bits() | 1
        );
    }
}
