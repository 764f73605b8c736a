//! The operation tags passed to a backend's primitive methods.
//!
//! Matching on these enums happens once per call, outside the element loop; a backend is
//! expected to monomorphise its inner loops per op (see `backend-cpu`).

use crate::DType;

/// Element-wise maps of one operand. Output dtype = input dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    /// `-x` (f32, f64, i64).
    Neg,
    /// `|x|` (f32, f64, i64).
    Abs,
    /// `1` if `x > 0`, `-1` if `x < 0`, else `x` itself (keeps `±0` and NaN) (f32, f64, i64).
    Sign,
    /// `x * x` (f32, f64, i64).
    Square,
    /// `1 / x`.
    Recip,
    /// Square root.
    Sqrt,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Sine.
    Sin,
    /// Cosine.
    Cos,
    /// Hyperbolic tangent.
    Tanh,
    /// `1 / (1 + e^-x)`, computed without overflow for large `|x|`.
    Sigmoid,
    /// `max(x, 0)`; NaN stays NaN.
    Relu,
    /// Exact GELU: `0.5 x (1 + erf(x / sqrt 2))` (PyTorch's default).
    Gelu,
    /// The error function.
    Erf,
    /// Round toward negative infinity.
    Floor,
    /// Round toward positive infinity.
    Ceil,
    /// Logical not (bool only).
    Not,
}

impl UnaryOp {
    /// Every unary op.
    pub const ALL: [UnaryOp; 18] = [
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Square,
        UnaryOp::Recip,
        UnaryOp::Sqrt,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Tanh,
        UnaryOp::Sigmoid,
        UnaryOp::Relu,
        UnaryOp::Gelu,
        UnaryOp::Erf,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Not,
    ];

    /// Lower-case name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Square => "square",
            UnaryOp::Recip => "recip",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Relu => "relu",
            UnaryOp::Gelu => "gelu",
            UnaryOp::Erf => "erf",
            UnaryOp::Floor => "floor",
            UnaryOp::Ceil => "ceil",
            UnaryOp::Not => "logical_not",
        }
    }

    /// Whether the op is defined for `dtype`.
    pub fn supports(self, dtype: DType) -> bool {
        match dtype {
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 => self != UnaryOp::Not,
            DType::I64 => matches!(
                self,
                UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Sign | UnaryOp::Square
            ),
            DType::Bool => self == UnaryOp::Not,
        }
    }
}

/// Element-wise ops of two operands of the same dtype and (already broadcast) shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    /// `a + b` (f32, f64, i64; wrapping for i64).
    Add,
    /// `a - b` (f32, f64, i64; wrapping for i64).
    Sub,
    /// `a * b` (f32, f64, i64 wrapping; bool: logical and).
    Mul,
    /// `a / b` (f32, f64 only: integer division by zero has no honest answer).
    Div,
    /// `a ^ b` (f32, f64).
    Pow,
    /// Element-wise maximum, NaN-propagating (bool: logical or).
    Maximum,
    /// Element-wise minimum, NaN-propagating (bool: logical and).
    Minimum,
}

impl BinaryOp {
    /// Every binary op.
    pub const ALL: [BinaryOp; 7] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::Maximum,
        BinaryOp::Minimum,
    ];

    /// Lower-case name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
        }
    }

    /// Whether the op is defined for `dtype`.
    pub fn supports(self, dtype: DType) -> bool {
        match dtype {
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 => true,
            DType::I64 => !matches!(self, BinaryOp::Div | BinaryOp::Pow),
            DType::Bool => matches!(self, BinaryOp::Mul | BinaryOp::Maximum | BinaryOp::Minimum),
        }
    }
}

/// Element-wise comparisons; the result is a `Bool` tensor. Any comparison with NaN is false
/// except `Ne`, which is true (IEEE semantics).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CmpOp {
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a > b`
    Gt,
    /// `a >= b`
    Ge,
}

impl CmpOp {
    /// Every comparison.
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];

    /// Lower-case name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            CmpOp::Eq => "eq",
            CmpOp::Ne => "ne",
            CmpOp::Lt => "lt",
            CmpOp::Le => "le",
            CmpOp::Gt => "gt",
            CmpOp::Ge => "ge",
        }
    }
}

/// Reductions over a set of axes (the float dtypes and i64). `Max`/`Min` propagate NaN; `Sum` of
/// an empty set is 0 and `Prod` is 1; `Max`/`Min` of an empty set are rejected by `tensor-core`.
/// `Tensor` reduces a `Bool` tensor as `i64` (it casts first, so the result is `i64`: `sum`
/// counts the true elements, `prod` and `min` are 1 when all are true, `max` when any is), so
/// [`crate::Backend::reduce`] is never given `Bool` by `Tensor` (the in-tree backends answer
/// [`crate::Error::UnsupportedDType`] to a direct call with one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl ReduceOp {
    /// Every reduction.
    pub const ALL: [ReduceOp; 4] = [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min];

    /// Lower-case name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
        }
    }
}

/// Index-of-extremum reductions over one axis; the result is `I64`. Ties resolve to the first
/// index; a NaN counts as larger than (for `ArgMax`) or smaller than (for `ArgMin`) any number, so
/// the first NaN wins, as in PyTorch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ArgReduceOp {
    /// Index of the maximum.
    ArgMax,
    /// Index of the minimum.
    ArgMin,
}

impl ArgReduceOp {
    /// Lower-case name used in error messages.
    pub fn name(self) -> &'static str {
        match self {
            ArgReduceOp::ArgMax => "argmax",
            ArgReduceOp::ArgMin => "argmin",
        }
    }
}

/// How [`crate::Backend::assign`] combines source into destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AssignMode {
    /// `dst = src`
    Overwrite,
    /// `dst += src`
    Accumulate,
}

/// A distribution for [`crate::Backend::random`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Distribution {
    /// Uniform on `[low, high)`.
    Uniform {
        /// Inclusive lower bound.
        low: f64,
        /// Exclusive upper bound.
        high: f64,
    },
    /// Normal with the given mean and standard deviation.
    Normal {
        /// Mean.
        mean: f64,
        /// Standard deviation.
        std: f64,
    },
}
