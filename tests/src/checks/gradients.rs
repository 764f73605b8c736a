//! Gradients through the backend under test: autograd runs on the backend, and its gradients
//! are checked by central finite differences in f64 (`tessera_autograd::gradcheck`, on the backend
//! itself) and, in f32, against the gradients the CPU backend computes for the same inputs.
//!
//! Inputs keep away from kinks: source values are a shuffled grid (distinct, at least
//! `0.2 / n` from 0 and from every integer), so `relu`, `abs`, `max`, `maximum`, max pooling
//! and `floor` never sit on a tie or a jump within the finite-difference step. Ops that are
//! sensitive to ties take contiguous inputs (a broadcast layout would repeat a value).

use super::pool;
use crate::compare::Tolerance;
use crate::runner::check_property;
use crate::strategies::{axis_subset, broadcastable_to, layout_recipe, shape_with, TensorCase};
use proptest::prelude::*;
use tessera_autograd::{enable_grad, gradcheck, GradcheckOptions, Var};
use tessera_core::random::sample_f64;
use tessera_core::{
    Backend, BinaryOp, Conv2dParams, DType, Distribution, Pool2dParams, Result as TResult, Tensor,
    UnaryOp,
};
use tessera_cpu::Cpu;

/// A differentiable op whose gradient is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradOp {
    /// A unary map (every float one but `logical_not`).
    Unary(UnaryOp),
    /// A broadcasting binary op.
    Binary(BinaryOp),
    /// `sum` over an axis subset.
    Sum,
    /// `mean` over an axis subset.
    Mean,
    /// Population variance over an axis subset.
    Var,
    /// `max` over an axis subset.
    Max,
    /// `min` over an axis subset.
    Min,
    /// Matrix product (batched, broadcast, rank-1 operands).
    Matmul,
    /// Softmax along an axis.
    Softmax,
    /// Log-softmax along an axis.
    LogSoftmax,
    /// Logsumexp along an axis.
    LogSumExp,
    /// 2-D convolution with an optional bias.
    Conv2d,
    /// Max pooling.
    MaxPool2d,
    /// Average pooling.
    AvgPool2d,
    /// `index_select` (repeated indices accumulate).
    IndexSelect,
    /// `gather` (repeated indices accumulate).
    Gather,
    /// `cat` of two or three tensors.
    Cat,
    /// `where` between two broadcast branches.
    Where,
    /// A chain of views: permute, narrow, unsqueeze, expand, reshape.
    Views,
}

impl GradOp {
    /// Every op checked, in a fixed order.
    pub fn all() -> Vec<GradOp> {
        let unary = UnaryOp::ALL
            .into_iter()
            .filter(|&op| op != UnaryOp::Not)
            .map(GradOp::Unary);
        let binary = BinaryOp::ALL.into_iter().map(GradOp::Binary);
        let rest = [
            GradOp::Sum,
            GradOp::Mean,
            GradOp::Var,
            GradOp::Max,
            GradOp::Min,
            GradOp::Matmul,
            GradOp::Softmax,
            GradOp::LogSoftmax,
            GradOp::LogSumExp,
            GradOp::Conv2d,
            GradOp::MaxPool2d,
            GradOp::AvgPool2d,
            GradOp::IndexSelect,
            GradOp::Gather,
            GradOp::Cat,
            GradOp::Where,
            GradOp::Views,
        ];
        unary.chain(binary).chain(rest).collect()
    }

    /// Lower-case name (`"exp"`, `"max_pool2d"`, ...).
    pub fn name(self) -> String {
        match self {
            GradOp::Unary(op) => op.name().to_string(),
            GradOp::Binary(op) => op.name().to_string(),
            GradOp::Sum => "sum".into(),
            GradOp::Mean => "mean".into(),
            GradOp::Var => "var".into(),
            GradOp::Max => "max".into(),
            GradOp::Min => "min".into(),
            GradOp::Matmul => "matmul".into(),
            GradOp::Softmax => "softmax".into(),
            GradOp::LogSoftmax => "log_softmax".into(),
            GradOp::LogSumExp => "logsumexp".into(),
            GradOp::Conv2d => "conv2d".into(),
            GradOp::MaxPool2d => "max_pool2d".into(),
            GradOp::AvgPool2d => "avg_pool2d".into(),
            GradOp::IndexSelect => "index_select".into(),
            GradOp::Gather => "gather".into(),
            GradOp::Cat => "cat".into(),
            GradOp::Where => "where".into(),
            GradOp::Views => "views".into(),
        }
    }
}

/// The parameters of one op besides its differentiable inputs.
#[derive(Clone, Debug, PartialEq)]
pub enum GradParams {
    /// None needed.
    None,
    /// Reduction axes (empty: all) and whether they are kept.
    Axes {
        /// The axes.
        axes: Vec<isize>,
        /// Keep reduced axes as size 1.
        keepdim: bool,
    },
    /// One axis (softmax family, cat) and, for logsumexp, whether it is kept.
    Axis {
        /// The axis.
        axis: isize,
        /// Keep the axis as size 1.
        keepdim: bool,
    },
    /// Indices for `index_select` (rank 1) or `gather` (the output's shape).
    Indices {
        /// The axis indexed.
        axis: isize,
        /// Row-major index values, all in range.
        values: Vec<i64>,
        /// Shape of the index tensor.
        shape: Vec<usize>,
    },
    /// Convolution parameters.
    Conv(Conv2dParams),
    /// Pooling parameters.
    Pool(Pool2dParams),
    /// The condition of `where` (row-major) and its shape.
    Condition {
        /// Which elements take the first branch.
        mask: Vec<bool>,
        /// Shape of the condition.
        shape: Vec<usize>,
    },
    /// The view chain: `permute(perm)`, `narrow(0, start, len)`, `unsqueeze(0)`,
    /// `expand` the new axis to `copies`, then flatten.
    Views {
        /// The permutation.
        perm: Vec<usize>,
        /// Start of the narrowed range on the first permuted axis.
        start: usize,
        /// Its length.
        len: usize,
        /// Size of the broadcast leading axis.
        copies: usize,
    },
}

/// One gradient check: the op, its differentiable inputs (whose dtype is the one checked) and
/// its parameters.
#[derive(Clone, Debug)]
pub struct GradCase {
    /// The op.
    pub op: GradOp,
    /// Differentiable inputs, in the op's argument order.
    pub inputs: Vec<TensorCase>,
    /// Other parameters.
    pub params: GradParams,
}

/// Where input values lie.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Domain {
    /// `(-2, 2)`, never within `0.2 / n` of an integer (0 included).
    Any,
    /// `[0.5, 2.5)`: for log, sqrt and a pow base.
    Positive,
    /// `±[0.5, 2.5)`: for recip and a divisor.
    NonZero,
}

/// `n` distinct values of `domain`, in random order (the order shrinks towards sorted).
fn grid_values(n: usize, domain: Domain) -> BoxedStrategy<Vec<f64>> {
    let grid = move |p: usize| {
        let t = (p as f64 + 0.3) / n.max(1) as f64; // in (0, 1), never k/4 apart from 0.05/n
        match domain {
            Domain::Any => -2.0 + 4.0 * t,
            Domain::Positive => 0.5 + 2.0 * t,
            Domain::NonZero if p % 2 == 0 => 0.5 + 2.0 * t,
            Domain::NonZero => -(0.5 + 2.0 * t),
        }
    };
    Just((0..n).collect::<Vec<usize>>())
        .prop_shuffle()
        .prop_map(move |perm| perm.into_iter().map(grid).collect())
        .boxed()
}

/// A tensor of `shape`: a random layout (or contiguous when `contiguous`) over grid values.
fn grid_tensor(
    dtype: DType,
    shape: Vec<usize>,
    domain: Domain,
    contiguous: bool,
) -> BoxedStrategy<TensorCase> {
    let recipe = if contiguous {
        Just(crate::strategies::LayoutRecipe::contiguous(shape)).boxed()
    } else {
        layout_recipe(shape)
    };
    recipe
        .prop_flat_map(move |recipe| {
            grid_values(recipe.source_numel(), domain).prop_map(move |source| TensorCase {
                dtype,
                recipe: recipe.clone(),
                source,
            })
        })
        .boxed()
}

/// Several tensors whose values are all distinct from each other (one grid split in parts).
fn distinct_tensors(
    dtype: DType,
    shapes: Vec<Vec<usize>>,
    domains: Vec<Domain>,
) -> BoxedStrategy<Vec<TensorCase>> {
    let sizes: Vec<usize> = shapes.iter().map(|s| s.iter().product()).collect();
    let total: usize = sizes.iter().sum();
    let parts: Vec<BoxedStrategy<Vec<f64>>> =
        domains.iter().map(|&d| grid_values(total, d)).collect();
    parts
        .prop_map(move |grids| {
            let mut start = 0;
            shapes
                .iter()
                .zip(&sizes)
                .zip(&grids)
                .map(|((shape, &n), grid)| {
                    let source = grid[start..start + n].to_vec();
                    start += n;
                    TensorCase::contiguous(dtype, shape.clone(), source)
                })
                .collect()
        })
        .boxed()
}

/// The input domain of a unary op.
fn unary_domain(op: UnaryOp) -> Domain {
    match op {
        UnaryOp::Log | UnaryOp::Sqrt => Domain::Positive,
        UnaryOp::Recip => Domain::NonZero,
        _ => Domain::Any,
    }
}

/// A small shape: rank `0..=3`, dimensions in `dims`.
fn small_shape(
    rank: std::ops::RangeInclusive<usize>,
    dims: std::ops::RangeInclusive<usize>,
) -> BoxedStrategy<Vec<usize>> {
    shape_with(rank, dims)
}

/// Axes as passed to `tensor-core` (some counted from the end).
fn signed_axes(rank: usize) -> BoxedStrategy<Vec<isize>> {
    (axis_subset(rank), any::<bool>())
        .prop_map(move |(axes, from_end)| {
            axes.into_iter()
                .map(|a| {
                    if from_end {
                        a as isize - rank as isize
                    } else {
                        a as isize
                    }
                })
                .collect()
        })
        .boxed()
}

fn reduction_cases(op: GradOp, dtype: DType) -> BoxedStrategy<GradCase> {
    let contiguous = matches!(op, GradOp::Max | GradOp::Min);
    let min_dim = if op == GradOp::Sum { 0 } else { 1 };
    small_shape(0..=3, min_dim..=3)
        .prop_flat_map(move |s| {
            let rank = s.len();
            (
                grid_tensor(dtype, s, Domain::Any, contiguous),
                signed_axes(rank),
                any::<bool>(),
            )
        })
        .prop_map(move |(x, axes, keepdim)| GradCase {
            op,
            inputs: vec![x],
            params: GradParams::Axes { axes, keepdim },
        })
        .boxed()
}

fn row_cases(op: GradOp, dtype: DType) -> BoxedStrategy<GradCase> {
    small_shape(1..=3, 1..=3)
        .prop_flat_map(move |s| {
            let rank = s.len();
            (
                grid_tensor(dtype, s, Domain::Any, false),
                -(rank as isize)..rank as isize,
                any::<bool>(),
            )
        })
        .prop_map(move |(x, axis, keepdim)| GradCase {
            op,
            inputs: vec![x],
            params: GradParams::Axis { axis, keepdim },
        })
        .boxed()
}

fn binary_cases(op: BinaryOp, dtype: DType) -> BoxedStrategy<GradCase> {
    let (ld, rd) = match op {
        BinaryOp::Div => (Domain::Any, Domain::NonZero),
        BinaryOp::Pow => (Domain::Positive, Domain::Any),
        _ => (Domain::Any, Domain::Any),
    };
    small_shape(0..=3, 0..=3)
        .prop_flat_map(|out| (broadcastable_to(out.clone()), broadcastable_to(out)))
        .prop_flat_map(move |(l, r)| distinct_tensors(dtype, vec![l, r], vec![ld, rd]))
        .prop_map(move |inputs| GradCase {
            op: GradOp::Binary(op),
            inputs,
            params: GradParams::None,
        })
        .boxed()
}

fn matmul_cases(dtype: DType) -> BoxedStrategy<GradCase> {
    (
        0usize..=3,
        0usize..=3,
        0usize..=3,
        shape_with(0..=1, 1..=2),
        0u8..4,
        0u8..4,
    )
        .prop_flat_map(|(m, k, n, batch, l1, r1)| {
            (
                Just((m, k, n, l1 == 0, r1 == 0)),
                broadcastable_to(batch.clone()),
                broadcastable_to(batch),
            )
        })
        .prop_flat_map(move |((m, k, n, l_vec, r_vec), lb, rb)| {
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
            (
                grid_tensor(dtype, lhs, Domain::Any, false),
                grid_tensor(dtype, rhs, Domain::Any, false),
            )
        })
        .prop_map(|(a, b)| GradCase {
            op: GradOp::Matmul,
            inputs: vec![a, b],
            params: GradParams::None,
        })
        .boxed()
}

fn conv_cases(dtype: DType) -> BoxedStrategy<GradCase> {
    (
        (1usize..=2, 1usize..=2, 1usize..=2),
        (1usize..=2, 1usize..=2),
        (1usize..=2, 1usize..=2),
        (0usize..=1, 0usize..=1),
        (1usize..=2, 1usize..=2),
        (0usize..=2, 0usize..=2),
        any::<bool>(),
    )
        .prop_flat_map(
            move |((n, c, o), (kh, kw), stride, padding, dilation, (eh, ew), bias)| {
                let span = |k: usize, d: usize| d * (k - 1) + 1;
                let h = span(kh, dilation.0).saturating_sub(2 * padding.0).max(1) + eh;
                let w = span(kw, dilation.1).saturating_sub(2 * padding.1).max(1) + ew;
                let params = Conv2dParams {
                    stride,
                    padding,
                    dilation,
                };
                let mut inputs = vec![
                    grid_tensor(dtype, vec![n, c, h, w], Domain::Any, false),
                    grid_tensor(dtype, vec![o, c, kh, kw], Domain::Any, false),
                ];
                if bias {
                    inputs.push(grid_tensor(dtype, vec![o], Domain::Any, false));
                }
                (inputs, Just(params))
            },
        )
        .prop_map(|(inputs, params)| GradCase {
            op: GradOp::Conv2d,
            inputs,
            params: GradParams::Conv(params),
        })
        .boxed()
}

fn pool_cases(op: GradOp, dtype: DType) -> BoxedStrategy<GradCase> {
    let contiguous = op == GradOp::MaxPool2d;
    pool::geometry()
        .prop_flat_map(move |(mut dims, params)| {
            dims[0] = dims[0].clamp(1, 2);
            dims[1] = dims[1].clamp(1, 2);
            (
                grid_tensor(dtype, dims, Domain::Any, contiguous),
                Just(params),
            )
        })
        .prop_map(move |(x, params)| GradCase {
            op,
            inputs: vec![x],
            params: GradParams::Pool(params),
        })
        .boxed()
}

fn index_cases(op: GradOp, dtype: DType) -> BoxedStrategy<GradCase> {
    small_shape(1..=3, 1..=3)
        .prop_flat_map(move |s| {
            let rank = s.len();
            (
                Just(s),
                0..rank,
                prop::collection::vec(0usize..=3, rank),
                0usize..=4,
            )
        })
        .prop_flat_map(move |(s, axis, gather_dims, count)| {
            let shape = if op == GradOp::IndexSelect {
                vec![count]
            } else {
                gather_dims
                    .iter()
                    .zip(&s)
                    .enumerate()
                    .map(|(d, (&g, &x))| if d == axis { g } else { g.min(x) })
                    .collect()
            };
            let n: usize = shape.iter().product();
            let size = s[axis] as i64;
            (
                grid_tensor(dtype, s, Domain::Any, false),
                prop::collection::vec(0..size, n),
                Just((axis, shape)),
            )
        })
        .prop_map(move |(x, values, (axis, shape))| GradCase {
            op,
            inputs: vec![x],
            params: GradParams::Indices {
                axis: axis as isize,
                values,
                shape,
            },
        })
        .boxed()
}

fn cat_cases(dtype: DType) -> BoxedStrategy<GradCase> {
    (small_shape(1..=3, 0..=3), 2usize..=3)
        .prop_flat_map(|(s, parts)| {
            let rank = s.len();
            (Just(s), 0..rank, prop::collection::vec(0usize..=3, parts))
        })
        .prop_flat_map(move |(s, axis, lens)| {
            let inputs: Vec<_> = lens
                .iter()
                .map(|&len| {
                    let mut shape = s.clone();
                    shape[axis] = len;
                    grid_tensor(dtype, shape, Domain::Any, false)
                })
                .collect();
            (inputs, Just(axis))
        })
        .prop_map(|(inputs, axis)| GradCase {
            op: GradOp::Cat,
            inputs,
            params: GradParams::Axis {
                axis: axis as isize,
                keepdim: false,
            },
        })
        .boxed()
}

fn where_cases(dtype: DType) -> BoxedStrategy<GradCase> {
    small_shape(0..=3, 0..=3)
        .prop_flat_map(|out| {
            (
                broadcastable_to(out.clone()),
                broadcastable_to(out.clone()),
                broadcastable_to(out),
            )
        })
        .prop_flat_map(move |(c, t, f)| {
            let n: usize = c.iter().product();
            (
                grid_tensor(dtype, t, Domain::Any, false),
                grid_tensor(dtype, f, Domain::Any, false),
                prop::collection::vec(any::<bool>(), n),
                Just(c),
            )
        })
        .prop_map(|(t, f, mask, shape)| GradCase {
            op: GradOp::Where,
            inputs: vec![t, f],
            params: GradParams::Condition { mask, shape },
        })
        .boxed()
}

fn view_cases(dtype: DType) -> BoxedStrategy<GradCase> {
    small_shape(3..=3, 1..=3)
        .prop_flat_map(move |s| {
            (
                grid_tensor(dtype, s.clone(), Domain::Any, false),
                Just(vec![0usize, 1, 2]).prop_shuffle(),
                Just(s),
                1usize..=3,
            )
        })
        .prop_flat_map(|(x, perm, s, copies)| {
            let first = s[perm[0]];
            (Just((x, perm, copies)), 0..first)
                .prop_flat_map(move |(head, start)| (Just(head), Just(start), 0..=first - start))
        })
        .prop_map(|((x, perm, copies), start, len)| GradCase {
            op: GradOp::Views,
            inputs: vec![x],
            params: GradParams::Views {
                perm,
                start,
                len,
                copies,
            },
        })
        .boxed()
}

/// Cases of `op` with inputs of `dtype` (f32 or f64).
pub fn cases(op: GradOp, dtype: DType) -> BoxedStrategy<GradCase> {
    match op {
        GradOp::Unary(u) => small_shape(0..=3, 0..=3)
            .prop_flat_map(move |s| grid_tensor(dtype, s, unary_domain(u), false))
            .prop_map(move |x| GradCase {
                op,
                inputs: vec![x],
                params: GradParams::None,
            })
            .boxed(),
        GradOp::Binary(b) => binary_cases(b, dtype),
        GradOp::Sum | GradOp::Mean | GradOp::Var | GradOp::Max | GradOp::Min => {
            reduction_cases(op, dtype)
        }
        GradOp::Matmul => matmul_cases(dtype),
        GradOp::Softmax | GradOp::LogSoftmax | GradOp::LogSumExp => row_cases(op, dtype),
        GradOp::Conv2d => conv_cases(dtype),
        GradOp::MaxPool2d | GradOp::AvgPool2d => pool_cases(op, dtype),
        GradOp::IndexSelect | GradOp::Gather => index_cases(op, dtype),
        GradOp::Cat => cat_cases(dtype),
        GradOp::Where => where_cases(dtype),
        GradOp::Views => view_cases(dtype),
    }
}

/// The op applied to the differentiable inputs `x`, with its other arguments built on `dev`.
pub fn apply<B: Backend>(case: &GradCase, dev: &B, x: &[Var<B>]) -> TResult<Var<B>> {
    match (case.op, &case.params) {
        (GradOp::Unary(op), _) => unary_var(op, &x[0]),
        (GradOp::Binary(op), _) => binary_var(op, &x[0], &x[1]),
        (GradOp::Sum, GradParams::Axes { axes, keepdim }) => x[0].sum(axes, *keepdim),
        (GradOp::Mean, GradParams::Axes { axes, keepdim }) => x[0].mean(axes, *keepdim),
        (GradOp::Var, GradParams::Axes { axes, keepdim }) => x[0].var(axes, 0, *keepdim),
        (GradOp::Max, GradParams::Axes { axes, keepdim }) => x[0].max(axes, *keepdim),
        (GradOp::Min, GradParams::Axes { axes, keepdim }) => x[0].min(axes, *keepdim),
        (GradOp::Matmul, _) => x[0].matmul(&x[1]),
        (GradOp::Softmax, GradParams::Axis { axis, .. }) => x[0].softmax(*axis),
        (GradOp::LogSoftmax, GradParams::Axis { axis, .. }) => x[0].log_softmax(*axis),
        (GradOp::LogSumExp, GradParams::Axis { axis, keepdim }) => x[0].logsumexp(*axis, *keepdim),
        (GradOp::Conv2d, GradParams::Conv(params)) => x[0].conv2d(&x[1], x.get(2), *params),
        (GradOp::MaxPool2d, GradParams::Pool(params)) => x[0].max_pool2d(*params),
        (GradOp::AvgPool2d, GradParams::Pool(params)) => x[0].avg_pool2d(*params),
        (
            GradOp::IndexSelect | GradOp::Gather,
            GradParams::Indices {
                axis,
                values,
                shape,
            },
        ) => {
            let indices = Tensor::from_vec(values.clone(), shape.clone(), dev)?;
            if case.op == GradOp::IndexSelect {
                x[0].index_select(*axis, &indices)
            } else {
                x[0].gather(*axis, &indices)
            }
        }
        (GradOp::Cat, GradParams::Axis { axis, .. }) => {
            Var::cat(&x.iter().collect::<Vec<_>>(), *axis)
        }
        (GradOp::Where, GradParams::Condition { mask, shape }) => {
            let values: Vec<u8> = mask.iter().map(|&m| u8::from(m)).collect();
            let cond = Tensor::from_vec(values, shape.clone(), dev)?;
            Var::where_select(&cond, &x[0], &x[1])
        }
        (
            GradOp::Views,
            GradParams::Views {
                perm,
                start,
                len,
                copies,
            },
        ) => {
            let v = x[0].permute(perm)?.narrow(0, *start, *len)?.unsqueeze(0)?;
            let mut expanded = v.dims().to_vec();
            expanded[0] = *copies;
            v.expand(expanded)?.flatten(0, -1)
        }
        (op, params) => panic!("gradient case {op:?} built with parameters {params:?}"),
    }
}

fn unary_var<B: Backend>(op: UnaryOp, x: &Var<B>) -> TResult<Var<B>> {
    match op {
        UnaryOp::Neg => x.neg(),
        UnaryOp::Abs => x.abs(),
        UnaryOp::Sign => x.sign(),
        UnaryOp::Square => x.square(),
        UnaryOp::Recip => x.recip(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Log => x.log(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Sigmoid => x.sigmoid(),
        UnaryOp::Relu => x.relu(),
        UnaryOp::Gelu => x.gelu(),
        UnaryOp::Erf => x.erf(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Not => panic!("logical_not has no gradient"),
    }
}

fn binary_var<B: Backend>(op: BinaryOp, a: &Var<B>, b: &Var<B>) -> TResult<Var<B>> {
    match op {
        BinaryOp::Add => a.add(b),
        BinaryOp::Sub => a.sub(b),
        BinaryOp::Mul => a.mul(b),
        BinaryOp::Div => a.div(b),
        BinaryOp::Pow => a.pow(b),
        BinaryOp::Maximum => a.maximum(b),
        BinaryOp::Minimum => a.minimum(b),
    }
}

/// Describes the inputs of a failing case.
fn describe_inputs<B: Backend>(inputs: &[Tensor<B>]) -> String {
    let refs: Vec<&Tensor<B>> = inputs.iter().collect();
    crate::compare::describe_inputs(&refs)
}

fn build_inputs<B: Backend>(dev: &B, case: &GradCase) -> Result<Vec<Tensor<B>>, String> {
    case.inputs
        .iter()
        .map(|c| {
            c.build(dev)
                .map_err(|e| format!("building an input failed: {e}"))
        })
        .collect()
}

/// Finite differences in f64 on `dev` itself (`tessera_autograd::gradcheck`).
pub fn check_finite_differences<B: Backend>(dev: &B, case: &GradCase) -> Result<(), String> {
    let inputs = build_inputs(dev, case)?;
    gradcheck(
        |x| apply(case, dev, x),
        &inputs,
        GradcheckOptions::default(),
    )
    .map(|_| ())
    .map_err(|e| {
        format!(
            "gradcheck of {}: {e}{}",
            case.op.name(),
            describe_inputs(&inputs)
        )
    })
}

/// What one backend computed for a case: the output's shape and values, and the gradient of
/// every input.
struct Computed {
    dims: Vec<usize>,
    output: Vec<f64>,
    gradients: Vec<Vec<f64>>,
}

/// The output and the input gradients of `sum(op(inputs) * r)` on `dev`, where
/// `r[i] = normal sample i of seed 7` (the same numbers on every backend).
fn output_and_gradients<B: Backend>(dev: &B, case: &GradCase) -> Result<Computed, String> {
    let failed = |e: tessera_core::Error| format!("{e}");
    let params: Vec<Var<B>> = build_inputs(dev, case)?
        .into_iter()
        .map(Var::param)
        .collect();
    let y = enable_grad(|| apply(case, dev, &params)).map_err(failed)?;
    let seed: Vec<f64> = (0..y.numel() as u64)
        .map(|i| {
            sample_f64(
                Distribution::Normal {
                    mean: 0.0,
                    std: 1.0,
                },
                7,
                i,
            )
        })
        .collect();
    let r = Tensor::from_f64_values(&seed, y.dims().to_vec(), y.dtype(), dev).map_err(failed)?;
    if y.requires_grad() {
        y.backward_with(&r).map_err(failed)?;
    }
    let grads = params
        .iter()
        .map(|p| match p.grad() {
            Some(g) => g.to_vec_f64(),
            None => Ok(vec![0.0; p.numel()]),
        })
        .collect::<TResult<Vec<_>>>()
        .map_err(failed)?;
    let output = y.value().to_vec_f64().map_err(failed)?;
    Ok(Computed {
        dims: y.dims().to_vec(),
        output,
        gradients: grads,
    })
}

/// Compares `got` with `expected`, both of one logical tensor; the scale of the relative
/// tolerance is the largest `|expected|` (gradients sum many terms of either sign).
fn compare_to_cpu(what: &str, got: &[f64], expected: &[f64], tol: Tolerance) -> Result<(), String> {
    if got.len() != expected.len() {
        return Err(format!(
            "{what}: {} elements vs {} on the CPU",
            got.len(),
            expected.len()
        ));
    }
    let scale = expected.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (&g, &e)) in got.iter().zip(expected).enumerate() {
        if let Err(why) = crate::compare::check_value(g, e, scale, tol) {
            return Err(format!("{what}: element {i}: got {g:?}, CPU {e:?} ({why})"));
        }
    }
    Ok(())
}

/// The tolerance of f32 outputs and gradients against the CPU's, relative to the largest CPU
/// value of the tensor: `1e-5 + (1e-4 + 4 * 64 * 2^-24)` of it. Looser than the op classes
/// because both sides run whole chains of ops (forward and backward) whose order of
/// operations differs between backends; the op-level properties are where tightness lives.
pub fn gradient_tolerance() -> Tolerance {
    Tolerance::loose(1e-5, 1e-4 + 4.0 * 64.0 * crate::compare::F32_EPS)
}

/// [`gradient_tolerance`] for chains in `dtype`. In the 16-bit floats every op of the chain
/// rounds its result once to 16 bits, so two backends whose f32 arithmetic differs in the last
/// bits may land on neighbouring 16-bit values at each step: four ulps of the format (eight
/// unit roundoffs) of the tensor's scale are added, with the format's smallest normal number
/// as the absolute slack for f16.
pub fn gradient_tolerance_for(dtype: DType) -> Tolerance {
    use tessera_checked::tolerance::{BF16_EPS, F16_EPS, F16_MIN_NORMAL};
    let f32_chain = gradient_tolerance();
    match dtype {
        DType::F16 => Tolerance::loose(F16_MIN_NORMAL, f32_chain.rel + 8.0 * F16_EPS),
        DType::BF16 => Tolerance::loose(f32_chain.abs, f32_chain.rel + 8.0 * BF16_EPS),
        _ => f32_chain,
    }
}

/// The same computation on `dev` and on the CPU backend (f32 or 16-bit): outputs and gradients
/// must agree within the accumulation tolerance of the dtype ([`gradient_tolerance_for`]).
pub fn check_against_cpu<B: Backend>(dev: &B, case: &GradCase) -> Result<(), String> {
    let got = output_and_gradients(dev, case)?;
    let cpu = output_and_gradients(&Cpu::new(), case)
        .map_err(|e| format!("the CPU failed on this case: {e}"))?;
    if got.dims != cpu.dims {
        return Err(format!("output shape {:?}, CPU {:?}", got.dims, cpu.dims));
    }
    let tol = gradient_tolerance_for(case.inputs[0].dtype);
    let inputs = build_inputs(dev, case)?;
    compare_to_cpu("output", &got.output, &cpu.output, tol)
        .and_then(|_| {
            got.gradients
                .iter()
                .zip(&cpu.gradients)
                .enumerate()
                .try_for_each(|(i, (g, c))| {
                    compare_to_cpu(&format!("gradient of input {i}"), g, c, tol)
                })
        })
        .map_err(|e| {
            format!(
                "{} gradient vs CPU: {e}{}",
                case.op.name(),
                describe_inputs(&inputs)
            )
        })
}

/// Finite differences for f64, the CPU's gradients for f32.
pub fn check<B: Backend>(dev: &B, case: &GradCase) -> Result<(), String> {
    match case.inputs[0].dtype {
        DType::F64 => check_finite_differences(dev, case),
        _ => check_against_cpu(dev, case),
    }
}

/// Checks the gradient of `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: GradOp, dtype: DType) {
    check_property(
        &format!("gradient {} {dtype}", op.name()),
        cases(op, dtype),
        |c| check(dev, c),
    );
}
