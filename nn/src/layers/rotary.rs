//! [`RotaryEmbedding`]: rotary position embeddings (RoPE, as Llama applies them to queries and
//! keys), with the frequency scalings of `transformers` ([`RopeScaling`]: Llama 3's, linear and
//! dynamic NTK).

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
    /// `"rope_type": "linear"` (position interpolation): every frequency divided by `factor`,
    /// as if each position were `factor` times nearer the start.
    Linear {
        /// How much longer the new context is (positive).
        factor: f64,
    },
    /// `"rope_type": "dynamic"` (dynamic NTK scaling): a call covering positions up to `len`,
    /// with `len` beyond `original_max_position_embeddings`, rotates them with the base
    /// `θ·(factor·len/original − (factor − 1))^(d/(d − 2))`; shorter ones keep the plain
    /// frequencies. Each call's positions are rotated with the frequencies of its own `len`
    /// (`start + length`), as `transformers` does within one generation. (`transformers` also
    /// keeps the largest `len` it has seen across calls; this does not.)
    Dynamic {
        /// How much longer the new context is (at least 1).
        factor: f64,
        /// The context length of the original training (`max_position_embeddings` of the
        /// Hugging Face configuration).
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
    theta: f64,
    scaling: RopeScaling,
    /// The inverse frequency of each pair (of sequences no longer than the original context,
    /// for [`RopeScaling::Dynamic`]).
    inv_freq: Vec<f32>,
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument {
        op: "RotaryEmbedding",
        msg,
    }
}

/// The inverse frequencies of `head_dim / 2` pairs for calls whose positions end at `len`,
/// computed in f32 like `transformers`.
fn inverse_frequencies(
    head_dim: usize,
    theta: f64,
    scaling: RopeScaling,
    len: usize,
) -> Result<Vec<f32>> {
    let plain = |theta: f64| {
        (0..head_dim / 2).map(move |i| {
            let exponent = (2 * i) as f32 / head_dim as f32;
            1.0f32 / (theta as f32).powf(exponent)
        })
    };
    // A head width read from a file may be huge: a typed error, not an abort.
    let pairs = head_dim / 2;
    let collect = |values: &mut dyn Iterator<Item = f32>| -> Result<Vec<f32>> {
        let mut out = Vec::new();
        out.try_reserve_exact(pairs)
            .map_err(|_| Error::OutOfMemory {
                device: "host".into(),
                requested_bytes: pairs.saturating_mul(std::mem::size_of::<f32>()),
            })?;
        out.extend(values);
        Ok(out)
    };
    let frequencies: Vec<f32> = match scaling {
        RopeScaling::None => collect(&mut plain(theta))?,
        RopeScaling::Linear { factor } => {
            if !(factor.is_finite() && factor > 0.0) {
                return Err(invalid(format!(
                    "linear rope scaling needs a finite factor > 0, got {factor}"
                )));
            }
            // `transformers` divides its f32 frequencies by the factor in f32.
            collect(&mut plain(theta).map(|f| f / factor as f32))?
        }
        RopeScaling::Dynamic {
            factor,
            original_max_position_embeddings: original,
        } => {
            if !(factor.is_finite() && factor >= 1.0 && original > 0) {
                return Err(invalid(format!(
                    "dynamic rope scaling needs a finite factor >= 1 and an original context \
                     of at least one position, got {factor} and {original}"
                )));
            }
            if len <= original {
                collect(&mut plain(theta))?
            } else {
                let d = head_dim as f64;
                let stretch = factor * len as f64 / original as f64 - (factor - 1.0);
                collect(&mut plain(theta * stretch.powf(d / (d - 2.0))))?
            }
        }
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
            collect(&mut plain(theta).map(|f| {
                let f = f as f64;
                let wavelen = 2.0 * std::f64::consts::PI / f;
                let scaled = if wavelen > low_wavelen {
                    f / factor
                } else if wavelen < high_wavelen {
                    f
                } else {
                    let smooth =
                        (old / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
                    (1.0 - smooth) * f / factor + smooth * f
                };
                scaled as f32
            }))?
        }
    };
    if let Some(bad) = frequencies.iter().find(|f| !(f.is_finite() && **f > 0.0)) {
        return Err(invalid(format!(
            "the rotary frequencies of {scaling:?} at {len} positions are not finite and \
             positive ({bad})"
        )));
    }
    Ok(frequencies)
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
        let inv_freq = inverse_frequencies(head_dim, theta, scaling, 0)?;
        Ok(RotaryEmbedding {
            head_dim,
            max_positions,
            theta,
            scaling,
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
        let dynamic;
        let inv_freq = match self.scaling {
            RopeScaling::Dynamic {
                original_max_position_embeddings,
                ..
            } if start + len > original_max_position_embeddings => {
                dynamic =
                    inverse_frequencies(self.head_dim, self.theta, self.scaling, start + len)?;
                &dynamic
            }
            _ => &self.inv_freq,
        };
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for v in [&mut cos, &mut sin] {
            v.try_reserve_exact(numel).map_err(|_| Error::OutOfMemory {
                device: "host".into(),
                requested_bytes: numel.saturating_mul(4),
            })?;
        }
        for p in start..start + len {
            for _half in 0..2 {
                for &f in inv_freq {
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

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_cpu::Cpu;

    /// The cosines and sines of `rope` at `start..start + len`, as f64.
    fn table(rope: &RotaryEmbedding, start: usize, len: usize) -> (Vec<f64>, Vec<f64>) {
        let (cos, sin) = rope.tables(start, len, DType::F32, &Cpu::new()).unwrap();
        (cos.to_vec_f64().unwrap(), sin.to_vec_f64().unwrap())
    }

    /// The same tables from the definition in f64: pair `i` of position `p` turns by
    /// `p · base^(-2i/d) / divide`.
    fn reference(
        d: usize,
        base: f64,
        divide: f64,
        start: usize,
        len: usize,
    ) -> (Vec<f64>, Vec<f64>) {
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for p in start..start + len {
            for _half in 0..2 {
                for i in 0..d / 2 {
                    let angle = p as f64 * base.powf(-2.0 * i as f64 / d as f64) / divide;
                    cos.push(angle.cos());
                    sin.push(angle.sin());
                }
            }
        }
        (cos, sin)
    }

    fn assert_close(got: &(Vec<f64>, Vec<f64>), want: &(Vec<f64>, Vec<f64>), tol: f64) {
        for (g, w) in got.0.iter().chain(&got.1).zip(want.0.iter().chain(&want.1)) {
            assert!((g - w).abs() <= tol, "{g} vs {w}");
        }
        assert_eq!(got.0.len(), want.0.len());
    }

    #[test]
    fn a_head_width_no_memory_holds_is_a_typed_error() {
        // 2^61 pairs of f32: more than any address space (a config file may say anything).
        let err = RotaryEmbedding::new(1 << 62, 1, 10_000.0, RopeScaling::None).unwrap_err();
        assert!(matches!(err, Error::OutOfMemory { .. }), "{err:?}");
    }

    #[test]
    fn linear_scaling_divides_every_angle_by_the_factor() {
        let rope =
            RotaryEmbedding::new(8, 64, 10_000.0, RopeScaling::Linear { factor: 4.0 }).unwrap();
        assert_close(
            &table(&rope, 3, 20),
            &reference(8, 10_000.0, 4.0, 3, 20),
            2e-5,
        );
    }

    #[test]
    fn dynamic_scaling_keeps_short_calls_and_stretches_the_base_past_the_original_context() {
        let (d, theta, factor, original) = (16, 10_000.0, 2.0, 32);
        let scaling = RopeScaling::Dynamic {
            factor,
            original_max_position_embeddings: original,
        };
        let rope = RotaryEmbedding::new(d, 128, theta, scaling).unwrap();
        let plain = RotaryEmbedding::new(d, 128, theta, RopeScaling::None).unwrap();
        // Up to the original context: the plain frequencies, exactly.
        assert_eq!(table(&rope, 0, original), table(&plain, 0, original));
        assert_eq!(table(&rope, 30, 2), table(&plain, 30, 2));
        // Beyond: the base of `transformers`' formula, for this call's end.
        for (start, len) in [(0, 80), (10, 40), (99, 1)] {
            let end = (start + len) as f64;
            let stretch = factor * end / original as f64 - (factor - 1.0);
            let base = theta * stretch.powf(d as f64 / (d as f64 - 2.0));
            assert_close(
                &table(&rope, start, len),
                &reference(d, base, 1.0, start, len),
                1e-4,
            );
        }
        // One decoding step rotates its position as the whole prefix would have.
        let whole = table(&rope, 0, 60);
        let step = table(&rope, 59, 1);
        assert_eq!(step.0[..], whole.0[59 * d..]);
        assert_eq!(step.1[..], whole.1[59 * d..]);
    }

    #[test]
    fn invalid_scalings_are_refused_by_name() {
        let bad = [
            RopeScaling::Linear { factor: 0.0 },
            RopeScaling::Linear { factor: -2.0 },
            RopeScaling::Linear { factor: f64::NAN },
            RopeScaling::Dynamic {
                factor: 0.5,
                original_max_position_embeddings: 8,
            },
            RopeScaling::Dynamic {
                factor: 2.0,
                original_max_position_embeddings: 0,
            },
        ];
        for scaling in bad {
            let err = RotaryEmbedding::new(8, 16, 10_000.0, scaling).unwrap_err();
            assert!(
                matches!(err, Error::InvalidArgument { .. }) && err.to_string().contains("factor"),
                "{scaling:?}: {err}"
            );
        }
    }
}
