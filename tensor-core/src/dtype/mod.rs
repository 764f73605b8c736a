//! Element types: the runtime [`DType`] tag and the compile-time [`Element`] trait.
//!
//! The 16-bit floats are [`half::f16`] (IEEE binary16) and [`half::bf16`] (bfloat16: f32's
//! exponent range with 8 significant bits), re-exported as [`crate::f16`] and [`crate::bf16`].
//! They are *storage* types: backends compute on them in f32 (see [`DType::compute_dtype`])
//! and round each result once, to nearest with ties to even ([`rounding`]).

pub mod rounding;

use half::{bf16, f16};
use std::fmt;
use std::str::FromStr;

/// The element type of a tensor, known at run time.
///
/// Tessera tensors are dynamically typed (like PyTorch's): a `Tensor<B>` carries its dtype and
/// ops check it, returning [`crate::Error::DTypeMismatch`] instead of panicking. The enum is
/// `#[non_exhaustive]`: later dtypes (fp8, ...) are not breaking changes, so a `match` outside
/// this crate needs a wildcard arm (usually "unsupported").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum DType {
    /// 32-bit IEEE float, the default for parameters and activations.
    F32,
    /// 64-bit IEEE float, used for references and gradient checks.
    F64,
    /// 16-bit IEEE float (binary16: 11 significant bits, largest finite 65504): storage for
    /// mixed-precision compute, computed in f32.
    F16,
    /// bfloat16 (8 significant bits, f32's exponent range): storage for mixed-precision
    /// compute, computed in f32.
    BF16,
    /// 64-bit signed integer, for indices and class labels.
    I64,
    /// Boolean mask stored as one byte per element (0 or 1), the result of comparisons.
    Bool,
}

impl DType {
    /// Every dtype, in a fixed order (useful for test matrices).
    pub const ALL: [DType; 6] = [
        DType::F32,
        DType::F64,
        DType::F16,
        DType::BF16,
        DType::I64,
        DType::Bool,
    ];

    /// The floating-point dtypes, widest last: `F16`, `BF16`, `F32`, `F64`.
    pub const FLOATS: [DType; 4] = [DType::F16, DType::BF16, DType::F32, DType::F64];

    /// Size of one element in bytes.
    pub fn size_in_bytes(self) -> usize {
        match self {
            DType::F16 | DType::BF16 => 2,
            DType::F32 => 4,
            DType::F64 | DType::I64 => 8,
            DType::Bool => 1,
        }
    }

    /// True for the floating-point dtypes (`F16`, `BF16`, `F32`, `F64`).
    pub fn is_float(self) -> bool {
        matches!(self, DType::F16 | DType::BF16 | DType::F32 | DType::F64)
    }

    /// True for the 16-bit floats `F16` and `BF16`, which are stored in 16 bits and computed
    /// in f32.
    pub fn is_half(self) -> bool {
        matches!(self, DType::F16 | DType::BF16)
    }

    /// The dtype arithmetic on this dtype is carried out in: `F32` for the 16-bit floats
    /// (their sums, products and accumulators are f32, rounded once at the end), the dtype
    /// itself otherwise.
    pub fn compute_dtype(self) -> DType {
        if self.is_half() {
            DType::F32
        } else {
            self
        }
    }

    /// The number of significant bits of a float dtype (the implicit leading bit included):
    /// 11 for `F16`, 8 for `BF16`, 24 for `F32`, 53 for `F64`; `None` for the others.
    pub fn mantissa_bits(self) -> Option<u32> {
        match self {
            DType::F16 => Some(11),
            DType::BF16 => Some(8),
            DType::F32 => Some(24),
            DType::F64 => Some(53),
            DType::I64 | DType::Bool => None,
        }
    }

    /// The unit roundoff `2^-p` of a float dtype with `p` significant bits: the largest
    /// relative error of one rounding to nearest (`2^-11` for `F16`, `2^-8` for `BF16`).
    pub fn unit_roundoff(self) -> Option<f64> {
        self.mantissa_bits().map(|p| 0.5f64.powi(p as i32))
    }

    /// Lower-case name as used in messages and files (`"f32"`, `"bf16"`, `"i64"`, ...).
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F64 => "f64",
            DType::F16 => "f16",
            DType::BF16 => "bf16",
            DType::I64 => "i64",
            DType::Bool => "bool",
        }
    }
}

/// Parses the names of [`DType::name`] (`"f32"`, `"bf16"`, ...), case-insensitively.
impl FromStr for DType {
    type Err = UnknownDType;

    fn from_str(s: &str) -> Result<Self, UnknownDType> {
        DType::ALL
            .into_iter()
            .find(|d| d.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownDType(s.to_string()))
    }
}

/// A string that names no [`DType`] (the error of `DType::from_str`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnknownDType(pub String);

impl fmt::Display for UnknownDType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = DType::ALL.iter().map(|d| d.name()).collect();
        write!(
            f,
            "unknown dtype `{}` (expected one of {})",
            self.0,
            names.join(", ")
        )
    }
}

impl std::error::Error for UnknownDType {}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A Rust type that can be stored in a tensor.
///
/// Conversions go through `f64`, which represents every value of every supported dtype except
/// `i64` magnitudes above 2^53 (documented lossy; indices never get that large). Conversions to
/// the 16-bit floats round once, to nearest with ties to even ([`rounding`]).
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

impl Element for f16 {
    const DTYPE: DType = DType::F16;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(x: f64) -> Self {
        rounding::f64_to_f16(x)
    }
}

impl Element for bf16 {
    const DTYPE: DType = DType::BF16;
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(x: f64) -> Self {
        rounding::f64_to_bf16(x)
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

/// Computed in f32 and rounded once.
impl FloatElement for f16 {
    fn erf(self) -> Self {
        f16::from_f32(libm::erff(self.to_f32()))
    }
}

/// Computed in f32 and rounded once.
impl FloatElement for bf16 {
    fn erf(self) -> Self {
        bf16::from_f32(libm::erff(self.to_f32()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sixteen_bit_dtypes_are_two_byte_floats_with_names() {
        for (d, name) in [(DType::F16, "f16"), (DType::BF16, "bf16")] {
            assert_eq!(d.size_in_bytes(), 2);
            assert!(d.is_float() && d.is_half());
            assert_eq!(d.compute_dtype(), DType::F32);
            assert_eq!(d.name(), name);
            assert_eq!(name.parse::<DType>(), Ok(d));
            assert_eq!(name.to_uppercase().parse::<DType>(), Ok(d));
        }
        assert!("f8".parse::<DType>().is_err());
        assert_eq!(
            <f16 as Element>::DTYPE.size_in_bytes(),
            std::mem::size_of::<f16>()
        );
        assert_eq!(
            <bf16 as Element>::DTYPE.size_in_bytes(),
            std::mem::size_of::<bf16>()
        );
        assert_eq!(DType::F16.unit_roundoff(), Some(2f64.powi(-11)));
        assert_eq!(DType::I64.compute_dtype(), DType::I64);
    }

    #[test]
    fn element_conversions_of_16_bit_floats_round_to_nearest_even() {
        // 1 + 2^-11 is the f16 tie between 1 and 1 + 2^-10: even is 1.
        assert_eq!(f16::from_f64(1.0 + 2f64.powi(-11)), f16::ONE);
        // Just above the tie rounds up, which f64 -> f32 -> f16 (two roundings) gets wrong.
        let above = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
        assert_eq!(<f16 as Element>::from_f64(above).to_bits(), 0x3c01);
        assert_eq!(<bf16 as Element>::from_f64(1.0 + 2f64.powi(-8)), bf16::ONE);
        assert_eq!(
            <bf16 as Element>::from_f64(1.0 + 3.0 * 2f64.powi(-8)).to_bits(),
            0x3f82
        );
        assert_eq!(<f16 as Element>::from_f64(70000.0), f16::INFINITY);
        assert_eq!(Element::to_f64(f16::from_bits(0x0001)), 2f64.powi(-24));
        assert_eq!(Element::to_f64(bf16::from_bits(0x0001)), 2f64.powi(-133));
    }
}
