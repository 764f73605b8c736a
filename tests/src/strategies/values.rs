//! Element values per dtype: ordinary numbers plus, at a controlled rate, the IEEE specials.

use proptest::prelude::*;
use tessera_core::DType;

/// NaN, both infinities and negative zero.
pub const ALL_SPECIALS: &[f64] = &[f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0];
/// The specials without `+inf` (for ops whose `+inf` behaviour is convention, e.g. softmax).
pub const SPECIALS_NO_POS_INF: &[f64] = &[f64::NAN, f64::NEG_INFINITY, -0.0];

/// What values a float tensor gets: small integers (ties, exact results), uniform reals in
/// `[-magnitude, magnitude)`, and a percentage of specials drawn from `specials`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ValueProfile {
    /// Bound of the uniform reals.
    pub magnitude: f64,
    /// Small integers are drawn from `-int_range..=int_range` (also the i64 range).
    pub int_range: i64,
    /// Percentage (0..=100) of special values among float elements.
    pub special_percent: u32,
    /// The specials to draw from.
    pub specials: &'static [f64],
}

impl ValueProfile {
    /// Values in `[-10, 10)`, integers in `-4..=4`, 10% specials.
    pub const DEFAULT: ValueProfile = ValueProfile {
        magnitude: 10.0,
        int_range: 4,
        special_percent: 10,
        specials: ALL_SPECIALS,
    };

    /// Like [`ValueProfile::DEFAULT`] without specials.
    pub const FINITE: ValueProfile = ValueProfile {
        special_percent: 0,
        ..ValueProfile::DEFAULT
    };

    /// The same profile with another special rate.
    pub fn with_specials(self, percent: u32) -> ValueProfile {
        ValueProfile {
            special_percent: percent,
            ..self
        }
    }
}

/// One value of `dtype` (as f64) following `profile`. f32 values are exactly representable in
/// f32; i64 values are integers in `-int_range * 250..=int_range * 250` plus, at the special
/// rate, `i64::MAX` and `i64::MIN`; bools are 0 or 1.
pub fn value(dtype: DType, profile: ValueProfile) -> BoxedStrategy<f64> {
    match dtype {
        DType::Bool => prop_oneof![Just(0.0), Just(1.0)].boxed(),
        DType::I64 => {
            let r = profile.int_range.max(1);
            let ordinary = prop_oneof![
                3 => (-r..=r).prop_map(|v| v as f64),
                1 => (-r * 250..=r * 250).prop_map(|v| v as f64),
            ];
            // The i64 "specials" are the extremes, which overflow (and wrap) in arithmetic. Both
            // convert to f64 and back exactly (i64::MAX via saturation).
            let special = profile.special_percent.min(99);
            if special == 0 {
                ordinary.boxed()
            } else {
                prop_oneof![
                    100 - special => ordinary,
                    special => prop::sample::select(vec![i64::MAX as f64, i64::MIN as f64]),
                ]
                .boxed()
            }
        }
        DType::F32 | DType::F64 => {
            let r = profile.int_range;
            let m = profile.magnitude;
            let round = move |v: f64| {
                if dtype == DType::F32 {
                    v as f32 as f64
                } else {
                    v
                }
            };
            let ordinary = prop_oneof![
                2 => (-r..=r).prop_map(|v| v as f64),
                3 => (-m..m).prop_map(round),
            ];
            let special = profile.special_percent.min(100);
            if special == 0 || profile.specials.is_empty() {
                ordinary.boxed()
            } else if special == 100 {
                prop::sample::select(profile.specials).boxed()
            } else {
                prop_oneof![
                    100 - special => ordinary,
                    special => prop::sample::select(profile.specials),
                ]
                .boxed()
            }
        }
    }
}

/// `n` values of `dtype` following `profile`.
pub fn values(dtype: DType, profile: ValueProfile, n: usize) -> BoxedStrategy<Vec<f64>> {
    prop::collection::vec(value(dtype, profile), n).boxed()
}

/// A special rate for one case: none (most cases, so finite results get checked), a few, or
/// many.
pub fn special_rate() -> BoxedStrategy<u32> {
    prop_oneof![3 => Just(0u32), 2 => Just(3u32), 1 => Just(25u32)].boxed()
}
