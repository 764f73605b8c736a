//! Mixed precision: a [`Precision`] policy for the layers and a [`DynamicLossScaler`] for f16.
//!
//! Under a 16-bit policy the parameters and the optimizer state stay f32 (the *master
//! weights*); a [`crate::layers::Linear`] casts its input and parameters to the compute dtype,
//! multiplies there (f32 accumulation on every backend that supports the 16-bit dtypes) and
//! casts its output back. The casts are differentiable, so gradients reach the f32 parameters
//! in f32. Everything else (softmax, losses, normalisation) stays in the dtype of its input.
//!
//! Not done yet: Conv2d and attention ignore the policy, and `train` has no `--precision`
//! flag (see the README).

mod loss_scaler;

pub use loss_scaler::{DynamicLossScaler, ScalerStep};

use std::fmt;
use std::str::FromStr;
use tessera_core::DType;

/// The dtype matrix products are computed in; parameters stay f32 whatever the policy.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Precision {
    /// Everything in the parameters' dtype (no casts).
    #[default]
    F32,
    /// bfloat16 compute: f32's range, so no loss scaling is needed.
    BF16,
    /// IEEE f16 compute: needs a [`DynamicLossScaler`] so that small gradients do not flush
    /// to zero.
    F16,
}

impl Precision {
    /// Every policy.
    pub const ALL: [Precision; 3] = [Precision::F32, Precision::BF16, Precision::F16];

    /// The 16-bit compute dtype, or `None` for [`Precision::F32`] (compute in the parameters'
    /// own dtype).
    pub fn compute_dtype(self) -> Option<DType> {
        match self {
            Precision::F32 => None,
            Precision::BF16 => Some(DType::BF16),
            Precision::F16 => Some(DType::F16),
        }
    }

    /// Whether training under this policy needs loss scaling (f16's narrow exponent range).
    pub fn needs_loss_scaling(self) -> bool {
        self == Precision::F16
    }

    /// Lower-case name, as `--precision` takes it.
    pub fn name(self) -> &'static str {
        match self {
            Precision::F32 => "f32",
            Precision::BF16 => "bf16",
            Precision::F16 => "f16",
        }
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Parses `f32`, `bf16` or `f16` (case-insensitively).
impl FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Precision::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown precision `{s}` (expected f32, bf16 or f16)"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_only_f16_needs_scaling() {
        for p in Precision::ALL {
            assert_eq!(p.name().parse::<Precision>(), Ok(p));
        }
        assert_eq!("BF16".parse::<Precision>(), Ok(Precision::BF16));
        assert!("fp8".parse::<Precision>().is_err());
        assert_eq!(Precision::F32.compute_dtype(), None);
        assert_eq!(Precision::F16.compute_dtype(), Some(DType::F16));
        assert!(Precision::F16.needs_loss_scaling() && !Precision::BF16.needs_loss_scaling());
    }
}
