//! Element types: the runtime [`DType`] tag and the compile-time [`Element`] trait.

use std::fmt;

/// The element type of a tensor, known at run time.
///
/// Tessera tensors are dynamically typed (like PyTorch's): a `Tensor<B>` carries its dtype and
/// ops check it, returning [`crate::Error::DTypeMismatch`] instead of panicking. Room is left
/// for `F16`/`BF16`: adding a variant here and its [`Element`] impl is all the core needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// 32-bit IEEE float, the default for parameters and activations.
    F32,
    /// 64-bit IEEE float, used for references and gradient checks.
    F64,
    /// 64-bit signed integer, for indices and class labels.
    I64,
    /// Boolean mask stored as one byte per element (0 or 1), the result of comparisons.
    Bool,
}

impl DType {
    /// Every dtype, in a fixed order (useful for test matrices).
    pub const ALL: [DType; 4] = [DType::F32, DType::F64, DType::I64, DType::Bool];

    /// Size of one element in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// True for `F32` and `F64`.
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F64)
    }

    /// Lower-case name as used in messages and files (`"f32"`, `"i64"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be stored in a tensor.
///
/// Conversions go through `f64`, which represents every value of every supported dtype except
/// `i64` magnitudes above 2^53 (documented lossy; indices never get that large).
pub trait Element:
    Copy + Send + Sync + PartialOrd + fmt::Debug + fmt::Display + Default + 'static
{
    /// The runtime tag for this type.
    const DTYPE: DType;
    /// Converts to `f64` (booleans become 0.0 or 1.0).
    fn to_f64(self) -> f64;
    /// Converts from `f64`: floats round, integers truncate toward zero (saturating, NaN -> 0),
    /// booleans are `x != 0`.
    fn from_f64(x: f64) -> Self;
}

impl Element for f32 {
    const DTYPE: DType = DType::F32;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> Self {
        x as f32
    }
}

impl Element for f64 {
    const DTYPE: DType = DType::F64;
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(x: f64) -> Self {
        x
    }
}

impl Element for i64 {
    const DTYPE: DType = DType::I64;
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn from_f64(x: f64) -> Self {
        x as i64
    }
}

/// Booleans are stored as `u8` (0 or 1) so that masks have a plain byte layout on every device.
impl Element for u8 {
    const DTYPE: DType = DType::Bool;
    fn to_f64(self) -> f64 {
        if self != 0 {
            1.0
        } else {
            0.0
        }
    }
    fn from_f64(x: f64) -> Self {
        u8::from(x != 0.0)
    }
}

/// Floating-point elements: what the math ops (exp, matmul, softmax...) are defined over.
pub trait FloatElement: Element + num_traits::Float + num_traits::FloatConst {
    /// The error function, needed by exact GELU.
    fn erf(self) -> Self;
}

impl FloatElement for f32 {
    fn erf(self) -> Self {
        libm::erff(self)
    }
}

impl FloatElement for f64 {
    fn erf(self) -> Self {
        libm::erf(self)
    }
}
