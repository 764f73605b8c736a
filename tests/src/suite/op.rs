//! What the suite checks: op families (one generated test each) and the ops in them, with the
//! dtypes each op is defined for (the columns of the coverage matrix).

use crate::checks::attention::AttentionOp;
use crate::checks::concat::JoinOp;
use crate::checks::conv::ConvOp;
use crate::checks::device::DeviceOp;
use crate::checks::errors::ErrorOp;
use crate::checks::fused::FusedOp;
use crate::checks::gradients::GradOp;
use crate::checks::indexing::IndexOp;
use crate::checks::kinks::Kink;
use crate::checks::losses::LossOp;
use crate::checks::memory::MemoryOp;
use crate::checks::metamorphic::Law;
use crate::checks::pool::PoolOp;
use crate::checks::softmax::SoftmaxOp;
use crate::checks::{FLOAT_DTYPES, GRADIENT_DTYPES};
use std::fmt;
use tessera_core::{ArgReduceOp, BinaryOp, CmpOp, DType, ReduceOp, UnaryOp};

/// A family of ops: one test of the generated suite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// The backend's identity and housekeeping: name, device, supports_dtype, synchronize.
    Device,
    /// The memory primitives: upload, download, full, copy_strided, assign.
    Memory,
    /// Element-wise maps.
    Unary,
    /// Broadcasting binary ops.
    Binary,
    /// Broadcasting comparisons.
    Comparison,
    /// `where` with three-way broadcasting.
    WhereSelect,
    /// Casts between dtypes.
    Cast,
    /// sum / prod / max / min over axis sets.
    Reduce,
    /// argmax / argmin.
    ArgReduce,
    /// mean and variance.
    Statistics,
    /// Matrix products.
    Matmul,
    /// index_select, gather, scatter_add.
    Indexing,
    /// cat and stack.
    Concat,
    /// Chains of views.
    Views,
    /// softmax, log_softmax, logsumexp.
    Softmax,
    /// conv2d and its gradients.
    Conv,
    /// Pooling and its gradients.
    Pool,
    /// Scaled dot-product attention and its gradient.
    Attention,
    /// The fused composites: relu_backward, gelu_backward, layer_norm, layer_norm_backward,
    /// adam_update, cross_entropy, cross_entropy_backward.
    Fused,
    /// Counter-based random numbers.
    Random,
    /// arange, linspace, eye, full.
    Constructors,
    /// Printing.
    Display,
    /// Autograd through the backend.
    Gradients,
    /// Metamorphic laws.
    Metamorphic,
    /// The error half of the contract: direct calls with bad operands must return `Err`.
    Errors,
}

impl Family {
    /// Every family, in the order the suite runs them.
    pub const ALL: [Family; 25] = [
        Family::Device,
        Family::Memory,
        Family::Unary,
        Family::Binary,
        Family::Comparison,
        Family::WhereSelect,
        Family::Cast,
        Family::Reduce,
        Family::ArgReduce,
        Family::Statistics,
        Family::Matmul,
        Family::Indexing,
        Family::Concat,
        Family::Views,
        Family::Softmax,
        Family::Conv,
        Family::Pool,
        Family::Attention,
        Family::Fused,
        Family::Random,
        Family::Constructors,
        Family::Display,
        Family::Gradients,
        Family::Metamorphic,
        Family::Errors,
    ];

    /// Snake-case name (also the name of the generated test).
    pub fn name(self) -> &'static str {
        match self {
            Family::Device => "device",
            Family::Memory => "memory",
            Family::Unary => "unary",
            Family::Binary => "binary",
            Family::Comparison => "comparison",
            Family::WhereSelect => "where_select",
            Family::Cast => "cast",
            Family::Reduce => "reduce",
            Family::ArgReduce => "arg_reduce",
            Family::Statistics => "statistics",
            Family::Matmul => "matmul",
            Family::Indexing => "indexing",
            Family::Concat => "concat",
            Family::Views => "views",
            Family::Softmax => "softmax",
            Family::Conv => "conv",
            Family::Pool => "pool",
            Family::Attention => "attention",
            Family::Fused => "fused",
            Family::Random => "random",
            Family::Constructors => "constructors",
            Family::Display => "display",
            Family::Gradients => "gradients",
            Family::Metamorphic => "metamorphic",
            Family::Errors => "errors",
        }
    }

    /// The ops of the family: the rows of its coverage matrix.
    pub fn ops(self) -> Vec<Op> {
        match self {
            Family::Device => DeviceOp::ALL.into_iter().map(Op::Device).collect(),
            Family::Memory => MemoryOp::ALL.into_iter().map(Op::Memory).collect(),
            Family::Unary => UnaryOp::ALL.into_iter().map(Op::Unary).collect(),
            Family::Binary => BinaryOp::ALL.into_iter().map(Op::Binary).collect(),
            Family::Comparison => CmpOp::ALL.into_iter().map(Op::Compare).collect(),
            Family::WhereSelect => vec![Op::Where],
            Family::Cast => DType::ALL.into_iter().map(Op::CastTo).collect(),
            Family::Reduce => ReduceOp::ALL.into_iter().map(Op::Reduce).collect(),
            Family::ArgReduce => vec![
                Op::ArgReduce(ArgReduceOp::ArgMax),
                Op::ArgReduce(ArgReduceOp::ArgMin),
            ],
            Family::Statistics => vec![Op::MeanVar],
            Family::Matmul => vec![Op::Matmul],
            Family::Indexing => vec![
                Op::Index(IndexOp::IndexSelect),
                Op::Index(IndexOp::Gather),
                Op::Index(IndexOp::ScatterAdd),
            ],
            Family::Concat => vec![Op::Join(JoinOp::Cat), Op::Join(JoinOp::Stack)],
            Family::Views => vec![Op::Views],
            Family::Softmax => SoftmaxOp::ALL.into_iter().map(Op::Softmax).collect(),
            Family::Conv => vec![
                Op::Conv(ConvOp::Forward),
                Op::Conv(ConvOp::BackwardInput),
                Op::Conv(ConvOp::BackwardWeight),
            ],
            Family::Pool => vec![
                Op::Pool(PoolOp::Max),
                Op::Pool(PoolOp::Avg),
                Op::Pool(PoolOp::MaxBackward),
                Op::Pool(PoolOp::AvgBackward),
            ],
            Family::Fused => FusedOp::ALL.into_iter().map(Op::Fused).collect(),
            Family::Attention => AttentionOp::ALL.into_iter().map(Op::Attention).collect(),
            Family::Random => vec![Op::Random, Op::RandomMoments],
            Family::Constructors => vec![Op::Constructors],
            Family::Display => vec![Op::DisplaySmall, Op::DisplaySummary],
            Family::Gradients => GradOp::all()
                .into_iter()
                .map(Op::Gradient)
                .chain(Kink::ALL.into_iter().map(Op::Kink))
                .chain(LossOp::ALL.into_iter().map(Op::Loss))
                .collect(),
            Family::Metamorphic => Law::ALL.into_iter().map(Op::Law).collect(),
            Family::Errors => ErrorOp::ALL.into_iter().map(Op::Error).collect(),
        }
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of the coverage matrix: an op (or a property of several ops) checked per dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A method of the backend's identity and housekeeping.
    Device(DeviceOp),
    /// A memory primitive.
    Memory(MemoryOp),
    /// A unary map.
    Unary(UnaryOp),
    /// A binary op.
    Binary(BinaryOp),
    /// A comparison.
    Compare(CmpOp),
    /// `where` (the column is the dtype of the branches).
    Where,
    /// A cast to this dtype (the column is the source dtype).
    CastTo(DType),
    /// A reduction (bool inputs reduce as i64).
    Reduce(ReduceOp),
    /// An arg-reduction.
    ArgReduce(ArgReduceOp),
    /// mean and var.
    MeanVar,
    /// Matrix product.
    Matmul,
    /// An indexing op.
    Index(IndexOp),
    /// cat or stack.
    Join(JoinOp),
    /// Chains of views.
    Views,
    /// softmax, log_softmax or logsumexp.
    Softmax(SoftmaxOp),
    /// conv2d or one of its gradients.
    Conv(ConvOp),
    /// A pooling op or its gradient.
    Pool(PoolOp),
    /// A fused element-wise composite.
    Fused(FusedOp),
    /// Scaled dot-product attention or its gradient.
    Attention(AttentionOp),
    /// Counter-based draws, element by element.
    Random,
    /// Moments of large draws.
    RandomMoments,
    /// Constructors.
    Constructors,
    /// Printing small tensors in full.
    DisplaySmall,
    /// Printing big tensors summarised.
    DisplaySummary,
    /// The gradient of an op through autograd.
    Gradient(GradOp),
    /// A gradient exactly at a kink or a tie, against PyTorch's rule.
    Kink(Kink),
    /// An exp-based loss at large logits, through autograd.
    Loss(LossOp),
    /// A metamorphic law.
    Law(Law),
    /// A method called with bad operands (it must return `Err`).
    Error(ErrorOp),
}

/// Every dtype `keep` accepts.
fn dtypes_where(keep: impl Fn(DType) -> bool) -> Vec<DType> {
    DType::ALL.into_iter().filter(|&d| keep(d)).collect()
}

impl Op {
    /// The family the op belongs to.
    pub fn family(self) -> Family {
        match self {
            Op::Device(_) => Family::Device,
            Op::Memory(_) => Family::Memory,
            Op::Unary(_) => Family::Unary,
            Op::Binary(_) => Family::Binary,
            Op::Compare(_) => Family::Comparison,
            Op::Where => Family::WhereSelect,
            Op::CastTo(_) => Family::Cast,
            Op::Reduce(_) => Family::Reduce,
            Op::ArgReduce(_) => Family::ArgReduce,
            Op::MeanVar => Family::Statistics,
            Op::Matmul => Family::Matmul,
            Op::Index(_) => Family::Indexing,
            Op::Join(_) => Family::Concat,
            Op::Views => Family::Views,
            Op::Softmax(_) => Family::Softmax,
            Op::Conv(_) => Family::Conv,
            Op::Pool(_) => Family::Pool,
            Op::Fused(_) => Family::Fused,
            Op::Attention(_) => Family::Attention,
            Op::Random | Op::RandomMoments => Family::Random,
            Op::Constructors => Family::Constructors,
            Op::DisplaySmall | Op::DisplaySummary => Family::Display,
            Op::Gradient(_) | Op::Kink(_) | Op::Loss(_) => Family::Gradients,
            Op::Law(_) => Family::Metamorphic,
            Op::Error(_) => Family::Errors,
        }
    }

    /// Short name within its family (`"exp"`, `"to f32"`, `"scatter_add"`, ...).
    pub fn name(self) -> String {
        match self {
            Op::Device(op) => op.name().into(),
            Op::Memory(op) => op.name().into(),
            Op::Fused(op) => op.name().into(),
            Op::Attention(op) => op.name().into(),
            Op::Unary(op) => op.name().into(),
            Op::Binary(op) => op.name().into(),
            Op::Compare(op) => op.name().into(),
            Op::Where => "where".into(),
            Op::CastTo(to) => format!("to {to}"),
            Op::Reduce(op) => op.name().into(),
            Op::ArgReduce(op) => op.name().into(),
            Op::MeanVar => "mean/var".into(),
            Op::Matmul => "matmul".into(),
            Op::Index(IndexOp::IndexSelect) => "index_select".into(),
            Op::Index(IndexOp::Gather) => "gather".into(),
            Op::Index(IndexOp::ScatterAdd) => "scatter_add".into(),
            Op::Join(JoinOp::Cat) => "cat".into(),
            Op::Join(JoinOp::Stack) => "stack".into(),
            Op::Views => "view chains".into(),
            Op::Softmax(op) => op.name().into(),
            Op::Conv(ConvOp::Forward) => "conv2d".into(),
            Op::Conv(ConvOp::BackwardInput) => "conv2d_backward_input".into(),
            Op::Conv(ConvOp::BackwardWeight) => "conv2d_backward_weight".into(),
            Op::Pool(PoolOp::Max) => "max_pool2d".into(),
            Op::Pool(PoolOp::Avg) => "avg_pool2d".into(),
            Op::Pool(PoolOp::MaxBackward) => "max_pool2d_backward".into(),
            Op::Pool(PoolOp::AvgBackward) => "avg_pool2d_backward".into(),
            Op::Random => "draws".into(),
            Op::RandomMoments => "moments".into(),
            Op::Constructors => "arange/linspace/eye/full".into(),
            Op::DisplaySmall => "small tensors".into(),
            Op::DisplaySummary => "summarised".into(),
            Op::Gradient(op) => op.name(),
            Op::Kink(k) => k.name().into(),
            Op::Loss(l) => l.name().into(),
            Op::Law(law) => law.name().into(),
            Op::Error(op) => op.name().into(),
        }
    }

    /// The `Backend` method whose result this row's property checks directly, or `None` for
    /// rows that check `tensor-core` compositions of several methods (statistics, view chains,
    /// constructors, printing, gradients, metamorphic laws).
    pub fn method(self) -> Option<&'static str> {
        Some(match self {
            Op::Device(op) => op.name(),
            Op::Memory(op) => op.name(),
            Op::Fused(op) => op.name(),
            Op::Attention(op) => op.name(),
            Op::Unary(_) => "unary",
            Op::Binary(_) => "binary",
            Op::Compare(_) => "compare",
            Op::Where => "where_select",
            Op::CastTo(_) => "cast",
            Op::Reduce(_) => "reduce",
            Op::ArgReduce(_) => "arg_reduce",
            Op::Matmul => "matmul",
            Op::Index(IndexOp::IndexSelect) => "index_select",
            Op::Index(IndexOp::Gather) => "gather",
            Op::Index(IndexOp::ScatterAdd) => "scatter_add",
            Op::Join(_) => "concat",
            Op::Softmax(op) => op.name(),
            Op::Conv(ConvOp::Forward) => "conv2d",
            Op::Conv(ConvOp::BackwardInput) => "conv2d_backward_input",
            Op::Conv(ConvOp::BackwardWeight) => "conv2d_backward_weight",
            Op::Pool(PoolOp::Max) => "max_pool2d",
            Op::Pool(PoolOp::Avg) => "avg_pool2d",
            Op::Pool(PoolOp::MaxBackward) => "max_pool2d_backward",
            Op::Pool(PoolOp::AvgBackward) => "avg_pool2d_backward",
            Op::Random | Op::RandomMoments => "random",
            Op::Error(op) => op.name(),
            Op::MeanVar
            | Op::Views
            | Op::Constructors
            | Op::DisplaySmall
            | Op::DisplaySummary
            | Op::Gradient(_)
            | Op::Kink(_)
            | Op::Loss(_)
            | Op::Law(_) => return None,
        })
    }

    /// The dtypes the op is defined for (other columns of its row read "-").
    pub fn defined_for(self) -> Vec<DType> {
        match self {
            Op::Unary(op) => dtypes_where(|d| op.supports(d)),
            Op::Binary(op) => dtypes_where(|d| op.supports(d)),
            Op::Index(IndexOp::ScatterAdd) => {
                vec![DType::F32, DType::F64, DType::F16, DType::BF16, DType::I64]
            }
            Op::Device(_)
            | Op::Memory(_)
            | Op::Compare(_)
            | Op::Where
            | Op::CastTo(_)
            | Op::Reduce(_)
            | Op::ArgReduce(_)
            | Op::Index(_)
            | Op::Join(_)
            | Op::Views
            | Op::Constructors
            | Op::DisplaySmall => DType::ALL.to_vec(),
            Op::DisplaySummary => vec![DType::I64],
            Op::MeanVar
            | Op::Matmul
            | Op::Softmax(_)
            | Op::Conv(_)
            | Op::Pool(_)
            | Op::Fused(_)
            | Op::Attention(_)
            | Op::Random
            | Op::RandomMoments
            | Op::Kink(_) => FLOAT_DTYPES.to_vec(),
            Op::Gradient(_) | Op::Loss(_) => GRADIENT_DTYPES.to_vec(),
            Op::Law(law) => law.dtypes(),
            Op::Error(op) => op.dtypes(),
        }
    }

    /// Other dtypes the check of `(self, dtype)` needs the backend to hold: the bool result of
    /// a comparison, i64 indices, the target of a cast, ...
    pub fn also_needs(self, dtype: DType) -> Vec<DType> {
        match self {
            Op::Compare(_) | Op::Where => vec![DType::Bool],
            Op::CastTo(to) => vec![to],
            Op::Reduce(_) if dtype == DType::Bool => vec![DType::I64],
            Op::ArgReduce(_) | Op::Index(_) => vec![DType::I64],
            Op::Pool(PoolOp::Max | PoolOp::MaxBackward) => vec![DType::I64],
            Op::Gradient(GradOp::IndexSelect | GradOp::Gather | GradOp::MaxPool2d) => {
                vec![DType::I64]
            }
            Op::Gradient(GradOp::Where) => vec![DType::Bool],
            Op::Kink(Kink::MaxPoolTies) => vec![DType::Bool, DType::I64],
            Op::Kink(_) => vec![DType::Bool],
            Op::Loss(LossOp::CrossEntropy | LossOp::FusedCrossEntropy) => {
                vec![DType::Bool, DType::I64]
            }
            // The targets; the default composite's softmax compares.
            Op::Fused(FusedOp::CrossEntropy | FusedOp::CrossEntropyBackward) => {
                vec![DType::Bool, DType::I64]
            }
            Op::Law(Law::ArgmaxPointsAtMax) => vec![DType::I64],
            Op::Attention(_) => vec![DType::Bool, DType::I64],
            Op::Error(ErrorOp::IndexSelect | ErrorOp::Gather | ErrorOp::ScatterAdd) => {
                vec![DType::I64]
            }
            Op::Error(ErrorOp::WhereSelect) => vec![DType::Bool],
            _ => vec![],
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.family(), self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_is_in_its_family_once() {
        for family in Family::ALL {
            let ops = family.ops();
            assert!(!ops.is_empty(), "{family}");
            for op in &ops {
                assert_eq!(op.family(), family, "{op}");
                assert!(!op.defined_for().is_empty(), "{op}");
                assert_eq!(ops.iter().filter(|o| *o == op).count(), 1, "{op}");
            }
        }
        assert_eq!(Op::Unary(UnaryOp::Not).defined_for(), vec![DType::Bool]);
        assert_eq!(Op::CastTo(DType::F32).to_string(), "cast to f32");
    }
}
