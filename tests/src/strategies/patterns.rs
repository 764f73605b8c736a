//! Systematic cases: the layout kinds and broadcast patterns every op must handle, enumerated so
//! that each one runs in every run of the suite (the random cases come on top).
//!
//! Random shapes and layouts reach any particular structure only with some probability: a
//! matmul that is wrong when exactly one of two batch dimensions is broadcast is drawn in a
//! few percent of the cases, so some seeds catch it and others do not. A [`Pattern`] fixes the
//! structure (which operand has which layout kind, which axes are broadcast) and leaves only
//! the sizes (each at least 2, so that a broadcast or a permutation is visible) and the values
//! random; [`crate::runner::falsify_systematic`] runs every pattern of a property before its
//! random cases, so the same suite catches the same structural bugs on every seed.
//!
//! * [`LayoutKind`]: contiguous, permuted, sliced with an offset, stepped, broadcast (stride 0).
//! * [`ShapePattern`]: how one operand of an element-wise op relates to the output shape
//!   (which axes are size 1, how many leading axes are missing).
//! * [`ElementwisePattern`]: one shape pattern and one layout kind per operand;
//!   [`elementwise_patterns`] enumerates them for ops of one, two or three operands.

use super::layouts::{LayoutRecipe, TensorCase, ViewStep};
use super::values::{regime_values, ValueRegime};
use proptest::prelude::*;
use std::fmt;
use tessera_core::DType;

/// Cases drawn per pattern in each run.
pub const PATTERN_CASES: u32 = 2;

/// A labelled strategy whose cases all share one structure.
pub struct Pattern<T> {
    /// What the structure is, e.g. `"lhs [a, 1] rhs [b]"` or `"input permuted"`.
    pub label: String,
    /// The cases.
    pub strategy: BoxedStrategy<T>,
}

impl<T: fmt::Debug + 'static> Pattern<T> {
    /// A pattern labelled `label`.
    pub fn new(label: impl Into<String>, strategy: BoxedStrategy<T>) -> Self {
        Pattern {
            label: label.into(),
            strategy,
        }
    }

    /// The same pattern with its cases mapped by `f`.
    pub fn map<U: fmt::Debug + 'static>(self, f: impl Fn(T) -> U + Clone + 'static) -> Pattern<U> {
        Pattern {
            label: self.label,
            strategy: self.strategy.prop_map(f).boxed(),
        }
    }
}

impl<T> fmt::Debug for Pattern<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pattern({})", self.label)
    }
}

/// How a tensor's memory layout relates to its logical shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// Row-major from offset 0.
    Contiguous,
    /// A permutation of the axes that changes the memory order of two axes of size 2 or more.
    Permuted,
    /// A slice starting one or two elements in: a non-zero offset.
    Offset,
    /// A slice with step 2 or 3 along an axis of size 2 or more: gaps between elements.
    Stepped,
    /// Some axes of size 2 or more (and possibly missing leading ones) read with stride 0.
    Broadcast,
}

impl LayoutKind {
    /// Every kind.
    pub const ALL: [LayoutKind; 5] = [
        LayoutKind::Contiguous,
        LayoutKind::Permuted,
        LayoutKind::Offset,
        LayoutKind::Stepped,
        LayoutKind::Broadcast,
    ];

    /// The kinds a written-to tensor can have (no two indices on one element).
    pub const WRITABLE: [LayoutKind; 4] = [
        LayoutKind::Contiguous,
        LayoutKind::Permuted,
        LayoutKind::Offset,
        LayoutKind::Stepped,
    ];

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            LayoutKind::Contiguous => "contiguous",
            LayoutKind::Permuted => "permuted",
            LayoutKind::Offset => "offset",
            LayoutKind::Stepped => "stepped",
            LayoutKind::Broadcast => "broadcast",
        }
    }

    /// Whether `shape` admits a layout of this kind that is visibly not contiguous (a
    /// permutation needs two axes of size 2+, an offset one non-empty tensor of rank 1+,
    /// steps and broadcasts an axis of size 2+).
    pub fn fits(self, shape: &[usize]) -> bool {
        let big = shape.iter().filter(|&&d| d >= 2).count();
        let nonempty = shape.iter().all(|&d| d > 0);
        match self {
            LayoutKind::Contiguous => true,
            LayoutKind::Permuted => big >= 2 && nonempty,
            LayoutKind::Offset => !shape.is_empty() && nonempty,
            LayoutKind::Stepped | LayoutKind::Broadcast => big >= 1 && nonempty,
        }
    }
}

impl fmt::Display for LayoutKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A layout recipe of `kind` for the logical `shape` (contiguous when the shape does not fit
/// the kind, see [`LayoutKind::fits`]).
pub fn recipe_of_kind(shape: Vec<usize>, kind: LayoutKind) -> BoxedStrategy<LayoutRecipe> {
    if !kind.fits(&shape) {
        return Just(LayoutRecipe::contiguous(shape)).boxed();
    }
    let rank = shape.len();
    let big: Vec<usize> = (0..rank).filter(|&a| shape[a] >= 2).collect();
    match kind {
        LayoutKind::Contiguous => Just(LayoutRecipe::contiguous(shape)).boxed(),
        LayoutKind::Permuted => {
            let big_axes = big.clone();
            Just((0..rank).collect::<Vec<usize>>())
                .prop_shuffle()
                .prop_filter("the order of two axes of size 2+ changes", move |perm| {
                    let order: Vec<usize> = perm
                        .iter()
                        .copied()
                        .filter(|p| big_axes.contains(p))
                        .collect();
                    order.windows(2).any(|w| w[0] > w[1])
                })
                .prop_map(move |perm| {
                    let mut source = vec![0; rank];
                    for (i, &p) in perm.iter().enumerate() {
                        source[p] = shape[i];
                    }
                    LayoutRecipe {
                        source_shape: source,
                        steps: vec![ViewStep::Permute { perm }],
                    }
                })
                .boxed()
        }
        LayoutKind::Offset => (0..rank, 1usize..=2, 0usize..=2)
            .prop_map(move |(axis, start, extra)| {
                let mut source = shape.clone();
                source[axis] = start + shape[axis] + extra;
                LayoutRecipe {
                    source_shape: source,
                    steps: vec![ViewStep::Slice {
                        axis,
                        start,
                        end: start + shape[axis],
                        step: 1,
                    }],
                }
            })
            .boxed(),
        LayoutKind::Stepped => (prop::sample::select(big), 2usize..=3, 0usize..=1)
            .prop_map(move |(axis, step, start)| {
                let mut source = shape.clone();
                let end = start + (shape[axis] - 1) * step + 1;
                source[axis] = end + step - 1;
                LayoutRecipe {
                    source_shape: source,
                    steps: vec![ViewStep::Slice {
                        axis,
                        start,
                        end,
                        step,
                    }],
                }
            })
            .boxed(),
        LayoutKind::Broadcast => {
            let n = big.len();
            (
                prop::collection::vec(any::<bool>(), n),
                0usize..n,
                0..=rank.min(1),
            )
                .prop_map(move |(mut ones, forced, drop)| {
                    ones[forced] = true;
                    let mut source = shape.clone();
                    for (k, &a) in big.iter().enumerate() {
                        if ones[k] {
                            source[a] = 1;
                        }
                    }
                    // A missing leading axis is a broadcast too, when it is one of the ones.
                    let drop = if drop == 1 && source[0] == 1 { 1 } else { 0 };
                    LayoutRecipe {
                        source_shape: source[drop..].to_vec(),
                        steps: vec![ViewStep::Broadcast {
                            shape: shape.clone(),
                        }],
                    }
                })
                .boxed()
        }
    }
}

/// A tensor of `dtype` and logical `shape` laid out as `kind`, its source values drawn from
/// `value`.
pub fn tensor_case_of_kind(
    dtype: DType,
    shape: Vec<usize>,
    kind: LayoutKind,
    value: BoxedStrategy<f64>,
) -> BoxedStrategy<TensorCase> {
    recipe_of_kind(shape, kind)
        .prop_flat_map(move |recipe| {
            prop::collection::vec(value.clone(), recipe.source_numel()).prop_map(move |source| {
                TensorCase {
                    dtype,
                    recipe: recipe.clone(),
                    source,
                }
            })
        })
        .boxed()
}

/// A tensor of `dtype` and logical `shape` laid out as `kind`, its values from `regime` (one
/// offset for the whole tensor in [`ValueRegime::Shifted`]).
pub fn tensor_case_in_regime(
    dtype: DType,
    shape: Vec<usize>,
    kind: LayoutKind,
    regime: ValueRegime,
) -> BoxedStrategy<TensorCase> {
    recipe_of_kind(shape, kind)
        .prop_flat_map(move |recipe| {
            regime_values(dtype, regime, recipe.source_numel()).prop_map(move |source| TensorCase {
                dtype,
                recipe: recipe.clone(),
                source,
            })
        })
        .boxed()
}

/// How an operand of an element-wise op relates to the output shape: `missing` leading axes
/// dropped, then each remaining axis either the output's size or 1 (`ones`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapePattern {
    /// Leading output axes the operand does not have.
    pub missing: usize,
    /// For each remaining axis, whether the operand has size 1 there.
    pub ones: Vec<bool>,
}

impl ShapePattern {
    /// The output shape itself.
    pub fn full(rank: usize) -> Self {
        ShapePattern {
            missing: 0,
            ones: vec![false; rank],
        }
    }

    /// Every pattern of an operand of an output of `rank`: any leading axes missing, any of the
    /// others size 1 (`2 + 4 + ... + 2^rank` patterns, 7 for rank 2).
    pub fn all(rank: usize) -> Vec<ShapePattern> {
        (0..=rank)
            .flat_map(|missing| {
                let kept = rank - missing;
                (0..1usize << kept).map(move |mask| ShapePattern {
                    missing,
                    ones: (0..kept).map(|a| mask >> a & 1 == 1).collect(),
                })
            })
            .collect()
    }

    /// Whether the operand reads the output shape unchanged.
    pub fn is_full(&self) -> bool {
        self.missing == 0 && !self.ones.contains(&true)
    }

    /// The operand's shape for output dims `out`.
    pub fn apply(&self, out: &[usize]) -> Vec<usize> {
        out[self.missing..]
            .iter()
            .zip(&self.ones)
            .map(|(&d, &one)| if one { 1 } else { d })
            .collect()
    }
}

impl fmt::Display for ShapePattern {
    /// `[a, 1]`, `[c]`, `[]`: letters for the output's sizes, 1 for broadcast axes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = ["a", "b", "c", "d", "e", "f"];
        let parts: Vec<&str> = self
            .ones
            .iter()
            .enumerate()
            .map(|(i, &one)| if one { "1" } else { names[self.missing + i] })
            .collect();
        write!(f, "[{}]", parts.join(", "))
    }
}

/// The structure of one case of an element-wise op: the output rank and, per operand, its
/// shape pattern and layout kind.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ElementwisePattern {
    /// Rank of the output.
    pub out_rank: usize,
    /// Shape pattern and layout kind of each operand.
    pub operands: Vec<(ShapePattern, LayoutKind)>,
}

impl ElementwisePattern {
    /// A label naming each operand (`names`) with its shape and, when not contiguous, its kind.
    pub fn label(&self, names: &[&str]) -> String {
        self.operands
            .iter()
            .zip(names)
            .map(|((shape, kind), name)| match kind {
                LayoutKind::Contiguous => format!("{name} {shape}"),
                k => format!("{name} {shape} {k}"),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The operands: output sizes `2..=4`, operand `i` of `dtypes[i]` with values from
    /// `regimes[i]`.
    pub fn strategy(
        &self,
        dtypes: Vec<DType>,
        regimes: Vec<ValueRegime>,
    ) -> BoxedStrategy<Vec<TensorCase>> {
        let operands = self.operands.clone();
        prop::collection::vec(2usize..=4, self.out_rank)
            .prop_flat_map(move |out| {
                operands
                    .iter()
                    .zip(&dtypes)
                    .zip(&regimes)
                    .map(|(((shape, kind), &dtype), &regime)| {
                        tensor_case_in_regime(dtype, shape.apply(&out), *kind, regime)
                    })
                    .collect::<Vec<_>>()
            })
            .boxed()
    }
}

/// The systematic patterns of an element-wise op of `operands` operands (1 to 3):
///
/// * every layout kind on every operand, the others contiguous, at rank 3 (no broadcasting:
///   [`same_shape_patterns`]);
/// * for two operands, every pair of rank-2 shape patterns (49: which operand, which axes are
///   size 1, which leading axes missing) and each single axis of a rank-3 output broadcast in
///   each operand;
/// * for three operands, each rank-2 shape pattern of each operand, the others full.
pub fn elementwise_patterns(operands: usize) -> Vec<ElementwisePattern> {
    let full = |rank| (ShapePattern::full(rank), LayoutKind::Contiguous);
    let mut out = same_shape_patterns(operands);
    let single_axis = |axis: usize| ShapePattern {
        missing: 0,
        ones: (0..3).map(|a| a == axis).collect(),
    };
    match operands {
        2 => {
            for l in ShapePattern::all(2) {
                for r in ShapePattern::all(2) {
                    out.push(ElementwisePattern {
                        out_rank: 2,
                        operands: vec![
                            (l.clone(), LayoutKind::Contiguous),
                            (r, LayoutKind::Contiguous),
                        ],
                    });
                }
            }
            for i in 0..2 {
                for axis in 0..3 {
                    let mut ops = vec![full(3); 2];
                    ops[i].0 = single_axis(axis);
                    out.push(ElementwisePattern {
                        out_rank: 3,
                        operands: ops,
                    });
                }
            }
        }
        3 => {
            for i in 0..3 {
                for s in ShapePattern::all(2).into_iter().filter(|s| !s.is_full()) {
                    let mut ops = vec![full(2); 3];
                    ops[i].0 = s;
                    out.push(ElementwisePattern {
                        out_rank: 2,
                        operands: ops,
                    });
                }
            }
        }
        _ => {}
    }
    distinct(out)
}

/// The layout kinds of same-shape operands: each kind on each operand, the others contiguous,
/// at rank 3 with sizes `2..=4` (for ops whose operands share one shape, and the first part of
/// [`elementwise_patterns`]).
pub fn same_shape_patterns(operands: usize) -> Vec<ElementwisePattern> {
    let patterns = (0..operands).flat_map(|i| {
        LayoutKind::ALL.into_iter().map(move |kind| {
            let mut ops = vec![(ShapePattern::full(3), LayoutKind::Contiguous); operands];
            ops[i].1 = kind;
            ElementwisePattern {
                out_rank: 3,
                operands: ops,
            }
        })
    });
    distinct(patterns.collect())
}

/// `items` without repetitions, in their first order.
fn distinct<T: PartialEq>(items: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::with_capacity(items.len());
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    use tessera_core::Layout;

    #[test]
    fn each_kind_builds_the_layout_it_names() {
        let mut runner = TestRunner::deterministic();
        for shape in [vec![2, 3], vec![3, 1, 2], vec![4, 2, 3, 2]] {
            for kind in LayoutKind::ALL {
                for _ in 0..20 {
                    let recipe = recipe_of_kind(shape.clone(), kind)
                        .new_tree(&mut runner)
                        .unwrap()
                        .current();
                    assert_eq!(recipe.shape(), shape);
                    let l = recipe.layout().unwrap();
                    let (d, s) = (l.dims(), l.strides());
                    let contiguous = Layout::contiguous(shape.clone());
                    match kind {
                        LayoutKind::Contiguous => assert_eq!(l, contiguous),
                        LayoutKind::Permuted => {
                            assert_eq!(l.offset(), 0);
                            assert!(s.iter().all(|&x| x > 0));
                            assert_ne!(s, contiguous.strides(), "{recipe:?}");
                        }
                        LayoutKind::Offset => assert!(l.offset() > 0, "{recipe:?}"),
                        LayoutKind::Stepped => assert!(
                            (0..d.len()).any(|a| d[a] >= 2 && s[a] > contiguous.strides()[a]),
                            "{recipe:?}"
                        ),
                        LayoutKind::Broadcast => {
                            assert!((0..d.len()).any(|a| d[a] >= 2 && s[a] == 0), "{recipe:?}")
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_enumeration_covers_every_broadcast_pair() {
        assert_eq!(ShapePattern::all(2).len(), 7);
        let two = elementwise_patterns(2);
        let pairs: Vec<_> = two
            .iter()
            .filter(|p| p.out_rank == 2)
            .map(|p| (p.operands[0].0.clone(), p.operands[1].0.clone()))
            .collect();
        assert_eq!(pairs.len(), 49);
        for l in ShapePattern::all(2) {
            for r in ShapePattern::all(2) {
                assert!(pairs.contains(&(l.clone(), r.clone())), "{l} {r}");
            }
        }
        for operand in 0..2 {
            for kind in LayoutKind::ALL {
                assert!(two.iter().any(|p| p.operands[operand].1 == kind));
            }
        }
        assert_eq!(elementwise_patterns(1).len(), 5);
        assert_eq!(elementwise_patterns(3).len(), 5 * 3 - 2 + 3 * 6);
        assert_eq!(same_shape_patterns(2).len(), 9);
        let p = &two[10];
        assert!(
            p.label(&["lhs", "rhs"]).starts_with("lhs ["),
            "{}",
            p.label(&["lhs", "rhs"])
        );
    }
}
