//! [`Sampler`]: picking the next token from logits with temperature and top-k, reproducibly.

use crate::data::SplitMix64;
use crate::Config;
use tessera_core::{Error, Result};

/// How the next token is drawn.
///
/// ```
/// use tessera_nn::gpt::SamplingConfig;
/// let greedy = SamplingConfig::new().temperature(0.0);
/// let mut sampler = greedy.sampler().unwrap();
/// assert_eq!(sampler.sample(&[0.1, 2.0, -1.0]), 1);
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct SamplingConfig {
    /// Logits are divided by it before the softmax; 0 picks the most likely token (greedy).
    #[config(default = 1.0)]
    pub temperature: f64,
    /// Keep only the `k` most likely tokens (those tied with the k-th included).
    #[config(default = None)]
    pub top_k: Option<usize>,
    /// Seed of the draws.
    #[config(default = 0)]
    pub seed: u64,
}

impl SamplingConfig {
    /// A sampler following this configuration; errors on a negative or non-finite temperature
    /// or `top_k = 0`.
    pub fn sampler(&self) -> Result<Sampler> {
        if !(self.temperature.is_finite() && self.temperature >= 0.0) {
            return Err(Error::InvalidArgument {
                op: "sampling",
                msg: format!("temperature must be >= 0, got {}", self.temperature),
            });
        }
        if self.top_k == Some(0) {
            return Err(Error::InvalidArgument {
                op: "sampling",
                msg: "top_k must be at least 1".into(),
            });
        }
        Ok(Sampler {
            config: *self,
            rng: SplitMix64::new(self.seed),
        })
    }
}

/// Draws tokens from logits (on the host: one row of `vocab_size` values per token).
#[derive(Clone, Debug)]
pub struct Sampler {
    config: SamplingConfig,
    rng: SplitMix64,
}

impl Sampler {
    /// The index of the next token given the logits of the last position.
    pub fn sample(&mut self, logits: &[f64]) -> usize {
        let argmax = || {
            logits
                .iter()
                .enumerate()
                .fold((0, f64::NEG_INFINITY), |best, (i, &x)| {
                    if x > best.1 {
                        (i, x)
                    } else {
                        best
                    }
                })
                .0
        };
        if self.config.temperature == 0.0 || logits.len() < 2 {
            return argmax();
        }
        let mut scaled: Vec<f64> = logits
            .iter()
            .map(|&x| x / self.config.temperature)
            .collect();
        if let Some(k) = self.config.top_k.filter(|&k| k < scaled.len()) {
            let mut sorted = scaled.clone();
            sorted.sort_by(|a, b| b.total_cmp(a));
            let threshold = sorted[k - 1];
            for x in &mut scaled {
                if *x < threshold {
                    *x = f64::NEG_INFINITY;
                }
            }
        }
        let max = scaled.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        if !max.is_finite() {
            return argmax();
        }
        let weights: Vec<f64> = scaled.iter().map(|&x| (x - max).exp()).collect();
        let total: f64 = weights.iter().sum();
        let u = (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64 * total;
        let mut cumulative = 0.0;
        for (i, w) in weights.iter().enumerate() {
            cumulative += w;
            if u < cumulative {
                return i;
            }
        }
        // Rounding left u at the very top: the last token with any weight.
        weights
            .iter()
            .rposition(|&w| w > 0.0)
            .unwrap_or_else(argmax)
    }
}
