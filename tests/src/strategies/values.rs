//! Element values per dtype: ordinary numbers plus, at a controlled rate, the IEEE specials.

use crate::reference::elementwise::round_to;
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

/// One value of `dtype` (as f64) following `profile`. Float values are exactly representable
/// in their dtype (f32, f16, bf16: rounded to nearest even); i64 values are integers in `-int_range * 250..=int_range * 250` plus, at the special
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
        _ => {
            let r = profile.int_range;
            let m = profile.magnitude;
            let round = move |v: f64| round_to(dtype, v);
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

/// A family of values a systematic pattern draws from: each exposes a class of bugs that
/// ordinary values hide.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueRegime {
    /// [`ValueProfile::FINITE`]: small integers and reals in `[-10, 10)`.
    Ordinary,
    /// Uniform in `[-1e4, 1e4)`: `exp` overflows, so formulas without a max shift or with an
    /// overflowing intermediate (`exp(x) / (1 + exp(x))`) give NaN or infinity.
    Huge,
    /// Reals in `[-10, 10)` plus one offset in `±[1e3, 1e4]` shared by the whole tensor:
    /// shift-invariant ops (softmax, variance) must not lose the small differences to the
    /// large common part.
    Shifted,
    /// Exact kinks and ties: `-0.0`, `0.0`, `±1` and `2`, so that `x == 0` and equal elements
    /// are everywhere.
    Ties,
    /// NaN, `±inf` and `±0` with some ordinary values between them.
    Specials,
}

impl ValueRegime {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            ValueRegime::Ordinary => "ordinary values",
            ValueRegime::Huge => "|x| up to 1e4",
            ValueRegime::Shifted => "shifted by up to 1e4",
            ValueRegime::Ties => "zeros and ties",
            ValueRegime::Specials => "NaN, inf, -0",
        }
    }
}

/// One value of `dtype` in `regime` (the shared offset of [`ValueRegime::Shifted`] is added by
/// [`regime_values`]; alone it draws the unshifted part). Integers and bools ignore the regime
/// except for ties (small integers) and specials (`i64::MIN` and `i64::MAX`).
pub fn regime_value(dtype: DType, regime: ValueRegime) -> BoxedStrategy<f64> {
    let round = move |v: f64| round_to(dtype, v);
    match (dtype, regime) {
        (DType::Bool, _) => prop_oneof![Just(0.0), Just(1.0)].boxed(),
        (DType::I64, ValueRegime::Ties) => (-1i64..=2).prop_map(|v| v as f64).boxed(),
        (DType::I64, ValueRegime::Specials) => {
            value(dtype, ValueProfile::DEFAULT.with_specials(30))
        }
        (DType::I64, _) => value(dtype, ValueProfile::FINITE),
        (_, ValueRegime::Ordinary | ValueRegime::Shifted) => value(dtype, ValueProfile::FINITE),
        (_, ValueRegime::Huge) => prop_oneof![
            1 => (-4i64..=4).prop_map(|v| v as f64),
            4 => (-1e4..1e4f64).prop_map(round),
        ]
        .boxed(),
        (_, ValueRegime::Ties) => prop::sample::select(vec![-0.0, 0.0, 1.0, -1.0, 2.0]).boxed(),
        (_, ValueRegime::Specials) => prop_oneof![
            3 => prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 0.0]),
            2 => value(dtype, ValueProfile::FINITE),
        ]
        .boxed(),
    }
}

/// `n` values of `dtype` in `regime`: for [`ValueRegime::Shifted`], one offset drawn from
/// `±[1e3, 1e4]` added to every value (rounded to the dtype).
pub fn regime_values(dtype: DType, regime: ValueRegime, n: usize) -> BoxedStrategy<Vec<f64>> {
    let each = prop::collection::vec(regime_value(dtype, regime), n);
    if regime != ValueRegime::Shifted || !dtype.is_float() {
        return each.boxed();
    }
    (each, prop_oneof![1e3..=1e4f64, -1e4..=-1e3f64])
        .prop_map(move |(values, offset)| {
            values
                .into_iter()
                .map(|v| round_to(dtype, v + offset))
                .collect()
        })
        .boxed()
}
