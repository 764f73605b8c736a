//! Element-wise maps, broadcasting binary ops, comparisons, select and casts.

use super::{check_output, Tensor};
use crate::dispatch;
use crate::operand::SameShape;
use crate::{Backend, BinaryOp, CmpOp, DType, Error, Result, UnaryOp};

macro_rules! unary_methods {
    ($($(#[$doc:meta])* $name:ident => $op:ident;)*) => {
        impl<B: Backend> Tensor<B> {
            $($(#[$doc])* pub fn $name(&self) -> Result<Self> { self.unary(UnaryOp::$op) })*
        }
    };
}

unary_methods! {
    /// `-x`.
    neg => Neg;
    /// `|x|`.
    abs => Abs;
    /// Sign of each element (`±0` and NaN kept).
    sign => Sign;
    /// `x * x`.
    square => Square;
    /// `1 / x`.
    recip => Recip;
    /// Square root.
    sqrt => Sqrt;
    /// `e^x`.
    exp => Exp;
    /// Natural logarithm.
    log => Log;
    /// Sine.
    sin => Sin;
    /// Cosine.
    cos => Cos;
    /// Hyperbolic tangent.
    tanh => Tanh;
    /// Logistic sigmoid.
    sigmoid => Sigmoid;
    /// `max(x, 0)`.
    relu => Relu;
    /// Exact (erf) GELU.
    gelu => Gelu;
    /// Error function.
    erf => Erf;
    /// Floor.
    floor => Floor;
    /// Ceiling.
    ceil => Ceil;
    /// Logical not of a bool tensor.
    logical_not => Not;
}

macro_rules! binary_methods {
    ($($(#[$doc:meta])* $name:ident, $scalar_name:ident => $op:ident;)*) => {
        impl<B: Backend> Tensor<B> {
            $(
                $(#[$doc])* pub fn $name(&self, rhs: &Self) -> Result<Self> {
                    self.binary(BinaryOp::$op, rhs)
                }
                $(#[$doc])* #[doc = "With a scalar right operand of the same dtype."]
                pub fn $scalar_name(&self, rhs: f64) -> Result<Self> {
                    self.binary(BinaryOp::$op, &self.scalar_like(rhs)?)
                }
            )*
        }
    };
}

binary_methods! {
    /// Element-wise sum with broadcasting.
    add, add_scalar => Add;
    /// Element-wise difference with broadcasting.
    sub, sub_scalar => Sub;
    /// Element-wise product with broadcasting.
    mul, mul_scalar => Mul;
    /// Element-wise quotient with broadcasting.
    div, div_scalar => Div;
    /// Element-wise power with broadcasting.
    pow, powf => Pow;
    /// Element-wise maximum with broadcasting (NaN-propagating).
    maximum, maximum_scalar => Maximum;
    /// Element-wise minimum with broadcasting (NaN-propagating).
    minimum, minimum_scalar => Minimum;
}

macro_rules! compare_methods {
    ($($(#[$doc:meta])* $name:ident, $scalar_name:ident => $op:ident;)*) => {
        impl<B: Backend> Tensor<B> {
            $(
                $(#[$doc])* pub fn $name(&self, rhs: &Self) -> Result<Self> {
                    self.compare(CmpOp::$op, rhs)
                }
                $(#[$doc])* #[doc = "With a scalar right operand."]
                pub fn $scalar_name(&self, rhs: f64) -> Result<Self> {
                    self.compare(CmpOp::$op, &self.scalar_like(rhs)?)
                }
            )*
        }
    };
}

compare_methods! {
    /// `self == rhs` as a bool tensor, with broadcasting.
    eq, eq_scalar => Eq;
    /// `self != rhs` as a bool tensor, with broadcasting.
    ne, ne_scalar => Ne;
    /// `self < rhs` as a bool tensor, with broadcasting.
    lt, lt_scalar => Lt;
    /// `self <= rhs` as a bool tensor, with broadcasting.
    le, le_scalar => Le;
    /// `self > rhs` as a bool tensor, with broadcasting.
    gt, gt_scalar => Gt;
    /// `self >= rhs` as a bool tensor, with broadcasting.
    ge, ge_scalar => Ge;
}

impl<B: Backend> Tensor<B> {
    /// A rank-0 tensor of this tensor's dtype and device holding `value`.
    pub fn scalar_like(&self, value: f64) -> Result<Self> {
        Self::full(crate::Shape::scalar(), value, self.dtype(), &self.backend)
    }

    /// Applies an element-wise map.
    pub fn unary(&self, op: UnaryOp) -> Result<Self> {
        if !op.supports(self.dtype()) {
            return Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: self.dtype(),
            });
        }
        check_output(op.name(), self.shape(), self.dtype())?;
        let storage = dispatch::unary(&self.backend, op, self.operand(op.name())?)?;
        Ok(Self::from_output(
            &self.backend,
            storage,
            self.shape().clone(),
        ))
    }

    /// Broadcasts two operands to their common shape after checking device and dtype.
    fn broadcast_pair(&self, op: &'static str, rhs: &Self) -> Result<(Self, Self)> {
        self.check_same_device(op, rhs)?;
        self.check_same_dtype(op, rhs)?;
        let shape = self.shape().broadcast_with(op, rhs.shape())?;
        Ok((self.broadcast_to(&shape)?, rhs.broadcast_to(&shape)?))
    }

    /// Applies a binary op with NumPy broadcasting.
    pub fn binary(&self, op: BinaryOp, rhs: &Self) -> Result<Self> {
        let (a, b) = self.broadcast_pair(op.name(), rhs)?;
        if !op.supports(a.dtype()) {
            return Err(Error::UnsupportedDType {
                op: op.name(),
                dtype: a.dtype(),
            });
        }
        check_output(op.name(), a.shape(), a.dtype())?;
        let xs = SameShape::new(op.name(), [a.operand(op.name())?, b.operand(op.name())?])?;
        let storage = dispatch::binary(&self.backend, op, xs)?;
        Ok(Self::from_output(&self.backend, storage, a.shape().clone()))
    }

    /// Compares with broadcasting; the result is a bool tensor.
    pub fn compare(&self, op: CmpOp, rhs: &Self) -> Result<Self> {
        let (a, b) = self.broadcast_pair(op.name(), rhs)?;
        check_output(op.name(), a.shape(), DType::Bool)?;
        let xs = SameShape::new(op.name(), [a.operand(op.name())?, b.operand(op.name())?])?;
        let storage = dispatch::compare(&self.backend, op, xs)?;
        Ok(Self::from_output(&self.backend, storage, a.shape().clone()))
    }

    /// `self ? on_true : on_false` element by element; `self` is a bool mask; all three broadcast.
    pub fn where_select(&self, on_true: &Self, on_false: &Self) -> Result<Self> {
        const OP: &str = "where";
        if self.dtype() != DType::Bool {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: self.dtype(),
                rhs: DType::Bool,
            });
        }
        self.check_same_device(OP, on_true)?;
        self.check_same_device(OP, on_false)?;
        on_true.check_same_dtype(OP, on_false)?;
        let shape = self
            .shape()
            .broadcast_with(OP, on_true.shape())?
            .broadcast_with(OP, on_false.shape())?;
        check_output(OP, &shape, on_true.dtype())?;
        let (c, t, f) = (
            self.broadcast_to(&shape)?,
            on_true.broadcast_to(&shape)?,
            on_false.broadcast_to(&shape)?,
        );
        let xs = SameShape::new(OP, [c.operand(OP)?, t.operand(OP)?, f.operand(OP)?])?;
        let storage = dispatch::where_select(&self.backend, xs)?;
        Ok(Self::from_output(&self.backend, storage, shape))
    }

    /// `f` applied to this tensor in its compute dtype ([`DType::compute_dtype`]): a 16-bit
    /// float tensor is widened to f32 (exactly), `f` runs in f32, and its result is rounded
    /// once back to the 16-bit dtype when it is f32. For composites of several ops (mean,
    /// variance, losses), so that their intermediates are neither rounded to 16 bits nor
    /// overflow them. Other dtypes call `f` on `self` directly.
    pub fn in_compute_dtype(&self, f: impl FnOnce(&Self) -> Result<Self>) -> Result<Self> {
        let dtype = self.dtype();
        if dtype.compute_dtype() == dtype {
            return f(self);
        }
        let out = f(&self.to_dtype(dtype.compute_dtype())?)?;
        if out.dtype() == dtype.compute_dtype() {
            out.to_dtype(dtype)
        } else {
            Ok(out)
        }
    }

    /// Converts to `dtype` (a no-op when it already is).
    pub fn to_dtype(&self, dtype: DType) -> Result<Self> {
        if dtype == self.dtype() {
            return Ok(self.clone());
        }
        if !self.backend.supports_dtype(dtype) {
            return Err(Error::UnsupportedDType {
                op: "to_dtype",
                dtype,
            });
        }
        check_output("to_dtype", self.shape(), dtype)?;
        let storage = self.backend.cast(self.operand("to_dtype")?, dtype)?;
        Ok(Self::from_output(
            &self.backend,
            storage,
            self.shape().clone(),
        ))
    }

    /// Limits every element to `[min, max]` (NaN stays NaN).
    pub fn clamp(&self, min: f64, max: f64) -> Result<Self> {
        if min > max {
            return Err(Error::InvalidArgument {
                op: "clamp",
                msg: format!("min {min} is greater than max {max}"),
            });
        }
        self.maximum_scalar(min)?.minimum_scalar(max)
    }

    /// `1 / sqrt(x)`.
    pub fn rsqrt(&self) -> Result<Self> {
        self.sqrt()?.recip()
    }

    /// Leaky ReLU: `x` where positive, `slope * x` elsewhere.
    pub fn leaky_relu(&self, slope: f64) -> Result<Self> {
        let scaled = self.mul_scalar(slope)?;
        self.gt_scalar(0.0)?.where_select(self, &scaled)
    }
}
