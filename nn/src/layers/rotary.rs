//! [`RotaryEmbedding`]: rotary position embeddings (RoPE, as Llama applies them to queries and
//! keys), with Llama 3's frequency scaling ([`RopeScaling`]).

use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// How the rotary frequencies are rescaled for contexts longer than the model was first
/// trained on (`rope_scaling` in a Hugging Face `config.json`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// The plain frequencies `θ^(-2i/d)` (`rope_scaling: null`, or `"rope_type": "default"`).
    None,
    /// Llama 3's `"rope_type": "llama3"`: long wavelengths divided by `factor`, short ones kept,
    /// and a smooth blend between.
    Llama3 {
        /// How much longer the new context is.
        factor: f64,
        /// Wavelengths above `original_max_position_embeddings / low_freq_factor` are scaled.
        low_freq_factor: f64,
        /// Wavelengths below `original_max_position_embeddings / high_freq_factor` are kept.
        high_freq_factor: f64,
        /// The context length of the original training.
        original_max_position_embeddings: usize,
    },
}

/// The cosine and sine tables of rotary embeddings for one head width: position `p`, pair `i`
/// rotates by the angle `p · f_i` with `f_i = θ^(-2i/d)` (optionally rescaled). Applied as
/// `x · cos + rotate_half(x) · sin`, the "halves" layout of `transformers`' Llama (the first
/// and second halves of a head form the pairs, not adjacent elements).
///
/// Only the `head_dim / 2` frequencies are kept (on the host); the cosines and sines of the
/// positions a call needs are computed then and uploaded in the input's dtype, so one value
/// serves every backend (it is cloned when a model moves) and a model that knows millions of
/// positions holds no table for them.
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::{RopeScaling, RotaryEmbedding};
/// let rope = RotaryEmbedding::new(8, 16, 10_000.0, RopeScaling::None)?;
/// assert_eq!((rope.head_dim(), rope.max_positions()), (8, 16));
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct RotaryEmbedding {
    head_dim: usize,
    max_positions: usize,
    /// The inverse frequency of each pair.
    inv_freq: Vec<f32>,
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument {
        op: "RotaryEmbedding",
        msg,
    }
}

/// The inverse frequencies of `head_dim / 2` pairs, computed in f32 like `transformers`.
fn inverse_frequencies(head_dim: usize, theta: f64, scaling: RopeScaling) -> Result<Vec<f32>> {
    let plain = (0..head_dim / 2).map(|i| {
        let exponent = (2 * i) as f32 / head_dim as f32;
        1.0f32 / (theta as f32).powf(exponent)
    });
    match scaling {
        RopeScaling::None => Ok(plain.collect()),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_position_embeddings,
        } => {
            if !(factor > 0.0 && low_freq_factor > 0.0 && high_freq_factor > low_freq_factor) {
                return Err(invalid(format!(
                    "llama3 rope scaling needs factor > 0 and high_freq_factor > \
                     low_freq_factor > 0, got {factor}, {low_freq_factor}, {high_freq_factor}"
                )));
            }
            let old = original_max_position_embeddings as f64;
            let (low_wavelen, high_wavelen) = (old / low_freq_factor, old / high_freq_factor);
            Ok(plain
                .map(|f| {
                    let f = f as f64;
                    let wavelen = 2.0 * std::f64::consts::PI / f;
                    let scaled = if wavelen > low_wavelen {
                        f / factor
                    } else if wavelen < high_wavelen {
                        f
                    } else {
                        let smooth = (old / wavelen - low_freq_factor)
                            / (high_freq_factor - low_freq_factor);
                        (1.0 - smooth) * f / factor + smooth * f
                    };
                    scaled as f32
                })
                .collect())
        }
    }
}

impl RotaryEmbedding {
    /// Tables for heads of `head_dim` (even) elements, positions `0..max_positions`, base
    /// `theta` (`rope_theta`) and `scaling`.
    pub fn new(
        head_dim: usize,
        max_positions: usize,
        theta: f64,
        scaling: RopeScaling,
    ) -> Result<Self> {
        if head_dim == 0 || head_dim % 2 != 0 {
            return Err(invalid(format!(
                "the head width must be even and positive, got {head_dim}"
            )));
        }
        if !(theta.is_finite() && theta > 1.0) {
            return Err(invalid(format!("theta must be above 1, got {theta}")));
        }
        if max_positions.checked_mul(head_dim).is_none() {
            return Err(Error::SizeOverflow {
                op: "RotaryEmbedding",
                msg: format!("{max_positions} positions of {head_dim}"),
            });
        }
        let inv_freq = inverse_frequencies(head_dim, theta, scaling)?;
        if let Some(bad) = inv_freq.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
            return Err(invalid(format!(
                "the rotary frequencies of {scaling:?} are not finite and positive ({bad})"
            )));
        }
        Ok(RotaryEmbedding {
            head_dim,
            max_positions,
            inv_freq,
        })
    }

    /// The head width.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// Positions covered.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// The cosines and sines `[len, head_dim]` of positions `start..start + len`, in `dtype`
    /// (each angle the f32 product position · frequency, as `transformers` computes it).
    fn tables<B: Backend>(
        &self,
        start: usize,
        len: usize,
        dtype: DType,
        backend: &B,
    ) -> Result<(Tensor<B>, Tensor<B>)> {
        let numel = len * self.head_dim;
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for v in [&mut cos, &mut sin] {
            v.try_reserve_exact(numel).map_err(|_| Error::OutOfMemory {
                device: "host".into(),
                requested_bytes: numel.saturating_mul(4),
            })?;
        }
        for p in start..start + len {
            for _half in 0..2 {
                for &f in &self.inv_freq {
                    let angle = (p as f32 * f) as f64;
                    cos.push(angle.cos() as f32);
                    sin.push(angle.sin() as f32);
                }
            }
        }
        let dims = [len, self.head_dim];
        let (cos, sin) = (
            Tensor::from_vec(cos, dims, backend)?,
            Tensor::from_vec(sin, dims, backend)?,
        );
        if dtype == DType::F32 {
            Ok((cos, sin))
        } else {
            Ok((cos.to_dtype(dtype)?, sin.to_dtype(dtype)?))
        }
    }

    /// Rotates `x: [batch, heads, len, head_dim]` holding positions `start..start + len`.
    pub fn apply<B: Backend>(&self, x: &Var<B>, start: usize) -> Result<Var<B>> {
        let d = self.head_dim;
        if x.rank() != 4 || x.dims()[3] != d {
            return Err(invalid(format!(
                "expected [batch, heads, length, {d}], got {}",
                x.shape()
            )));
        }
        let len = x.dims()[2];
        if start
            .checked_add(len)
            .is_none_or(|end| end > self.max_positions)
        {
            return Err(invalid(format!(
                "positions {start}..{start}+{len} exceed the {} the model knows",
                self.max_positions
            )));
        }
        let backend = x.value().backend().clone();
        let (cos, sin) = self.tables(start, len, x.dtype(), &backend)?;
        let half = d / 2;
        let rotated = Var::cat(
            &[&x.narrow(3, half, half)?.neg()?, &x.narrow(3, 0, half)?],
            3,
        )?;
        x.mul(&Var::constant(cos))?
            .add(&rotated.mul(&Var::constant(sin))?)
    }
}
