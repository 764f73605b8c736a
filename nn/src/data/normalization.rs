//! Pixel normalisation: bytes to `((x / 255) - mean) / std`, through a 256-entry lookup table.

use crate::{Error, Result};

/// Per-pixel normalisation `((x / 255) - mean) / std` of byte images.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Normalization {
    mean: f32,
    std: f32,
}

impl Normalization {
    /// Fashion-MNIST's usual statistics over its training set: mean 0.2860, std 0.3530.
    pub const FASHION_MNIST: Normalization = Normalization {
        mean: 0.2860,
        std: 0.3530,
    };

    /// MNIST's usual statistics over its training set: mean 0.1307, std 0.3081.
    pub const MNIST: Normalization = Normalization {
        mean: 0.1307,
        std: 0.3081,
    };

    /// Only the scaling to `[0, 1]` (mean 0, std 1).
    pub const UNIT_RANGE: Normalization = Normalization {
        mean: 0.0,
        std: 1.0,
    };

    /// A normalisation with the given mean and standard deviation (of the `[0, 1]`-scaled pixels);
    /// `std` must be finite and positive, `mean` finite.
    pub fn new(mean: f32, std: f32) -> Result<Self> {
        if !mean.is_finite() || !std.is_finite() || std <= 0.0 {
            return Err(Error::InvalidArgument {
                op: "Normalization::new",
                msg: format!("mean {mean} must be finite and std {std} finite and positive"),
            });
        }
        Ok(Normalization { mean, std })
    }

    /// The mean subtracted after scaling.
    pub fn mean(&self) -> f32 {
        self.mean
    }

    /// The standard deviation divided by after centring.
    pub fn std(&self) -> f32 {
        self.std
    }

    /// The normalised value of one byte.
    pub fn apply(&self, byte: u8) -> f32 {
        (f32::from(byte) / 255.0 - self.mean) / self.std
    }

    /// The normalised value of every byte, indexed by the byte.
    pub fn lookup_table(&self) -> [f32; 256] {
        std::array::from_fn(|b| self.apply(b as u8))
    }
}
