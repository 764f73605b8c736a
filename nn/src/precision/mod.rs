//! Mixed precision: a [`Precision`] policy for the layers and a [`DynamicLossScaler`] for f16.
//!
//! Under a 16-bit policy the parameters and the optimizer state stay f32 (the *master
//! weights*). The layers that do the matrix products follow the policy, each the same way:
//! cast its input and parameters (differentiably, [`Precision::to_compute`]) to the compute
//! dtype, compute there (f32 accumulation on every backend that supports the 16-bit dtypes)
//! and cast its output back to the input's dtype. The casts are differentiable, so gradients
//! reach the f32 parameters in f32.
//!
//! * [`crate::layers::Linear`] ([`crate::layers::LinearConfig::precision`]): the product and
//!   the bias.
//! * [`crate::layers::Conv2d`] ([`crate::layers::Conv2dConfig::precision`]): the convolution
//!   and the bias.
//! * [`crate::layers::MultiHeadAttention`]
//!   ([`crate::layers::MultiHeadAttentionConfig::precision`]): the input projection, the scaled
//!   dot-product attention on the 16-bit queries, keys and values (the backends compute its
//!   scores and softmax with f32 math; an additive float mask is cast to the compute dtype,
//!   a bool mask is used as it is) and the output projection; one cast back at the end.
//! * [`crate::layers::TransformerBlock`] and [`crate::gpt::Gpt`] pass their config's
//!   `precision` to their attention and linear layers (the GPT's tied output head too).
//!
//! Everything else stays in the dtype of its input (f32): embeddings, softmax and
//! cross-entropy on the logits, LayerNorm, BatchNorm, activations between layers, residual
//! additions and reductions.
//!
//! ```
//! # fn main() -> tessera_core::Result<()> {
//! use tessera_autograd::Var;
//! use tessera_core::{DType, Generator, Tensor};
//! use tessera_nn::layers::Conv2dConfig;
//! use tessera_nn::precision::Precision;
//! use tessera_nn::Forward;
//! let (dev, mut g) = (tessera_cpu::Cpu::new(), Generator::new(0));
//! let conv = Conv2dConfig::new(3, 8, (3, 3))
//!     .precision(Precision::BF16)
//!     .init(&dev, &mut g)?;
//! let x = Var::constant(Tensor::ones([2, 3, 8, 8], DType::F32, &dev)?);
//! let y = conv.forward(&x)?; // computed in bf16, returned in f32
//! y.sum_all()?.backward()?;
//! assert_eq!(y.dtype(), DType::F32);
//! assert_eq!(conv.weight().dtype(), DType::F32); // master weight
//! assert_eq!(conv.weight().grad().unwrap().dtype(), DType::F32);
//! # Ok(()) }
//! ```

mod cast_cache;
mod loss_scaler;

pub use cast_cache::CastCache;
pub use loss_scaler::{DynamicLossScaler, ScalerStep};

use std::fmt;
use std::str::FromStr;
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Result};

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

    /// A float `v` cast (differentiably: its gradient is cast back) to the compute dtype; `v`
    /// itself under [`Precision::F32`], when it already has the compute dtype and when it is
    /// not a float (indices, bool masks). Inside a [`CastCache`] scope, without gradients, a
    /// parameter's cast is made once and reused.
    pub fn to_compute<B: Backend>(self, v: &Var<B>) -> Result<Var<B>> {
        match self.compute_dtype() {
            Some(d) if v.dtype().is_float() && v.dtype() != d => {
                match cast_cache::cached_cast(v, d)? {
                    Some(cast) => Ok(cast),
                    None => v.to_dtype(d),
                }
            }
            _ => Ok(v.clone()),
        }
    }

    /// `y` cast back to `dtype` (the dtype of the layer's input) after computing under this
    /// policy; `y` itself when it already has it.
    pub fn from_compute<B: Backend>(self, y: Var<B>, dtype: DType) -> Result<Var<B>> {
        if y.dtype() == dtype {
            Ok(y)
        } else {
            y.to_dtype(dtype)
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

    fn from_str(s: &str) -> std::result::Result<Self, String> {
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
