//! Element-wise functions of one operand.

use crate::common::*;
use proptest::prelude::*;

/// Values in `[-2, 2)` at least 0.1 from every integer (where floor/ceil jump).
fn off_integers() -> BoxedStrategy<f64> {
    (-2i32..2, 0.1..0.9f64)
        .prop_map(|(whole, fraction)| whole as f64 + fraction)
        .boxed()
}

/// Values at least 0.1 away from the clamp bounds -0.5 and 0.5.
fn off_clamp_bounds() -> BoxedStrategy<f64> {
    prop_oneof![-2.0..-0.6f64, -0.4..0.4f64, 0.6..2.0f64].boxed()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn neg(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].neg(), &[&x])?;
    }

    #[test]
    fn neg_operator(x in input(uniform(-2.0, 2.0))) {
        check(|v| -&v[0], &[&x])?;
    }

    #[test]
    fn abs(x in input(away_from_zero(0.1, 2.0))) {
        check(|v| v[0].abs(), &[&x])?;
    }

    #[test]
    fn sign(x in input(away_from_zero(0.1, 2.0))) {
        check(|v| v[0].sign(), &[&x])?;
    }

    #[test]
    fn square(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].square(), &[&x])?;
    }

    #[test]
    fn recip(x in input(away_from_zero(0.3, 2.0))) {
        check(|v| v[0].recip(), &[&x])?;
    }

    #[test]
    fn sqrt(x in input(uniform(0.2, 3.0))) {
        check(|v| v[0].sqrt(), &[&x])?;
    }

    #[test]
    fn rsqrt(x in input(uniform(0.2, 3.0))) {
        check(|v| v[0].rsqrt(), &[&x])?;
    }

    #[test]
    fn exp(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].exp(), &[&x])?;
    }

    #[test]
    fn log(x in input(uniform(0.2, 3.0))) {
        check(|v| v[0].log(), &[&x])?;
    }

    #[test]
    fn sin(x in input(uniform(-3.0, 3.0))) {
        check(|v| v[0].sin(), &[&x])?;
    }

    #[test]
    fn cos(x in input(uniform(-3.0, 3.0))) {
        check(|v| v[0].cos(), &[&x])?;
    }

    #[test]
    fn tanh(x in input(uniform(-3.0, 3.0))) {
        check(|v| v[0].tanh(), &[&x])?;
    }

    #[test]
    fn sigmoid(x in input(uniform(-4.0, 4.0))) {
        check(|v| v[0].sigmoid(), &[&x])?;
    }

    #[test]
    fn relu(x in input(away_from_zero(0.1, 2.0))) {
        check(|v| v[0].relu(), &[&x])?;
    }

    #[test]
    fn leaky_relu(x in input(away_from_zero(0.1, 2.0)), slope in 0.01..0.5f64) {
        check(|v| v[0].leaky_relu(slope), &[&x])?;
    }

    #[test]
    fn gelu(x in input(uniform(-3.0, 3.0))) {
        check(|v| v[0].gelu(), &[&x])?;
    }

    #[test]
    fn erf(x in input(uniform(-2.0, 2.0))) {
        check(|v| v[0].erf(), &[&x])?;
    }

    #[test]
    fn floor(x in input(off_integers())) {
        check(|v| v[0].floor(), &[&x])?;
    }

    #[test]
    fn ceil(x in input(off_integers())) {
        check(|v| v[0].ceil(), &[&x])?;
    }

    #[test]
    fn clamp(x in input(off_clamp_bounds())) {
        check(|v| v[0].clamp(-0.5, 0.5), &[&x])?;
    }
}
