//! Chains of views (reshape, permute, transpose, narrow, slice, squeeze, unsqueeze, flatten,
//! contiguous) on tensors of any layout, each step compared with the reference views.
//!
//! Steps are drawn with raw parameters and resolved against the current shape when applied
//! (e.g. an axis is taken modulo the rank), so any chain is valid and shrinks well.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, Tolerance};
use crate::reference::{numel, views, RefArray};
use crate::runner::check_property_systematic;
use crate::strategies::{
    shape, tensor_case, tensor_case_in_regime, LayoutKind, Pattern, TensorCase, ValueProfile,
    ValueRegime,
};
use proptest::prelude::*;
use tessera_core::{Backend, BackendStorage, DType, Tensor};

/// A view step with unresolved parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum ViewOp {
    /// Reshape to candidate shape number `pick` (same element count).
    Reshape {
        /// Candidate index (modulo the number of candidates).
        pick: usize,
    },
    /// Reshape to a candidate and back to the current shape.
    ReshapeRoundTrip {
        /// Candidate index.
        pick: usize,
    },
    /// Permute by the stable argsort of `keys[..rank]`.
    Permute {
        /// Sort keys.
        keys: Vec<u8>,
    },
    /// Swap two axes.
    Transpose {
        /// First axis (modulo rank).
        a: usize,
        /// Second axis (modulo rank).
        b: usize,
    },
    /// `narrow(axis, start, len)`.
    Narrow {
        /// Axis (modulo rank).
        axis: usize,
        /// Start (modulo size + 1).
        start: usize,
        /// Length (modulo what remains + 1).
        len: usize,
    },
    /// `slice(axis, start, end, step)`.
    Slice {
        /// Axis (modulo rank).
        axis: usize,
        /// Start (modulo size + 1).
        start: usize,
        /// Step (1..=3).
        step: usize,
    },
    /// Remove the first size-1 axis at or after `axis` (skipped when there is none).
    Squeeze {
        /// Axis to start looking from (modulo rank).
        axis: usize,
    },
    /// Insert a size-1 axis at `axis` (modulo rank + 1), passed counted from the end when asked.
    Unsqueeze {
        /// Position.
        axis: usize,
        /// Pass it as a negative axis.
        from_end: bool,
    },
    /// `flatten(start, end)` of two axes sorted.
    Flatten {
        /// One axis (modulo rank).
        a: usize,
        /// The other axis (modulo rank).
        b: usize,
    },
    /// `contiguous()` (which must give a contiguous layout).
    Contiguous,
    /// `compact()` (which must give a contiguous tensor that is its whole storage).
    Compact,
}

/// Candidate reshapes for `n` elements: `[n]`, `[1, n]`, `[n, 1]`, `[d, n / d]` for divisors,
/// `[]` when `n == 1`, shapes with a 0 when `n == 0`.
pub fn reshape_candidates(n: usize) -> Vec<Vec<usize>> {
    let mut out = vec![vec![n], vec![1, n], vec![n, 1]];
    if n == 1 {
        out.push(vec![]);
    }
    if n == 0 {
        out.extend([vec![0, 3], vec![2, 0, 2], vec![5, 0]]);
    }
    for d in 2..n {
        if n % d == 0 {
            out.push(vec![d, n / d]);
            if d > 2 && (n / d) % 2 == 0 {
                out.push(vec![d, 2, n / d / 2]);
            }
        }
    }
    out
}

/// A view step resolved against a shape: the exact call to make.
#[derive(Clone, Debug)]
enum Resolved {
    Reshape(Vec<usize>),
    RoundTrip(Vec<usize>, Vec<usize>),
    Permute(Vec<usize>),
    Transpose(usize, usize),
    Narrow(usize, usize, usize),
    Slice(usize, usize, usize, usize),
    Squeeze(usize),
    Unsqueeze(usize, bool),
    Flatten(usize, usize),
    Contiguous,
    Compact,
}

impl ViewOp {
    fn resolve(&self, shape: &[usize]) -> Option<Resolved> {
        let rank = shape.len();
        let needs_axis = !matches!(
            self,
            ViewOp::Reshape { .. }
                | ViewOp::ReshapeRoundTrip { .. }
                | ViewOp::Unsqueeze { .. }
                | ViewOp::Contiguous
                | ViewOp::Compact
        );
        if needs_axis && rank == 0 {
            return None;
        }
        Some(match self {
            ViewOp::Reshape { pick } => {
                let c = reshape_candidates(numel(shape));
                Resolved::Reshape(c[pick % c.len()].clone())
            }
            ViewOp::ReshapeRoundTrip { pick } => {
                let c = reshape_candidates(numel(shape));
                Resolved::RoundTrip(c[pick % c.len()].clone(), shape.to_vec())
            }
            ViewOp::Permute { keys } => {
                let mut perm: Vec<usize> = (0..rank).collect();
                perm.sort_by_key(|&i| keys[i % keys.len()]);
                Resolved::Permute(perm)
            }
            ViewOp::Transpose { a, b } => Resolved::Transpose(a % rank, b % rank),
            ViewOp::Narrow { axis, start, len } => {
                let axis = axis % rank;
                let start = start % (shape[axis] + 1);
                let len = len % (shape[axis] - start + 1);
                Resolved::Narrow(axis, start, len)
            }
            ViewOp::Slice { axis, start, step } => {
                let axis = axis % rank;
                Resolved::Slice(axis, start % (shape[axis] + 1), shape[axis], *step)
            }
            ViewOp::Squeeze { axis } => {
                let from = axis % rank;
                let found = (from..rank).chain(0..from).find(|&a| shape[a] == 1)?;
                Resolved::Squeeze(found)
            }
            ViewOp::Unsqueeze { axis, from_end } => {
                Resolved::Unsqueeze(axis % (rank + 1), *from_end)
            }
            ViewOp::Flatten { a, b } => {
                let (a, b) = (a % rank, b % rank);
                Resolved::Flatten(a.min(b), a.max(b))
            }
            ViewOp::Contiguous => Resolved::Contiguous,
            ViewOp::Compact => Resolved::Compact,
        })
    }
}

impl Resolved {
    fn apply_tensor<B: Backend>(&self, t: &Tensor<B>) -> tessera_core::Result<Tensor<B>> {
        match self {
            Resolved::Reshape(s) => t.reshape(s.clone()),
            Resolved::RoundTrip(s, back) => t.reshape(s.clone())?.reshape(back.clone()),
            Resolved::Permute(p) => t.permute(p),
            Resolved::Transpose(a, b) => t.transpose(*a as isize, *b as isize),
            Resolved::Narrow(a, s, l) => t.narrow(*a as isize, *s, *l),
            Resolved::Slice(a, s, e, st) => t.slice(*a as isize, *s, *e, *st),
            Resolved::Squeeze(a) => t.squeeze(*a as isize),
            Resolved::Unsqueeze(a, from_end) => {
                let axis = if *from_end {
                    *a as isize - (t.rank() as isize + 1)
                } else {
                    *a as isize
                };
                t.unsqueeze(axis)
            }
            Resolved::Flatten(s, e) => t.flatten(*s as isize, *e as isize),
            Resolved::Contiguous => t.contiguous(),
            Resolved::Compact => t.compact(),
        }
    }

    fn apply_ref(&self, x: &RefArray) -> RefArray {
        match self {
            Resolved::Reshape(s) => views::reshape(x, s),
            Resolved::RoundTrip(_, _) => x.clone(),
            Resolved::Permute(p) => views::permute(x, p),
            Resolved::Transpose(a, b) => views::transpose(x, *a, *b),
            Resolved::Narrow(a, s, l) => views::narrow(x, *a, *s, *l),
            Resolved::Slice(a, s, e, st) => views::slice(x, *a, *s, *e, *st),
            Resolved::Squeeze(a) => views::squeeze(x, *a),
            Resolved::Unsqueeze(a, _) => views::unsqueeze(x, *a),
            Resolved::Flatten(s, e) => views::flatten(x, *s, *e),
            Resolved::Contiguous | Resolved::Compact => x.clone(),
        }
    }
}

/// A chain of views applied to a tensor.
#[derive(Clone, Debug)]
pub struct ViewCase {
    /// The starting tensor.
    pub input: TensorCase,
    /// The steps, in order.
    pub ops: Vec<ViewOp>,
}

/// A random view step.
pub fn view_op() -> BoxedStrategy<ViewOp> {
    prop_oneof![
        any::<usize>().prop_map(|pick| ViewOp::Reshape { pick }),
        any::<usize>().prop_map(|pick| ViewOp::ReshapeRoundTrip { pick }),
        prop::collection::vec(any::<u8>(), 4).prop_map(|keys| ViewOp::Permute { keys }),
        (0usize..4, 0usize..4).prop_map(|(a, b)| ViewOp::Transpose { a, b }),
        (0usize..4, 0usize..6, 0usize..6).prop_map(|(axis, start, len)| ViewOp::Narrow {
            axis,
            start,
            len
        }),
        (0usize..4, 0usize..6, 1usize..=3).prop_map(|(axis, start, step)| ViewOp::Slice {
            axis,
            start,
            step
        }),
        (0usize..4).prop_map(|axis| ViewOp::Squeeze { axis }),
        (0usize..5, any::<bool>())
            .prop_map(|(axis, from_end)| ViewOp::Unsqueeze { axis, from_end }),
        (0usize..4, 0usize..4).prop_map(|(a, b)| ViewOp::Flatten { a, b }),
        Just(ViewOp::Contiguous),
        Just(ViewOp::Compact),
    ]
    .boxed()
}

/// Chains of 1..=4 steps on a tensor of `dtype`.
pub fn cases(dtype: DType) -> BoxedStrategy<ViewCase> {
    shape()
        .prop_flat_map(move |s| {
            (
                tensor_case(dtype, s, ValueProfile::DEFAULT),
                prop::collection::vec(view_op(), 1..=4),
            )
        })
        .prop_map(|(input, ops)| ViewCase { input, ops })
        .boxed()
}

/// The systematic cases on `dtype`: a chain from a rank-3 tensor (sizes `2..=4`) of every
/// layout kind.
pub fn patterns(dtype: DType) -> Vec<Pattern<ViewCase>> {
    LayoutKind::ALL
        .into_iter()
        .map(|kind| {
            let strategy = prop::collection::vec(2usize..=4, 3)
                .prop_flat_map(move |s| {
                    (
                        tensor_case_in_regime(dtype, s, kind, ValueRegime::Specials),
                        prop::collection::vec(view_op(), 1..=4),
                    )
                })
                .prop_map(|(input, ops)| ViewCase { input, ops })
                .boxed();
            Pattern::new(format!("input {kind}"), strategy)
        })
        .collect()
}

/// Applies the chain, comparing the values after every step (exact: views move nothing).
pub fn check<B: Backend>(dev: &B, case: &ViewCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let mut t = build(dev, &case.input, "input")?;
    let mut r = case.input.reference();
    assert_close(&t, dtype, &r, Tolerance::EXACT).map_err(with_inputs(&[&t]))?;
    for (i, op) in case.ops.iter().enumerate() {
        let Some(step) = op.resolve(&r.shape) else {
            continue;
        };
        let before = t.clone();
        t = step
            .apply_tensor(&t)
            .map_err(op_failed(&format!("step {i} {step:?}"), &[&before]))?;
        r = step.apply_ref(&r);
        if matches!(step, Resolved::Contiguous) && !t.is_contiguous() {
            return Err(format!(
                "step {i}: contiguous() gave layout {:?}",
                t.layout()
            ));
        }
        if matches!(step, Resolved::Compact) && t.numel() > 0 {
            if !t.is_contiguous() || t.storage().len() != t.numel() {
                return Err(format!(
                    "step {i}: compact() gave layout {:?} over a storage of {} elements",
                    t.layout(),
                    t.storage().len()
                ));
            }
            let whole = before.is_contiguous() && before.storage().len() == before.numel();
            if whole != std::sync::Arc::ptr_eq(t.storage_arc(), before.storage_arc()) {
                return Err(format!(
                    "step {i}: compact() of a tensor that {} its whole storage {} it",
                    if whole { "is" } else { "is not" },
                    if whole { "copied" } else { "did not copy" }
                ));
            }
        }
        assert_close(&t, dtype, &r, Tolerance::EXACT)
            .map_err(|e| format!("after step {i} {step:?}: {e}"))
            .map_err(with_inputs(&[&before]))?;
    }
    Ok(())
}

/// Checks view chains on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, dtype: DType) {
    check_property_systematic(
        &format!("views {dtype}"),
        patterns(dtype),
        cases(dtype),
        |c| check(dev, c),
    );
}
