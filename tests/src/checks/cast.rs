//! Casts between every pair of dtypes.
//!
//! Besides ordinary values and the IEEE specials, every cast pair gets two input classes that
//! ordinary values never reach (see [`boundary_values`] and [`near_tie`]):
//!
//! * the **boundaries of the target format** (and of the source's own), expressed in the
//!   source dtype: the smallest subnormal, some subnormals in between, the largest subnormal,
//!   the smallest normal, the largest finite value, the first value that rounds to infinity and
//!   the values just below it, each with its source neighbours and both signs (for integer
//!   targets, `i64::MIN` and `2^63` and the source values just inside and beyond them). A cast
//!   that flushes subnormal results to zero or overflows one value early fails here.
//! * values **at and one source ulp either side of the target's rounding ties**, built from the
//!   source format's bits, whenever the cast rounds (`f64 -> f32/f16/bf16`, `f32 -> f16/bf16`,
//!   `f16 <-> bf16`, `i64 -> f32/f16/bf16`). An `f64 -> f16` cast that rounds to f32 first turns
//!   `tie + 1 ulp` into the tie and then rounds it to even: wrong whenever the even neighbour is
//!   the lower one. Such a cast fails here.
//!
//! Both classes are mixed into the random cases (about half of the elements) and form a
//! systematic pattern of their own, one tensor holding every boundary and tie value, that runs
//! on every seed (its failures shrink to the one offending element).

use super::{build, elementwise_cases, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::elementwise;
use crate::runner::check_property_systematic;
use crate::strategies::{shape, tensor_case_from, value, Pattern, TensorCase, ValueProfile};
use proptest::prelude::*;
use proptest::strategy::Union;
use tessera_core::{Backend, DType};

/// One cast.
#[derive(Clone, Debug)]
pub struct CastCase {
    /// The source tensor.
    pub input: TensorCase,
    /// The target dtype.
    pub to: DType,
}

/// `2^e` for `-1074 <= e <= 1023`, exactly (built from the bits: `powi` loses the f64
/// subnormals), 0 below.
pub fn pow2(e: i32) -> f64 {
    if e >= -1022 {
        assert!(e <= 1023, "2^{e} is not a finite f64");
        f64::from_bits(((e + 1023) as u64) << 52)
    } else if e >= -1074 {
        f64::from_bits(1u64 << (e + 1074))
    } else {
        0.0
    }
}

/// A binary floating-point format: `p` significant bits (the implicit one included), normal
/// exponents `emin..=emax`, subnormals below and infinity above.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Format {
    /// Significant bits.
    pub p: i32,
    /// Exponent of the smallest normal value.
    pub emin: i32,
    /// Exponent of the largest finite value.
    pub emax: i32,
}

impl Format {
    /// The format of a float dtype; `None` for the others.
    pub fn of(dtype: DType) -> Option<Format> {
        let (p, emin, emax) = match dtype {
            DType::F64 => (53, -1022, 1023),
            DType::F32 => (24, -126, 127),
            DType::F16 => (11, -14, 15),
            DType::BF16 => (8, -126, 127),
            _ => return None,
        };
        Some(Format { p, emin, emax })
    }

    /// The smallest positive (subnormal) value.
    pub fn min_subnormal(self) -> f64 {
        pow2(self.emin - self.p + 1)
    }

    /// The smallest positive normal value.
    pub fn min_normal(self) -> f64 {
        pow2(self.emin)
    }

    /// The largest subnormal value.
    pub fn max_subnormal(self) -> f64 {
        self.min_normal() - self.min_subnormal()
    }

    /// The largest finite value.
    pub fn max_finite(self) -> f64 {
        // (2 - 2^(1-p)) * 2^emax, written so that f64's own maximum does not overflow.
        pow2(self.emax) + (pow2(self.emax) - pow2(self.emax - self.p + 1))
    }

    /// The smallest value that rounds to infinity: the largest finite value plus half its ulp
    /// (a tie, which goes to the even neighbour `2^(emax+1)`, that is to infinity). Infinite
    /// for f64.
    pub fn overflow_threshold(self) -> f64 {
        self.max_finite() + pow2(self.emax - self.p)
    }

    /// The exponent `floor(log2 a)` of `a > 0`, at least `emin` (the subnormals share the
    /// smallest normal exponent's spacing).
    fn exponent(self, a: f64) -> i32 {
        let e = ((a.to_bits() >> 52) & 0x7ff) as i32 - 1023;
        e.max(self.emin)
    }

    /// The spacing of the format at `|a|` (for `a` of the format: the distance to the next
    /// value away from zero).
    pub fn ulp(self, a: f64) -> f64 {
        let a = a.abs();
        let e = if a == 0.0 {
            self.emin
        } else {
            self.exponent(a)
        };
        pow2(e - self.p + 1)
    }

    /// The value of the format after `x` (a finite value of the format) toward `+inf`
    /// (infinity after the largest finite value).
    pub fn next_up(self, x: f64) -> f64 {
        if x < 0.0 {
            return -self.next_down(-x);
        }
        let next = x.abs() + self.ulp(x);
        if next > self.max_finite() {
            f64::INFINITY
        } else {
            next
        }
    }

    /// The value of the format before `x` (a finite value of the format) toward `-inf`.
    pub fn next_down(self, x: f64) -> f64 {
        if x <= 0.0 {
            return -self.next_up(-x);
        }
        let e = self.exponent(x);
        // Just below a power of two the spacing halves (except at the smallest normal).
        let step = if x == pow2(e) && e > self.emin {
            pow2(e - self.p)
        } else {
            pow2(e - self.p + 1)
        };
        x - step
    }

    /// The value with biased exponent field `field` (`0` for the subnormals, `1..=2 * emax`
    /// for the normals) and fraction `fraction < 2^(p-1)`, positive.
    pub fn value(self, field: i32, fraction: u64) -> f64 {
        let f = fraction as f64;
        if field == 0 {
            f * self.min_subnormal()
        } else {
            let e = field - self.emax;
            (pow2(self.p - 1) + f) * pow2(e - self.p + 1)
        }
    }
}

/// Whether the value `x` (an exact f64) is a value of `dtype`: a float of its format, an
/// integer of i64 that f64 holds exactly (`|x| <= 2^53`, and not `-0`), 0 or 1 for bool.
pub fn holds(dtype: DType, x: f64) -> bool {
    match dtype {
        DType::I64 => {
            x.is_finite()
                && x.trunc() == x
                && x.abs() <= pow2(53)
                && !(x == 0.0 && x.is_sign_negative())
        }
        DType::Bool => x == 0.0 || x == 1.0,
        _ => x.is_nan() || elementwise::round_to(dtype, x) == x,
    }
}

/// The values of `dtype` around the exact point `x`: `x` and its neighbours one ulp (one unit
/// for i64) below and above when `dtype` holds `x`, else the two values that bracket it.
/// Only finite values; none for bool, and none for i64 beyond `2^53`.
pub fn around(dtype: DType, x: f64) -> Vec<f64> {
    let out = match dtype {
        DType::Bool => vec![],
        DType::I64 => {
            if x.abs() > pow2(53) {
                vec![]
            } else if x.trunc() == x {
                vec![x - 1.0, x, x + 1.0]
            } else {
                vec![x.floor(), x.ceil()]
            }
        }
        _ => {
            let f = Format::of(dtype).expect("a float dtype");
            let r = elementwise::round_to(dtype, x);
            if r.is_infinite() {
                vec![r.signum() * f.max_finite()]
            } else if r == x {
                vec![f.next_down(x), x, f.next_up(x)]
            } else if r < x {
                vec![r, f.next_up(r)]
            } else {
                vec![f.next_down(r), r]
            }
        }
    };
    out.into_iter()
        .filter(|v| v.is_finite() && holds(dtype, *v))
        .map(|v| integer_zero(dtype, v))
        .collect()
}

/// `v`, with an i64's `-0` turned into `0` (i64 has one zero); float zeros keep their sign.
fn integer_zero(dtype: DType, v: f64) -> f64 {
    if dtype == DType::I64 {
        v + 0.0
    } else {
        v
    }
}

/// Whether a cast `from -> to` rounds: the target is a float format and some finite source
/// value the suite draws is not one of its values (i64 sources stay within `2^53`, exact in
/// f64).
pub fn rounds(from: DType, to: DType) -> bool {
    let exact_in = |to: DType| match from {
        DType::Bool => true,
        DType::I64 => to == DType::F64,
        DType::F16 | DType::BF16 => matches!(to, DType::F32 | DType::F64),
        DType::F32 => to == DType::F64,
        _ => false,
    };
    to.is_float() && from != to && !exact_in(to)
}

/// The points of the format of `to` where casts go wrong: its subnormals (smallest, a few in
/// between, largest), smallest normal, largest finite value and the first value that
/// overflows, and (when the cast rounds) its ties next to them; for i64, its range ends.
/// Exact positive f64 values (their negatives are added by [`boundary_values`]).
fn target_points(from: DType, to: DType) -> Vec<f64> {
    let Some(f) = Format::of(to) else {
        return match to {
            // The ends of the i64 range: -2^63 is i64::MIN, 2^63 the first value that saturates.
            DType::I64 => vec![pow2(63), 1.0, 0.5],
            _ => vec![],
        };
    };
    let sub = f.min_subnormal();
    let mut points = vec![
        sub,
        2.0 * sub,
        3.0 * sub,
        f.min_normal() / 2.0,
        f.min_normal() / 2.0 + 3.0 * sub,
        f.max_subnormal(),
        f.min_normal(),
        f.next_up(f.min_normal()),
        f.next_down(f.max_finite()),
        f.max_finite(),
        f.overflow_threshold(),
        2.0 * f.max_finite(),
    ];
    if rounds(from, to) {
        points.extend(tie_anchors(f).into_iter().map(|t| t + f.ulp(t) / 2.0));
    }
    points.into_iter().filter(|p| p.is_finite()).collect()
}

/// Values of a format whose tie with the next value up is worth a fixed test: both parities
/// (rounding to even goes down from an even value's tie, up from an odd one's) at the smallest
/// subnormals, the subnormal/normal border, 1, the first binade with spacing 2 (where integer
/// sources reach the ties), `1.5 * 2^40`, and the top (whose tie is the overflow threshold).
fn tie_anchors(f: Format) -> Vec<f64> {
    let one_anchor = |t: f64| [t, f.next_up(t)];
    let mut anchors = vec![f.max_subnormal()];
    for t in [
        f.min_subnormal(),
        f.min_normal(),
        1.0,
        pow2(f.p),
        1.5 * pow2(40),
    ] {
        anchors.extend(one_anchor(t));
    }
    anchors.extend([f.next_down(f.max_finite()), f.max_finite()]);
    anchors
        .into_iter()
        .filter(|&t| t.is_finite() && t <= f.max_finite())
        .collect()
}

/// The fixed boundary and tie values of the cast `from -> to`, as values of `from` (see the
/// module docs): each point of the target format ([`target_points`]) and of the source's own
/// (its subnormals, smallest normal and largest value, which a cast that flushes its inputs
/// gets wrong) with its source neighbours ([`around`]), with both signs; no duplicates.
pub fn boundary_values(from: DType, to: DType) -> Vec<f64> {
    let mut points = target_points(from, to);
    match Format::of(from) {
        Some(f) => points.extend([
            f.min_subnormal(),
            2.0 * f.min_subnormal(),
            f.max_subnormal(),
            f.min_normal(),
            f.max_finite(),
        ]),
        None if from == DType::I64 => points.push(pow2(53)),
        None => {}
    }
    let mut out: Vec<f64> = Vec::new();
    for p in points {
        for v in around(from, p) {
            for v in [v, integer_zero(from, -v)] {
                if !out.iter().any(|o| o.to_bits() == v.to_bits()) {
                    out.push(v);
                }
            }
        }
    }
    out
}

/// A random value of `from` at or one source ulp either side of a rounding tie of `to` (for a
/// cast that [`rounds`]): a random value `t` of the target format (any exponent both formats
/// reach, subnormals included; for i64 sources, where the ties are integers), the midpoint
/// between `t` and the next value, then that midpoint or its source neighbour below or above
/// (the two bracketing values when the source does not hold it), with a random sign.
pub fn near_tie(from: DType, to: DType) -> BoxedStrategy<f64> {
    let f = Format::of(to).expect("ties of a float target");
    // The target exponents to draw (field 0: the subnormals), limited to what the source
    // reaches.
    let (lo, hi) = match Format::of(from) {
        Some(s) => (
            (s.emin - s.p + 1 + f.emax).max(0),
            (s.emax + f.emax).min(2 * f.emax),
        ),
        // i64: exponents p..=52 of the target, whose ties are integers below 2^53.
        None => (f.p + f.emax, (52 + f.emax).min(2 * f.emax)),
    };
    let fractions = 1u64 << (f.p - 1);
    (lo..=hi, 0..fractions, 0usize..3, any::<bool>())
        .prop_map(move |(field, fraction, pick, negative)| {
            let t = f.value(field, fraction);
            let tie = t + f.ulp(t) / 2.0;
            let near = around(from, tie);
            let v = if near.is_empty() {
                0.0
            } else {
                near[pick.min(near.len() - 1)]
            };
            if negative {
                integer_zero(from, -v)
            } else {
                v
            }
        })
        .boxed()
}

/// Source values for casts `from -> to`: the default profile with specials; values that
/// exercise truncation (`±2.5`, `-2.7`), saturation (`±1e20`, `±1e300`) and rounding to f32
/// (`16777217`, `2^53 - 1`), each rounded to the source dtype; the target's boundaries
/// ([`boundary_values`]); and, when the cast rounds, values next to its ties ([`near_tie`]).
/// About half of the elements come from the last two.
pub fn cast_value(from: DType, to: DType) -> BoxedStrategy<f64> {
    let edge = prop::sample::select(vec![
        0.5,
        -0.5,
        2.5,
        -2.7,
        1e10,
        -3e9,
        1e20,
        -1e20,
        1e300,
        -1e300,
        16_777_217.0,
        9_007_199_254_740_991.0,
    ])
    .prop_map(move |v| match from {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => elementwise::round_to(from, v),
        // Integers keep |v| <= 2^53 - 1, where i64 -> f64 is exact (and `+ 0.0` turns -0 into 0).
        DType::I64 => {
            v.clamp(-9_007_199_254_740_991.0, 9_007_199_254_740_991.0)
                .trunc()
                + 0.0
        }
        DType::Bool => f64::from(v != 0.0),
        other => panic!("no cast values for {other}"),
    });
    let mut arms = vec![
        (5, value(from, ValueProfile::DEFAULT.with_specials(15))),
        (1, edge.boxed()),
    ];
    let boundaries = boundary_values(from, to);
    if !boundaries.is_empty() {
        arms.push((4, prop::sample::select(boundaries).boxed()));
    }
    if rounds(from, to) && from != DType::Bool {
        arms.push((3, near_tie(from, to)));
    }
    Union::new_weighted(arms).boxed()
}

/// Cases casting `from` to `to`.
pub fn cases(from: DType, to: DType) -> BoxedStrategy<CastCase> {
    shape()
        .prop_flat_map(move |s| tensor_case_from(from, s, cast_value(from, to)))
        .prop_map(move |input| CastCase { input, to })
        .boxed()
}

/// The pattern that runs every boundary and tie value of `from -> to` on every seed: a
/// contiguous vector of all of [`boundary_values`] (the ties of [`tie_anchors`] included when
/// the cast rounds), each kept by a flag that is always drawn true but shrinks to false, so
/// that a failure shrinks to the elements that fail.
pub fn boundary_pattern(from: DType, to: DType) -> Option<Pattern<CastCase>> {
    let all = boundary_values(from, to);
    if all.is_empty() {
        return None;
    }
    let n = all.len();
    let strategy = prop::collection::vec(prop::bool::weighted(1.0), n)
        .prop_map(move |keep| {
            let kept: Vec<f64> = all
                .iter()
                .zip(keep)
                .filter_map(|(&v, k)| k.then_some(v))
                .collect();
            CastCase {
                input: TensorCase::contiguous(from, vec![kept.len()], kept),
                to,
            }
        })
        .boxed();
    Some(Pattern::new(format!("{to} boundaries and ties"), strategy))
}

/// The systematic cases of `from -> to`: every layout kind and the value regimes, then the
/// target's boundaries and ties ([`boundary_pattern`]).
pub fn patterns(from: DType, to: DType) -> Vec<Pattern<CastCase>> {
    let mut out = elementwise_cases(&["input"], vec![from], move |mut v| CastCase {
        input: v.remove(0),
        to,
    });
    out.extend(boundary_pattern(from, to));
    out
}

/// Compares `x.to_dtype(to)` with the reference conversion (exact: every cast is a
/// single correctly defined rounding).
pub fn check<B: Backend>(dev: &B, case: &CastCase) -> Result<(), String> {
    let x = build(dev, &case.input, "input")?;
    let got = x.to_dtype(case.to).map_err(op_failed("to_dtype", &[&x]))?;
    let expected = elementwise::cast(&case.input.reference(), case.to);
    assert_close(&got, case.to, &expected, Tolerance::EXACT).map_err(with_inputs(&[&x]))
}

/// Checks the cast `from -> to` over 256 random cases.
pub fn run<B: Backend>(dev: &B, from: DType, to: DType) {
    check_property_systematic(
        &format!("cast {from} -> {to}"),
        patterns(from, to),
        cases(from, to),
        |c| check(dev, c),
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    #[test]
    fn formats_have_the_known_limits() {
        let f16 = Format::of(DType::F16).unwrap();
        assert_eq!(f16.min_subnormal(), 2f64.powi(-24));
        assert_eq!(f16.max_subnormal(), 1023.0 * 2f64.powi(-24));
        assert_eq!(f16.min_normal(), 2f64.powi(-14));
        assert_eq!(f16.max_finite(), 65504.0);
        assert_eq!(f16.overflow_threshold(), 65520.0);
        let bf16 = Format::of(DType::BF16).unwrap();
        assert_eq!(
            bf16.min_subnormal(),
            f64::from(f32::from_bits(0x0000_0001 << 16))
        );
        assert_eq!(bf16.max_subnormal(), f64::from(f32::from_bits(0x007f_0000)));
        assert_eq!(bf16.max_finite(), f64::from(f32::from_bits(0x7f7f_0000)));
        assert_eq!(
            bf16.overflow_threshold(),
            f64::from(f32::from_bits(0x7f7f_8000))
        );
        let f32f = Format::of(DType::F32).unwrap();
        assert_eq!(f32f.min_subnormal(), f64::from(f32::from_bits(1)));
        assert_eq!(f32f.min_normal(), f64::from(f32::MIN_POSITIVE));
        assert_eq!(f32f.max_finite(), f64::from(f32::MAX));
        assert_eq!(f32f.overflow_threshold() as f32, f32::INFINITY);
        assert_eq!(
            f64::from_bits(f32f.overflow_threshold().to_bits() - 1) as f32,
            f32::MAX,
            "just below the threshold rounds to the largest finite"
        );
        let f64f = Format::of(DType::F64).unwrap();
        assert_eq!(f64f.min_subnormal(), f64::from_bits(1));
        assert_eq!(f64f.min_normal(), f64::MIN_POSITIVE);
        assert_eq!(f64f.max_finite(), f64::MAX);
        assert_eq!(f64f.overflow_threshold(), f64::INFINITY);
    }

    #[test]
    fn neighbours_match_the_bit_patterns() {
        let f32f = Format::of(DType::F32).unwrap();
        let f64f = Format::of(DType::F64).unwrap();
        let step32 = |x: f32, up: bool| {
            let next = if (x >= 0.0) == up {
                x.to_bits() + 1
            } else {
                x.to_bits() - 1
            };
            f64::from(f32::from_bits(next))
        };
        for bits in [
            1u32,
            2,
            0x007f_ffff,
            0x0080_0000,
            0x0080_0001,
            0x3f80_0000,
            0x7f7f_fffe,
        ] {
            for x in [f32::from_bits(bits), -f32::from_bits(bits)] {
                assert_eq!(f32f.next_up(f64::from(x)), step32(x, true), "{x:e}");
                assert_eq!(f32f.next_down(f64::from(x)), step32(x, false), "{x:e}");
            }
        }
        assert_eq!(f32f.next_up(f64::from(f32::MAX)), f64::INFINITY);
        assert_eq!(f32f.next_up(0.0), f64::from(f32::from_bits(1)));
        assert_eq!(f32f.next_down(0.0), -f64::from(f32::from_bits(1)));
        for x in [1.0, 2.0, f64::MIN_POSITIVE, 5e-324, 1e-310, 3.0e300] {
            assert_eq!(f64f.next_up(x), f64::from_bits(x.to_bits() + 1), "{x:e}");
            assert_eq!(f64f.next_down(x), f64::from_bits(x.to_bits() - 1), "{x:e}");
        }
        // The 16-bit formats: every finite positive value and its successor.
        for (dtype, fields) in [(DType::F16, 31), (DType::BF16, 255)] {
            let f = Format::of(dtype).unwrap();
            let mut previous = 0.0;
            for field in 0..fields {
                for fraction in 0..(1u64 << (f.p - 1)) {
                    let v = f.value(field, fraction);
                    if v == 0.0 {
                        continue;
                    }
                    assert!(holds(dtype, v), "{dtype} {v:e}");
                    assert_eq!(f.next_up(previous), v, "{dtype} after {previous:e}");
                    assert_eq!(f.next_down(v), previous, "{dtype} before {v:e}");
                    previous = v;
                }
            }
            assert_eq!(previous, f.max_finite(), "{dtype}");
        }
    }

    #[test]
    fn boundaries_are_source_values_at_the_target_limits() {
        for from in DType::ALL {
            for to in DType::ALL {
                for v in boundary_values(from, to) {
                    assert!(holds(from, v), "{from} -> {to}: {v:e}");
                }
            }
        }
        let f64_to_f16 = boundary_values(DType::F64, DType::F16);
        let tie_plus = 65520.0f64;
        for v in [
            2f64.powi(-24),
            -2f64.powi(-24),
            1023.0 * 2f64.powi(-24),
            2f64.powi(-14),
            65504.0,
            tie_plus,
            -tie_plus,
            f64::from_bits(tie_plus.to_bits() - 1),
            // 1 + half an f16 ulp, one f64 ulp above: f32 rounds it onto the tie.
            f64::from_bits((1.0 + 2f64.powi(-11)).to_bits() + 1),
        ] {
            assert!(f64_to_f16.contains(&v), "{v:e} missing");
        }
        let f32_to_bf16 = boundary_values(DType::F32, DType::BF16);
        assert!(f32_to_bf16.contains(&f64::from(f32::from_bits(0x0001_0000))));
        assert!(f32_to_bf16.contains(&f64::from(f32::from_bits(0x7f7f_8000))));
        assert!(f32_to_bf16.contains(&f64::from(f32::from_bits(0x7f7f_7fff))));
        let i64_to_f16 = boundary_values(DType::I64, DType::F16);
        for v in [65519.0, 65520.0, -65520.0, 2049.0, 2048.0, 2050.0] {
            assert!(i64_to_f16.contains(&v), "{v} missing");
        }
        let f64_to_i64 = boundary_values(DType::F64, DType::I64);
        for v in [2f64.powi(63), -2f64.powi(63), 2f64.powi(63) - 1024.0] {
            assert!(f64_to_i64.contains(&v), "{v} missing");
        }
    }

    /// Values at or next to ties are source values, and the exact ones sit on a tie of the
    /// target or one source ulp from it.
    #[test]
    fn near_tie_values_sit_at_ties() {
        let mut runner = TestRunner::deterministic();
        for from in [DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64] {
            for to in [DType::F32, DType::F16, DType::BF16] {
                if !rounds(from, to) {
                    continue;
                }
                let f = Format::of(to).unwrap();
                let strategy = near_tie(from, to);
                let mut at_ties = 0;
                for _ in 0..500 {
                    let v = strategy.new_tree(&mut runner).unwrap().current();
                    assert!(holds(from, v), "{from} -> {to}: {v:e}");
                    // Half-way between two target values: twice the distance to the rounded
                    // value is its ulp.
                    let r = elementwise::round_to(to, v);
                    let lower = if r.is_infinite() {
                        f.max_finite()
                    } else if r.abs() > v.abs() {
                        f.next_down(r.abs())
                    } else {
                        r.abs()
                    };
                    if v.abs() - lower == f.ulp(lower) / 2.0 {
                        at_ties += 1;
                    }
                }
                // The tie itself is one of three picks when the source holds it.
                if from == DType::F64 || (from == DType::F32 && to != DType::F32) {
                    assert!(at_ties > 100, "{from} -> {to}: {at_ties} ties in 500");
                }
            }
        }
    }

    /// Most random cases of every pair hold a boundary or tie value (the systematic pattern
    /// holds all of them on every seed).
    #[test]
    fn random_cases_mostly_hold_boundary_values() {
        let mut runner = TestRunner::deterministic();
        for from in DType::ALL {
            for to in DType::ALL {
                let boundaries = boundary_values(from, to);
                if boundaries.is_empty() || from == to {
                    continue;
                }
                let strategy = cases(from, to);
                let (mut nonempty, mut with) = (0, 0);
                for _ in 0..400 {
                    let case = strategy.new_tree(&mut runner).unwrap().current();
                    if case.input.source.is_empty() {
                        continue;
                    }
                    nonempty += 1;
                    let hit = case
                        .input
                        .source
                        .iter()
                        .any(|v| boundaries.iter().any(|b| b.to_bits() == v.to_bits()));
                    with += usize::from(hit);
                }
                assert!(
                    with * 10 >= nonempty * 6,
                    "{from} -> {to}: {with} of {nonempty} cases"
                );
            }
        }
    }
}
