//! Metamorphic properties: relations between the backend's own results that hold whatever the
//! exact values are (transposing twice is the identity, a sum of partial sums is the total,
//! broadcasting equals explicit expansion, matrix products associate, ...). They need no
//! reference, so they catch bugs a reference shares (a wrong convention) and check composition:
//! an op applied to the output of another.

use super::{build, op_failed};
use crate::compare::{assert_close, assert_close_scaled, Tolerance};
use crate::reference::{linalg, reduce, RefArray};
use crate::runner::check_property;
use crate::strategies::{
    axis_subset, broadcast_pair, shape, shape_with, tensor_case, TensorCase, ValueProfile,
};
use proptest::prelude::*;
use tessera_core::{Backend, BinaryOp, DType, ReduceOp, Tensor};

/// A relation between results that must hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Law {
    /// `x.transpose(a, b).contiguous().transpose(a, b) == x`, exactly.
    TransposeTwice,
    /// `x.reshape([n]).reshape(shape) == x` and `x.contiguous() == x`, exactly.
    ReshapeRoundTrip,
    /// `x.sum(A).sum(rest) == x.sum_all()` within the accumulation tolerance.
    SumOfSums,
    /// `x.max(A).max(rest) == x.max_all()`, exactly (NaN included).
    MaxOfMaxes,
    /// `a op b == expand(a) op expand(b)` for a broadcasting binary op.
    BroadcastIsExpansion,
    /// `(a @ b) @ c == a @ (b @ c)` within tolerance.
    MatmulAssociativity,
    /// `(a @ b)ᵀ == bᵀ @ aᵀ` within tolerance.
    MatmulTranspose,
    /// `cat([a, b], axis)` narrowed back gives `a` and `b`, exactly.
    CatThenNarrow,
    /// `softmax(x, axis).sum(axis) == 1` for finite `x`.
    SoftmaxSumsToOne,
    /// `x.gather(axis, x.argmax(axis)) == x.max(axis)`, exactly.
    ArgmaxPointsAtMax,
    /// `x.mean(A) * count == x.sum(A)` within tolerance.
    MeanTimesCount,
}

impl Law {
    /// Every law.
    pub const ALL: [Law; 11] = [
        Law::TransposeTwice,
        Law::ReshapeRoundTrip,
        Law::SumOfSums,
        Law::MaxOfMaxes,
        Law::BroadcastIsExpansion,
        Law::MatmulAssociativity,
        Law::MatmulTranspose,
        Law::CatThenNarrow,
        Law::SoftmaxSumsToOne,
        Law::ArgmaxPointsAtMax,
        Law::MeanTimesCount,
    ];

    /// Snake-case name.
    pub fn name(self) -> &'static str {
        match self {
            Law::TransposeTwice => "transpose_twice",
            Law::ReshapeRoundTrip => "reshape_round_trip",
            Law::SumOfSums => "sum_of_sums",
            Law::MaxOfMaxes => "max_of_maxes",
            Law::BroadcastIsExpansion => "broadcast_is_expansion",
            Law::MatmulAssociativity => "matmul_associativity",
            Law::MatmulTranspose => "matmul_transpose",
            Law::CatThenNarrow => "cat_then_narrow",
            Law::SoftmaxSumsToOne => "softmax_sums_to_one",
            Law::ArgmaxPointsAtMax => "argmax_points_at_max",
            Law::MeanTimesCount => "mean_times_count",
        }
    }

    /// The dtypes the law is checked on.
    pub fn dtypes(self) -> Vec<DType> {
        match self {
            Law::TransposeTwice
            | Law::ReshapeRoundTrip
            | Law::BroadcastIsExpansion
            | Law::CatThenNarrow => DType::ALL.to_vec(),
            Law::SumOfSums | Law::MaxOfMaxes | Law::ArgmaxPointsAtMax => {
                vec![DType::F32, DType::F64, DType::I64]
            }
            Law::MatmulAssociativity
            | Law::MatmulTranspose
            | Law::SoftmaxSumsToOne
            | Law::MeanTimesCount => vec![DType::F32, DType::F64],
        }
    }
}

/// One instance of a law.
#[derive(Clone, Debug)]
pub struct MetamorphicCase {
    /// The law.
    pub law: Law,
    /// The tensors it relates.
    pub inputs: Vec<TensorCase>,
    /// Axes: the pair transposed, the subset reduced first, or the one axis used.
    pub axes: Vec<usize>,
    /// The binary op of [`Law::BroadcastIsExpansion`].
    pub op: BinaryOp,
}

fn case(law: Law, inputs: Vec<TensorCase>, axes: Vec<usize>) -> MetamorphicCase {
    MetamorphicCase {
        law,
        inputs,
        axes,
        op: BinaryOp::Add,
    }
}

/// One tensor of any shape (non-empty on every axis when `non_empty`) and axes drawn by `axes`.
fn one_tensor(
    law: Law,
    dtype: DType,
    profile: ValueProfile,
    non_empty: bool,
    axes: impl Fn(usize) -> BoxedStrategy<Vec<usize>> + Clone + 'static,
) -> BoxedStrategy<MetamorphicCase> {
    let shapes = if non_empty {
        shape_with(0..=4, 1..=5)
    } else {
        shape()
    };
    shapes
        .prop_flat_map(move |s| {
            let rank = s.len();
            (tensor_case(dtype, s, profile), axes(rank))
        })
        .prop_map(move |(x, axes)| case(law, vec![x], axes))
        .boxed()
}

/// One axis of a tensor of rank `rank` (none for a scalar).
fn one_axis(rank: usize) -> BoxedStrategy<Vec<usize>> {
    if rank == 0 {
        Just(vec![]).boxed()
    } else {
        (0..rank).prop_map(|a| vec![a]).boxed()
    }
}

/// Cases of `law` on `dtype`.
pub fn cases(law: Law, dtype: DType) -> BoxedStrategy<MetamorphicCase> {
    let any = ValueProfile::DEFAULT;
    let finite = ValueProfile::FINITE;
    match law {
        Law::TransposeTwice => one_tensor(law, dtype, any, false, |rank| {
            if rank == 0 {
                Just(vec![]).boxed()
            } else {
                (0..rank, 0..rank).prop_map(|(a, b)| vec![a, b]).boxed()
            }
        }),
        Law::ReshapeRoundTrip => one_tensor(law, dtype, any, false, |_| Just(vec![]).boxed()),
        Law::SumOfSums => one_tensor(law, dtype, any, false, axis_subset),
        Law::MaxOfMaxes => one_tensor(law, dtype, any, true, axis_subset),
        Law::MeanTimesCount => one_tensor(law, dtype, finite, true, axis_subset),
        Law::ArgmaxPointsAtMax => one_tensor(law, dtype, any, true, one_axis)
            .prop_filter("rank > 0", |c| !c.axes.is_empty())
            .boxed(),
        Law::SoftmaxSumsToOne => one_tensor(law, dtype, finite, true, one_axis)
            .prop_filter("rank > 0", |c| !c.axes.is_empty())
            .boxed(),
        Law::BroadcastIsExpansion => {
            let ops: Vec<BinaryOp> = BinaryOp::ALL
                .into_iter()
                .filter(|op| op.supports(dtype))
                .collect();
            (broadcast_pair(), prop::sample::select(ops))
                .prop_flat_map(move |((_, l, r), op)| {
                    (
                        tensor_case(dtype, l, any),
                        tensor_case(dtype, r, any),
                        Just(op),
                    )
                })
                .prop_map(move |(a, b, op)| MetamorphicCase {
                    law,
                    inputs: vec![a, b],
                    axes: vec![],
                    op,
                })
                .boxed()
        }
        Law::MatmulAssociativity => (0usize..=4, 0usize..=4, 0usize..=4, 0usize..=4)
            .prop_flat_map(move |(m, k, l, n)| {
                (
                    tensor_case(dtype, vec![m, k], finite),
                    tensor_case(dtype, vec![k, l], finite),
                    tensor_case(dtype, vec![l, n], finite),
                )
            })
            .prop_map(move |(a, b, c)| case(law, vec![a, b, c], vec![]))
            .boxed(),
        Law::MatmulTranspose => (0usize..=5, 0usize..=5, 0usize..=5)
            .prop_flat_map(move |(m, k, n)| {
                (
                    tensor_case(dtype, vec![m, k], finite),
                    tensor_case(dtype, vec![k, n], finite),
                )
            })
            .prop_map(move |(a, b)| case(law, vec![a, b], vec![]))
            .boxed(),
        Law::CatThenNarrow => shape_with(1..=4, 0..=4)
            .prop_flat_map(move |s| {
                let rank = s.len();
                (Just(s), 0..rank, 0usize..=4, 0usize..=4)
            })
            .prop_flat_map(move |(s, axis, la, lb)| {
                let (mut sa, mut sb) = (s.clone(), s);
                sa[axis] = la;
                sb[axis] = lb;
                (
                    tensor_case(dtype, sa, any),
                    tensor_case(dtype, sb, any),
                    Just(axis),
                )
            })
            .prop_map(move |(a, b, axis)| case(law, vec![a, b], vec![axis]))
            .boxed(),
    }
}

/// A tensor's values as a reference array, to compare it with another result of the backend.
fn values<B: Backend>(t: &Tensor<B>, what: &str) -> Result<RefArray, String> {
    let data = t
        .to_vec_f64()
        .map_err(|e| format!("downloading {what} failed: {e}"))?;
    Ok(RefArray::new(t.dims().to_vec(), data))
}

/// `axes` as the signed axes `tensor-core` takes.
fn signed(axes: &[usize]) -> Vec<isize> {
    axes.iter().map(|&a| a as isize).collect()
}

/// The axes of `rank` not in `axes`.
fn complement(rank: usize, axes: &[usize]) -> Vec<isize> {
    (0..rank)
        .filter(|a| !axes.contains(a))
        .map(|a| a as isize)
        .collect()
}

/// Checks one instance of the law.
pub fn check<B: Backend>(dev: &B, case: &MetamorphicCase) -> Result<(), String> {
    let inputs = case
        .inputs
        .iter()
        .enumerate()
        .map(|(i, c)| build(dev, c, &format!("input {i}")))
        .collect::<Result<Vec<_>, _>>()?;
    let refs: Vec<&Tensor<B>> = inputs.iter().collect();
    let dtype = case.inputs[0].dtype;
    let failed = |what: &str| op_failed::<B, tessera_core::Error>(what, &refs);
    let x = &inputs[0];
    let same = Tolerance::SAME_VALUE;
    let outcome = match case.law {
        Law::TransposeTwice => {
            let (a, b) = match case.axes[..] {
                [a, b] => (a as isize, b as isize),
                _ => (0, 0),
            };
            let back = if x.rank() == 0 {
                x.contiguous()
            } else {
                x.transpose(a, b)
                    .and_then(|t| t.contiguous())
                    .and_then(|t| t.transpose(a, b))
            }
            .map_err(failed("transpose"))?;
            assert_close(&back, dtype, &values(x, "x")?, same)
        }
        Law::ReshapeRoundTrip => {
            let round = x
                .reshape([x.numel()])
                .and_then(|f| f.reshape(x.shape().clone()))
                .map_err(failed("reshape"))?;
            let copy = x.contiguous().map_err(failed("contiguous"))?;
            let expected = values(x, "x")?;
            assert_close(&round, dtype, &expected, same)
                .and_then(|_| assert_close(&copy, dtype, &expected, same))
        }
        Law::SumOfSums | Law::MaxOfMaxes => {
            let op = if case.law == Law::SumOfSums {
                ReduceOp::Sum
            } else {
                ReduceOp::Max
            };
            let first = signed(&case.axes);
            let rest = complement(x.rank(), &case.axes);
            let total = x.reduce(op, &[], false).map_err(failed(op.name()))?;
            let staged = x
                .reduce(op, &first, true)
                .and_then(|p| {
                    if rest.is_empty() {
                        Ok(p)
                    } else {
                        p.reduce(op, &rest, true)
                    }
                })
                .and_then(|p| p.reshape(total.shape().clone()))
                .map_err(failed(op.name()))?;
            let expected = values(&total, "the total")?;
            if op == ReduceOp::Max {
                assert_close(&staged, dtype, &expected, same)
            } else {
                let all: Vec<usize> = (0..x.rank()).collect();
                let magnitude = reduce::reduce(
                    ReduceOp::Sum,
                    DType::F64,
                    &case.inputs[0].reference().abs(),
                    &all,
                );
                let magnitude = RefArray::new(vec![], magnitude.data);
                let tol = Tolerance::accumulation(dtype, 2 * x.numel());
                assert_close_scaled(&staged, dtype, &expected, &magnitude, tol)
            }
        }
        Law::MeanTimesCount => {
            let axes = signed(&case.axes);
            let count: usize = if case.axes.is_empty() {
                x.numel()
            } else {
                case.axes.iter().map(|&a| x.dims()[a]).product()
            };
            let sum = x.sum(&axes, false).map_err(failed("sum"))?;
            let scaled = x
                .mean(&axes, false)
                .and_then(|m| m.mul_scalar(count as f64))
                .map_err(failed("mean"))?;
            let reduced: Vec<usize> = if case.axes.is_empty() {
                (0..x.rank()).collect()
            } else {
                case.axes.clone()
            };
            let magnitude = reduce::reduce(
                ReduceOp::Sum,
                DType::F64,
                &case.inputs[0].reference().abs(),
                &reduced,
            );
            let magnitude = RefArray::new(sum.dims().to_vec(), magnitude.data);
            let tol = Tolerance::accumulation(dtype, 2 * count);
            assert_close_scaled(&scaled, dtype, &values(&sum, "the sum")?, &magnitude, tol)
        }
        Law::ArgmaxPointsAtMax => {
            let axis = case.axes[0] as isize;
            let index = x.argmax(axis, true).map_err(failed("argmax"))?;
            let picked = x.gather(axis, &index).map_err(failed("gather"))?;
            let max = x.max(&[axis], true).map_err(failed("max"))?;
            assert_close(&picked, dtype, &values(&max, "the max")?, same)
        }
        Law::SoftmaxSumsToOne => {
            let axis = case.axes[0] as isize;
            let sums = x
                .softmax(axis)
                .and_then(|s| s.sum(&[axis], true))
                .map_err(failed("softmax"))?;
            let ones = RefArray::full(sums.dims().to_vec(), 1.0);
            assert_close(&sums, dtype, &ones, Tolerance::transcendental(dtype))
        }
        Law::BroadcastIsExpansion => {
            let b = &inputs[1];
            let direct = x.binary(case.op, b).map_err(failed(case.op.name()))?;
            let out = direct.shape().clone();
            let expanded = x
                .broadcast_to(out.clone())
                .and_then(|a| a.contiguous())
                .and_then(|a| {
                    let b = b.broadcast_to(out)?.contiguous()?;
                    a.binary(case.op, &b)
                })
                .map_err(failed(case.op.name()))?;
            let tol = Tolerance::of_binary(case.op, dtype);
            assert_close(
                &direct,
                dtype,
                &values(&expanded, "the expanded result")?,
                tol,
            )
        }
        Law::MatmulAssociativity => {
            let (b, c) = (&inputs[1], &inputs[2]);
            let left = x
                .matmul(b)
                .and_then(|ab| ab.matmul(c))
                .map_err(failed("matmul"))?;
            let right = b
                .matmul(c)
                .and_then(|bc| x.matmul(&bc))
                .map_err(failed("matmul"))?;
            let (ra, rb, rc) = (
                case.inputs[0].reference().abs(),
                case.inputs[1].reference().abs(),
                case.inputs[2].reference().abs(),
            );
            let magnitude = linalg::matmul(DType::F64, &linalg::matmul(DType::F64, &ra, &rb), &rc);
            let terms = 2 * (ra.shape[1] + rb.shape[1]);
            let tol = Tolerance::accumulation(dtype, terms);
            assert_close_scaled(
                &left,
                dtype,
                &values(&right, "a @ (b @ c)")?,
                &magnitude,
                tol,
            )
        }
        Law::MatmulTranspose => {
            let b = &inputs[1];
            let left = x
                .matmul(b)
                .and_then(|ab| ab.t())
                .map_err(failed("matmul"))?;
            let right = b
                .t()
                .and_then(|bt| bt.matmul(&x.t()?))
                .map_err(failed("matmul"))?;
            let (ra, rb) = (
                case.inputs[0].reference().abs(),
                case.inputs[1].reference().abs(),
            );
            let magnitude = linalg::matmul(DType::F64, &ra, &rb);
            let magnitude = crate::reference::views::transpose(&magnitude, 0, 1);
            let tol = Tolerance::accumulation(dtype, 2 * ra.shape[1]);
            assert_close_scaled(&left, dtype, &values(&right, "bᵀ @ aᵀ")?, &magnitude, tol)
        }
        Law::CatThenNarrow => {
            let b = &inputs[1];
            let axis = case.axes[0];
            let joined = Tensor::cat(&[x, b], axis as isize).map_err(failed("cat"))?;
            let (la, lb) = (x.dims()[axis], b.dims()[axis]);
            let first = joined
                .narrow(axis as isize, 0, la)
                .map_err(failed("narrow"))?;
            let second = joined
                .narrow(axis as isize, la, lb)
                .map_err(failed("narrow"))?;
            assert_close(&first, dtype, &values(x, "a")?, same)
                .and_then(|_| assert_close(&second, dtype, &values(b, "b")?, same))
        }
    };
    outcome.map_err(|e| {
        format!(
            "law {} broken: {e}{}",
            case.law.name(),
            crate::compare::describe_inputs(&refs)
        )
    })
}

/// Checks `law` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, law: Law, dtype: DType) {
    check_property(
        &format!("law {} {dtype}", law.name()),
        cases(law, dtype),
        |c| check(dev, c),
    );
}
