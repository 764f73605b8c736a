//! `exp`, the logistic function and the normal distribution's tail for f32 in straight-line
//! arithmetic (no calls, no branches), so that the element-wise loops that use them compile to
//! vector code; the C library's `expf` and `erff` are scalar calls that keep a loop one element
//! at a time.
//!
//! * [`exp`]: Cody and Waite's reduction `x = n ln 2 + r`, `|r| <= ln 2 / 2`, then the
//!   degree-7 Taylor polynomial of `e^r` (truncation below 1e-8 relative) and `2^n` built from
//!   exponent bits in two halves, so that results in the subnormal range round once. Overflow
//!   gives `+inf`, underflow 0, NaN stays NaN. Within 2 ulp of the exact value (tested).
//! * [`normal_tail`]: `Φ(-|x|) = erfc(|x|/√2) / 2` by the Chebyshev-fitted form of Press et
//!   al. (*Numerical Recipes*, 2nd ed., §6.2, `erfcc`): `erfc(z) = t·exp(-z² + P(t))` with
//!   `t = 1 / (1 + z/2)`, fractional error below 1.2e-7 for every `z >= 0`. Computing the
//!   tail directly keeps its relative accuracy far out (`1 - Φ` never cancels).
//! * [`tanh`]: below `|x| = 1/2` its Taylor series to `x^17` (`2n(2^2n - 1)|B_2n|/(2n)!`
//!   coefficients; truncation below 4e-8 relative there), above `1 - 2/(e^2|x| + 1)` through
//!   [`exp`] (no cancellation worse than about 2x at the switch); the sign copied back, so
//!   `-0.0` and NaN stay what they are. Within 4 ulp of the exact value (tested). The C
//!   library's `tanhf` is a scalar call that goes through `expm1f`, and was a sixth of a
//!   GPT-2 prefill (its tanh-approximated GELU).
//! * [`sigmoid`]: `1 / (1 + e)` or `e / (1 + e)` with `e = e^-|x|` (never overflows) through
//!   [`exp`]. Within 4 ulp of the exact value where the result is normal (tested). The
//!   scalar `expf` call it replaces was 3% of a Llama prefill (SwiGLU's SiLU).

/// `e^x` for f32, vectorisable (see the module docs).
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that `n · LN2_HI` is exact for |n| < 2^11.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 · 2^23 rounds to the nearest integer (ties to even).
    const ROUND: f32 = 12_582_912.0;
    // Beyond these, e^x is +inf or below half the smallest subnormal.
    let x = x.clamp(-110.0, 88.8);
    let shifted = x * LOG2E + ROUND;
    let n = shifted - ROUND;
    // The integer `n` read from the low bits of `shifted` (no float-to-int conversion, whose
    // saturating semantics would keep the loop scalar).
    let n_int = shifted.to_bits() as i32 - ROUND.to_bits() as i32;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0
                        + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r * (1.0 / 5040.0)))))));
    // 2^n as 2^a · 2^b with both halves normal numbers (n in [-159, 129]).
    let a = n_int >> 1;
    let b = n_int - a;
    let two_a = f32::from_bits(((a + 127) as u32) << 23);
    let two_b = f32::from_bits(((b + 127) as u32) << 23);
    p * two_a * two_b
}

/// The logistic function `1 / (1 + e^-x)` for f32, vectorisable: `e = e^-|x|` never
/// overflows, and the result is `1 / (1 + e)` for `x >= 0` and `e / (1 + e)` below (a select,
/// not a branch). NaN stays NaN.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let s = 1.0 / (1.0 + e);
    if x >= 0.0 {
        s
    } else {
        e * s
    }
}

/// `Φ(-|x|)`, the standard normal distribution's mass beyond `|x|` on one side, for f32,
/// vectorisable (see the module docs). NaN for NaN.
// The coefficients as Press et al. print them (a few more digits than f32 holds).
#[allow(clippy::excessive_precision)]
#[inline(always)]
pub(crate) fn normal_tail(x: f32) -> f32 {
    let z = x.abs() * std::f32::consts::FRAC_1_SQRT_2;
    let t = 1.0 / (1.0 + 0.5 * z);
    let p = -1.265_512_2
        + t * (1.000_023_7
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    0.5 * t * exp(p - z * z)
}

/// `tanh(x)` for f32, vectorisable (see the module docs).
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    // The Taylor coefficients of tanh after the first: -1/3, 2/15, -17/315, 62/2835,
    // -1382/155925, 21844/6081075, -929569/638512875, 6404582/10854718875.
    const C: [f32; 8] = [
        -1.0 / 3.0,
        2.0 / 15.0,
        -17.0 / 315.0,
        62.0 / 2835.0,
        -1382.0 / 155_925.0,
        21844.0 / 6_081_075.0,
        -929_569.0 / 638_512_875.0,
        6_404_582.0 / 10_854_718_875.0,
    ];
    let a = x.abs();
    let z = a * a;
    let series = z
        * (C[0]
            + z * (C[1]
                + z * (C[2] + z * (C[3] + z * (C[4] + z * (C[5] + z * (C[6] + z * C[7])))))));
    let small = a + a * series;
    let large = 1.0 - 2.0 / (exp(2.0 * a) + 1.0);
    let magnitude = if a < 0.5 { small } else { large };
    magnitude.copysign(x)
}

/// `Φ(x)`, the standard normal distribution function, for f32, vectorisable.
#[inline(always)]
pub(crate) fn normal_cdf(x: f32) -> f32 {
    let tail = normal_tail(x);
    if x < 0.0 {
        tail
    } else {
        1.0 - tail
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The distance between `got` and `want` in units of f32's spacing at `want`.
    fn ulps(got: f32, want: f64) -> f64 {
        let spacing = (want.abs() as f32).max(f32::MIN_POSITIVE);
        let ulp = (f32::from_bits(spacing.to_bits() + 1) - spacing) as f64;
        (got as f64 - want).abs() / ulp
    }

    #[test]
    fn exp_is_within_two_ulp_of_f64_over_its_range() {
        let mut worst: f64 = 0.0;
        let mut x = -87.0f32;
        while x < 88.7 {
            worst = worst.max(ulps(exp(x), (x as f64).exp()));
            x += 0.001_37;
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
    }

    #[test]
    fn exp_handles_the_ends_and_specials() {
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(89.0), f32::INFINITY);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(-200.0), 0.0);
        assert!(exp(f32::NAN).is_nan());
        // Subnormal results: e^-100 = 3.72e-44, a multiple of the smallest subnormal.
        let want = (-100.0f64).exp();
        let got = exp(-100.0) as f64;
        assert!((got - want).abs() <= 1.5e-45, "{got} vs {want}");
    }

    #[test]
    fn tanh_is_within_four_ulp_of_f64_over_its_range() {
        let mut worst: f64 = 0.0;
        let mut x = -12.0f32;
        while x < 12.0 {
            worst = worst.max(ulps(tanh(x), (x as f64).tanh()));
            x += 0.000_71;
        }
        // Near the switch and near zero, densely.
        for i in 0..20_000 {
            let x = 0.48 + i as f32 * 2e-6;
            worst = worst.max(ulps(tanh(x), (x as f64).tanh()));
            let tiny = i as f32 * 1e-9;
            worst = worst.max(ulps(tanh(tiny), (tiny as f64).tanh()));
        }
        assert!(worst <= 4.0, "worst error {worst} ulp");
    }

    #[test]
    fn tanh_handles_the_ends_and_specials() {
        assert_eq!(tanh(0.0).to_bits(), 0.0f32.to_bits());
        assert_eq!(tanh(-0.0).to_bits(), (-0.0f32).to_bits());
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh(100.0), 1.0);
        assert_eq!(tanh(-1e30), -1.0);
        assert!(tanh(f32::NAN).is_nan());
        assert_eq!(tanh(f32::MIN_POSITIVE), f32::MIN_POSITIVE);
        assert_eq!(tanh(1e-30), 1e-30);
    }

    #[test]
    fn sigmoid_is_within_four_ulp_of_f64_over_its_range() {
        let mut worst: f64 = 0.0;
        let mut x = -100.0f32;
        while x < 30.0 {
            let want = 1.0 / (1.0 + (-(x as f64)).exp());
            // Below about -87 the result is subnormal (or 0), where ulps are absolute.
            if want > f32::MIN_POSITIVE as f64 {
                worst = worst.max(ulps(sigmoid(x), want));
            }
            x += 0.000_93;
        }
        assert!(worst <= 4.0, "worst error {worst} ulp");
    }

    #[test]
    fn sigmoid_handles_the_ends_and_specials() {
        assert_eq!(sigmoid(0.0), 0.5);
        assert_eq!(sigmoid(f32::INFINITY), 1.0);
        assert_eq!(sigmoid(f32::NEG_INFINITY), 0.0);
        assert_eq!(sigmoid(200.0), 1.0);
        assert_eq!(sigmoid(-200.0), 0.0);
        assert!(sigmoid(f32::NAN).is_nan());
    }

    #[test]
    fn normal_cdf_has_small_relative_error_in_both_tails() {
        // Relative error in units of f32's epsilon, over the condition number `1 + x²` of
        // `Φ` in its lower tail (an ulp of `x` moves `Φ(x)` by about `x²` ulp there).
        let mut worst: f64 = 0.0;
        let mut x = -12.0f32;
        while x < 12.0 {
            let want = 0.5 * libm::erfc(-(x as f64) / std::f64::consts::SQRT_2);
            let got = normal_cdf(x) as f64;
            let condition = 1.0 + (x as f64) * (x as f64);
            if want > 1e-37 {
                let rel = (got - want).abs() / want;
                worst = worst.max(rel / (f32::EPSILON as f64 * condition));
            }
            x += 0.003_1;
        }
        assert!(
            worst < 4.0,
            "worst error {worst} eps times the condition number"
        );
        assert!(normal_cdf(f32::NAN).is_nan());
        assert_eq!(normal_cdf(f32::INFINITY), 1.0);
        assert_eq!(normal_cdf(f32::NEG_INFINITY), 0.0);
    }
}
