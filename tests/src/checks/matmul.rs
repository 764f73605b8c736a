//! Matrix products: rank-1 promotion, batch broadcasting and operands of any layout
//! (a transposed operand comes from the layout recipes).

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close_scaled, Tolerance};
use crate::reference::linalg;
use crate::runner::check_property_systematic;
use crate::strategies::{
    broadcastable_to, shape_with, special_rate, tensor_case, tensor_case_in_regime, LayoutKind,
    LayoutRecipe, Pattern, ShapePattern, TensorCase, ValueProfile, ValueRegime, ViewStep,
};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// One matrix product.
#[derive(Clone, Debug)]
pub struct MatmulCase {
    /// Left operand: `[k]` or `[..batch, m, k]`.
    pub lhs: TensorCase,
    /// Right operand: `[k]` or `[..batch, k, n]`.
    pub rhs: TensorCase,
}

/// The operand shapes: `m, k, n` in `0..=5`, a batch of rank `0..=2` (dims `0..=3`) that each
/// side may broadcast, and each side rank-1 with probability 1/5.
pub fn shapes() -> BoxedStrategy<(Vec<usize>, Vec<usize>)> {
    (
        0usize..=5,
        0usize..=5,
        0usize..=5,
        shape_with(0..=2, 0..=3),
        0u8..5,
        0u8..5,
    )
        .prop_flat_map(|(m, k, n, batch, l1, r1)| {
            (
                Just((m, k, n)),
                broadcastable_to(batch.clone()),
                broadcastable_to(batch),
                Just((l1 == 0, r1 == 0)),
            )
        })
        .prop_map(|((m, k, n), lb, rb, (l_vec, r_vec))| {
            let lhs = if l_vec {
                vec![k]
            } else {
                [lb, vec![m, k]].concat()
            };
            let rhs = if r_vec {
                vec![k]
            } else {
                [rb, vec![k, n]].concat()
            };
            (lhs, rhs)
        })
        .boxed()
}

/// Cases on `dtype` (f32 or f64).
pub fn cases(dtype: DType) -> BoxedStrategy<MatmulCase> {
    (shapes(), special_rate())
        .prop_flat_map(move |((l, r), special)| {
            let profile = ValueProfile::DEFAULT.with_specials(special / 3);
            (
                tensor_case(dtype, l, profile),
                tensor_case(dtype, r, profile),
            )
        })
        .prop_map(|(lhs, rhs)| MatmulCase { lhs, rhs })
        .boxed()
}

/// A contiguous operand of `shape` with ordinary values.
fn operand(dtype: DType, shape: Vec<usize>) -> BoxedStrategy<TensorCase> {
    tensor_case_in_regime(dtype, shape, LayoutKind::Contiguous, ValueRegime::Ordinary)
}

/// An operand whose last two axes are transposed views of a contiguous source.
fn transposed(dtype: DType, shape: Vec<usize>) -> BoxedStrategy<TensorCase> {
    let rank = shape.len();
    let mut source = shape.clone();
    source.swap(rank - 2, rank - 1);
    let mut perm: Vec<usize> = (0..rank).collect();
    perm.swap(rank - 2, rank - 1);
    let recipe = LayoutRecipe {
        source_shape: source,
        steps: vec![ViewStep::Permute { perm }],
    };
    let n = recipe.source_numel();
    crate::strategies::regime_values(dtype, ValueRegime::Ordinary, n)
        .prop_map(move |source| TensorCase {
            dtype,
            recipe: recipe.clone(),
            source,
        })
        .boxed()
}

/// The systematic cases on `dtype`:
///
/// * every pair of batch patterns of a two-axis batch `[a, b]` (49: each operand's batch axes
///   present, size 1 or missing), so that "one of two batch dims broadcast" runs every time;
/// * rank-1 promotion of either or both operands;
/// * every layout kind of each operand (`[batch, m, k]`), and a transposed matrix on each side.
pub fn patterns(dtype: DType) -> Vec<Pattern<MatmulCase>> {
    let mut out = Vec::new();
    let dims = || (2usize..=3, 2usize..=3, 2usize..=3, 2usize..=3, 2usize..=3);
    for lb in ShapePattern::all(2) {
        for rb in ShapePattern::all(2) {
            let (l, r) = (lb.clone(), rb.clone());
            let strategy = dims()
                .prop_flat_map(move |(a, b, m, k, n)| {
                    let batch = [a, b];
                    (
                        operand(dtype, [l.apply(&batch), vec![m, k]].concat()),
                        operand(dtype, [r.apply(&batch), vec![k, n]].concat()),
                    )
                })
                .prop_map(|(lhs, rhs)| MatmulCase { lhs, rhs })
                .boxed();
            out.push(Pattern::new(format!("batch: lhs {lb} rhs {rb}"), strategy));
        }
    }
    for (label, l_vec, r_vec) in [
        ("lhs rank 1", true, false),
        ("rhs rank 1", false, true),
        ("both rank 1", true, true),
    ] {
        let strategy = dims()
            .prop_flat_map(move |(a, _, m, k, n)| {
                let l = if l_vec { vec![k] } else { vec![a, m, k] };
                let r = if r_vec { vec![k] } else { vec![a, k, n] };
                (operand(dtype, l), operand(dtype, r))
            })
            .prop_map(|(lhs, rhs)| MatmulCase { lhs, rhs })
            .boxed();
        out.push(Pattern::new(label, strategy));
    }
    for side in ["lhs", "rhs"] {
        let layouts: Vec<(String, LayoutKind, bool)> = LayoutKind::ALL
            .into_iter()
            .map(|k| (k.name().to_string(), k, false))
            .chain([("transposed".to_string(), LayoutKind::Contiguous, true)])
            .collect();
        for (name, kind, transpose) in layouts {
            let strategy = dims()
                .prop_flat_map(move |(a, _, m, k, n)| {
                    let (l, r) = (vec![a, m, k], vec![a, k, n]);
                    let special = |shape: Vec<usize>| {
                        if transpose {
                            transposed(dtype, shape)
                        } else {
                            tensor_case_in_regime(dtype, shape, kind, ValueRegime::Ordinary)
                        }
                    };
                    if side == "lhs" {
                        (special(l), operand(dtype, r))
                    } else {
                        (operand(dtype, l), special(r))
                    }
                })
                .prop_map(|(lhs, rhs)| MatmulCase { lhs, rhs })
                .boxed();
            out.push(Pattern::new(format!("{side} {name}"), strategy));
        }
    }
    out
}

/// Compares `lhs.matmul(rhs)` with the triple loop; the error scale is `|lhs| @ |rhs|`.
pub fn check<B: Backend>(dev: &B, case: &MatmulCase) -> Result<(), String> {
    let dtype = case.lhs.dtype;
    let a = build(dev, &case.lhs, "lhs")?;
    let b = build(dev, &case.rhs, "rhs")?;
    let got = a.matmul(&b).map_err(op_failed("matmul", &[&a, &b]))?;
    let (ra, rb) = (case.lhs.reference(), case.rhs.reference());
    let expected = linalg::matmul(dtype, &ra, &rb);
    let magnitude = linalg::matmul(DType::F64, &ra.abs(), &rb.abs());
    let k = *ra.shape.last().expect("rank >= 1");
    assert_close_scaled(
        &got,
        dtype,
        &expected,
        &magnitude,
        Tolerance::accumulation(dtype, k),
    )
    .map_err(with_inputs(&[&a, &b]))
}

/// Checks matmul on `dtype`: the systematic patterns, then 256 random cases.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    check_property_systematic(
        &format!("matmul {dtype}"),
        patterns(dtype),
        cases(dtype),
        |c| check(dev, c),
    );
}
