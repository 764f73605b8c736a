//! softmax, log_softmax and logsumexp along one axis, on inputs where naive formulas break:
//! `|x|` up to `1e4` (an unshifted `exp` overflows), rows shifted by up to `1e4` (subtracting
//! a rounded `max + log(sum)` loses the last bits), `+inf`, all-`-inf` rows and NaN (PyTorch's
//! NaN rows), empty axes.

use super::{build, op_failed, signed_axis, with_inputs};
use crate::compare::{assert_close_scaled, Tolerance};
use crate::reference::{reduce::reduced_shape, softmax, views, RefArray};
use crate::runner::check_property_systematic;
use crate::strategies::{
    layout_recipe, regime_values, shape_with, special_rate, tensor_case, tensor_case_in_regime,
    value, LayoutKind, Pattern, TensorCase, ValueProfile, ValueRegime,
};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// Which member of the family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SoftmaxOp {
    /// `softmax(axis)`.
    Softmax,
    /// `log_softmax(axis)`.
    LogSoftmax,
    /// `logsumexp(axis, keepdim)`.
    LogSumExp,
}

impl SoftmaxOp {
    /// Every member.
    pub const ALL: [SoftmaxOp; 3] = [
        SoftmaxOp::Softmax,
        SoftmaxOp::LogSoftmax,
        SoftmaxOp::LogSumExp,
    ];

    /// Snake-case name (the `Tensor` method).
    pub fn name(self) -> &'static str {
        match self {
            SoftmaxOp::Softmax => "softmax",
            SoftmaxOp::LogSoftmax => "log_softmax",
            SoftmaxOp::LogSumExp => "logsumexp",
        }
    }
}

/// One softmax-family op.
#[derive(Clone, Debug)]
pub struct SoftmaxCase {
    /// The op.
    pub op: SoftmaxOp,
    /// Resolved axis (may be empty: softmax is then empty and logsumexp `-inf`).
    pub axis: usize,
    /// Whether the axis is passed counted from the end.
    pub axis_from_end: bool,
    /// For logsumexp: keep the axis as size 1.
    pub keepdim: bool,
    /// The input.
    pub input: TensorCase,
}

/// The input of a random case: ordinary values with a random rate of every special (`+inf`
/// included), or all values in `±1e4`, or rows shifted by up to `1e4`.
fn random_input(dtype: DType, shape: Vec<usize>) -> BoxedStrategy<TensorCase> {
    let regime = |regime: ValueRegime| {
        let shape = shape.clone();
        layout_recipe(shape)
            .prop_flat_map(move |recipe| {
                regime_values(dtype, regime, recipe.source_numel()).prop_map(move |source| {
                    TensorCase {
                        dtype,
                        recipe: recipe.clone(),
                        source,
                    }
                })
            })
            .boxed()
    };
    let s = shape.clone();
    let ordinary = special_rate()
        .prop_flat_map(move |special| {
            tensor_case(
                dtype,
                s.clone(),
                ValueProfile::DEFAULT.with_specials(special),
            )
        })
        .boxed();
    prop_oneof![
        4 => ordinary,
        1 => regime(ValueRegime::Huge),
        1 => regime(ValueRegime::Shifted),
    ]
    .boxed()
}

/// Random cases of `op` on `dtype`: rank 1 to 4, empty axes included, any layout.
pub fn cases(op: SoftmaxOp, dtype: DType) -> BoxedStrategy<SoftmaxCase> {
    (shape_with(1..=4, 0..=5), any::<bool>(), any::<bool>())
        .prop_flat_map(|(s, from_end, keepdim)| {
            let rank = s.len();
            (Just(s), 0..rank, Just(from_end), Just(keepdim))
        })
        .prop_flat_map(move |(s, axis, axis_from_end, keepdim)| {
            random_input(dtype, s).prop_map(move |input| SoftmaxCase {
                op,
                axis,
                axis_from_end,
                keepdim,
                input,
            })
        })
        .boxed()
}

/// A case of `op` on a rank-3 input (sizes `2..=4`) of `kind` and `regime`, along `axis`.
fn structured(
    op: SoftmaxOp,
    dtype: DType,
    kind: LayoutKind,
    regime: ValueRegime,
    axis: usize,
) -> BoxedStrategy<SoftmaxCase> {
    (prop::collection::vec(2usize..=4, 3), any::<bool>())
        .prop_flat_map(move |(s, keepdim)| {
            tensor_case_in_regime(dtype, s, kind, regime).prop_map(move |input| SoftmaxCase {
                op,
                axis,
                axis_from_end: false,
                keepdim,
                input,
            })
        })
        .boxed()
}

/// One row of 2 to 5 ordinary values with `special` at one position (or everywhere, for
/// `-inf`): PyTorch's NaN rows (`+inf`, NaN, all `-inf`) and the `+inf`/`-inf` log-sum-exps.
fn special_row(op: SoftmaxOp, dtype: DType, special: f64) -> BoxedStrategy<SoftmaxCase> {
    (2usize..=5)
        .prop_flat_map(move |k| {
            (
                prop::collection::vec(value(dtype, ValueProfile::FINITE), k),
                0..k,
            )
        })
        .prop_map(move |(mut row, at)| {
            if special == f64::NEG_INFINITY {
                row.iter_mut().for_each(|v| *v = special);
            } else {
                row[at] = special;
            }
            let k = row.len();
            SoftmaxCase {
                op,
                axis: 0,
                axis_from_end: false,
                keepdim: true,
                input: TensorCase::contiguous(dtype, vec![k], row),
            }
        })
        .boxed()
}

/// The systematic cases of `op` on `dtype`: every layout kind along the first and the last
/// axis, the middle axis, every value regime along the last and the first axis, and rows with
/// `+inf`, NaN and only `-inf`.
pub fn patterns(op: SoftmaxOp, dtype: DType) -> Vec<Pattern<SoftmaxCase>> {
    let mut out = Vec::new();
    for kind in LayoutKind::ALL {
        for axis in [0, 2] {
            out.push(Pattern::new(
                format!("input {kind}, axis {axis} of 3"),
                structured(op, dtype, kind, ValueRegime::Ordinary, axis),
            ));
        }
    }
    out.push(Pattern::new(
        "axis 1 of 3",
        structured(op, dtype, LayoutKind::Contiguous, ValueRegime::Ordinary, 1),
    ));
    for regime in [
        ValueRegime::Huge,
        ValueRegime::Shifted,
        ValueRegime::Ties,
        ValueRegime::Specials,
    ] {
        for axis in [0, 2] {
            out.push(Pattern::new(
                format!("{}, axis {axis} of 3", regime.name()),
                structured(op, dtype, LayoutKind::Contiguous, regime, axis),
            ));
        }
    }
    for (label, special) in [
        ("a row with +inf", f64::INFINITY),
        ("a row with NaN", f64::NAN),
        ("a row of -inf", f64::NEG_INFINITY),
    ] {
        out.push(Pattern::new(label, special_row(op, dtype, special)));
    }
    out
}

/// The maximum of every row along `axis` (kept as size 1): NaN with a NaN, `-inf` when empty.
fn row_max(x: &RefArray, axis: usize) -> RefArray {
    let shape = reduced_shape(&x.shape, &[axis], true);
    RefArray::from_fn(shape, |base| {
        let mut idx = base.to_vec();
        (0..x.shape[axis]).fold(f64::NEG_INFINITY, |m, k| {
            idx[axis] = k;
            let v = x.at(&idx);
            if m.is_nan() || v.is_nan() {
                f64::NAN
            } else {
                m.max(v)
            }
        })
    })
}

/// The error scale of each result element besides `|expected|`, from the terms the stable
/// formula adds (`m` the row maximum, `s = sum(exp(x - m))`):
///
/// * softmax: `|e| * (1 + |x - m| * eps / rel)`: the rounding of the shifted argument `x - m`
///   moves `exp(x - m)` by `|x - m| * eps` relative;
/// * log_softmax: `|x - m| + log(s) + 1`, the two terms of `(x - m) - log(s)` (the `1` for
///   the rounding of `s >= 1` inside the log);
/// * logsumexp: `|m| + log(s) + 1`.
pub fn magnitude(
    case: &SoftmaxCase,
    input: &RefArray,
    expected: &RefArray,
    tol: Tolerance,
) -> RefArray {
    let dtype = case.input.dtype;
    // The 16-bit floats compute in f32 (their final rounding is in the tolerance).
    let eps = match dtype {
        DType::F32 | DType::F16 | DType::BF16 => crate::compare::F32_EPS,
        _ => crate::compare::F64_EPS,
    };
    let m = row_max(input, case.axis);
    let finite = |v: f64| if v.is_finite() { v } else { 0.0 };
    let log_sum = softmax::logsumexp(DType::F64, input, case.axis);
    let log_s = RefArray::from_fn(m.shape.clone(), |i| finite(log_sum.at(i) - m.at(i)).abs());
    match case.op {
        SoftmaxOp::LogSumExp => {
            let kept = RefArray::from_fn(m.shape.clone(), |i| {
                finite(m.at(i)).abs() + log_s.at(i) + 1.0
            });
            let shape = reduced_shape(&input.shape, &[case.axis], case.keepdim);
            views::reshape(&kept, &shape)
        }
        SoftmaxOp::Softmax | SoftmaxOp::LogSoftmax => RefArray::from_fn(input.shape.clone(), |i| {
            let mut row = i.to_vec();
            row[case.axis] = 0;
            let shifted = finite(input.at(i) - m.at(&row)).abs();
            if case.op == SoftmaxOp::Softmax {
                expected.at(i).abs() * (1.0 + shifted * eps / tol.rel)
            } else {
                shifted + log_s.at(&row) + 1.0
            }
        }),
    }
}

/// Compares the op with the reference: the transcendental tolerance plus the accumulation
/// over the row, relative to each element's error scale (see [`magnitude`]).
pub fn check<B: Backend>(dev: &B, case: &SoftmaxCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let x = build(dev, &case.input, "input")?;
    let axis = signed_axis(case.axis, x.rank(), case.axis_from_end);
    let input = case.input.reference();
    let (got, expected) = match case.op {
        SoftmaxOp::Softmax => (x.softmax(axis), softmax::softmax(dtype, &input, case.axis)),
        SoftmaxOp::LogSoftmax => (
            x.log_softmax(axis),
            softmax::log_softmax(dtype, &input, case.axis),
        ),
        SoftmaxOp::LogSumExp => {
            let kept = softmax::logsumexp(dtype, &input, case.axis);
            let shape = reduced_shape(&input.shape, &[case.axis], case.keepdim);
            (
                x.logsumexp(axis, case.keepdim),
                views::reshape(&kept, &shape),
            )
        }
    };
    let got = got.map_err(op_failed(case.op.name(), &[&x]))?;
    let tol = tolerance(dtype, input.shape[case.axis]);
    let scale = magnitude(case, &input, &expected, tol);
    assert_close_scaled(&got, dtype, &expected, &scale, tol).map_err(with_inputs(&[&x]))
}

/// The tolerance along a row of `k` elements: transcendental plus the accumulation of `k`
/// terms.
pub fn tolerance(dtype: DType, k: usize) -> Tolerance {
    let t = Tolerance::transcendental(dtype);
    let row = Tolerance::accumulation(dtype, k);
    Tolerance::loose(t.abs, t.rel + row.rel)
}

/// Checks the three ops on `dtype`: the systematic patterns, then 256 random cases each.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    for op in SoftmaxOp::ALL {
        check_property_systematic(
            &format!("softmax {} {dtype}", op.name()),
            patterns(op, dtype),
            cases(op, dtype),
            |c| check(dev, c),
        );
    }
}
