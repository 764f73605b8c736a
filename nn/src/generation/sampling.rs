//! [`Sampler`]: picking the next token from logits with temperature, top-k and top-p
//! (nucleus) filtering, reproducibly.

use crate::data::SplitMix64;
use crate::Config;
use tessera_core::{Error, Result};

/// How the next token is drawn.
///
/// ```
/// use tessera_nn::generation::SamplingConfig;
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
    /// Keep only the most likely tokens whose probabilities (after temperature and top-k) sum
    /// to at least `p` (nucleus sampling; the most likely token always stays).
    #[config(default = None)]
    pub top_p: Option<f64>,
    /// Seed of the draws.
    #[config(default = 0)]
    pub seed: u64,
}

impl SamplingConfig {
    /// A sampler following this configuration; errors on a negative or non-finite temperature
    /// `top_k = 0`, or a `top_p` outside `(0, 1]`.
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
        if let Some(p) = self.top_p.filter(|p| !(*p > 0.0 && *p <= 1.0)) {
            return Err(Error::InvalidArgument {
                op: "sampling",
                msg: format!("top_p must be in (0, 1], got {p}"),
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
    /// The index of the next token given the logits of the last position (which must not be
    /// empty: an empty slice gives 0).
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
        let mut weights: Vec<f64> = scaled.iter().map(|&x| (x - max).exp()).collect();
        if let Some(p) = self.config.top_p.filter(|&p| p < 1.0) {
            keep_nucleus(&mut weights, p);
        }
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

/// Zeroes every weight outside the nucleus: the fewest most likely tokens whose probabilities
/// sum to at least `p` (ties broken by index, the most likely token always kept).
fn keep_nucleus(weights: &mut [f64], p: f64) {
    let total: f64 = weights.iter().sum();
    let mut order: Vec<usize> = (0..weights.len()).collect();
    order.sort_by(|&a, &b| weights[b].total_cmp(&weights[a]).then(a.cmp(&b)));
    let mut cumulative = 0.0;
    let mut kept = 0;
    for &i in &order {
        if cumulative >= p * total {
            break;
        }
        cumulative += weights[i];
        kept += 1;
    }
    for &i in &order[kept.max(1)..] {
        weights[i] = 0.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nucleus_is_the_fewest_tokens_reaching_p() {
        // Probabilities 0.5, 0.3, 0.15, 0.05 (unnormalised weights, any scale).
        let base = [3.0, 10.0, 1.0, 6.0];
        for (p, kept) in [(0.4, 1), (0.5, 1), (0.6, 2), (0.8, 2), (0.81, 3), (0.96, 4)] {
            let mut w = base.to_vec();
            keep_nucleus(&mut w, p);
            assert_eq!(
                w.iter().filter(|&&x| x > 0.0).count(),
                kept,
                "p = {p}: {w:?}"
            );
            // The kept ones are the most likely.
            let order = [1, 3, 0, 2];
            assert!(
                order[..kept].iter().all(|&i| w[i] == base[i]),
                "p = {p}: {w:?}"
            );
        }
    }

    #[test]
    fn a_tiny_nucleus_samples_greedily() {
        let logits = [0.1, 2.0, 1.9, -1.0];
        let mut sampler = SamplingConfig::new()
            .top_p(Some(1e-9))
            .seed(3)
            .sampler()
            .unwrap();
        assert!((0..50).all(|_| sampler.sample(&logits) == 1));
        assert!(SamplingConfig::new().top_p(Some(0.0)).sampler().is_err());
        assert!(SamplingConfig::new().top_p(Some(1.5)).sampler().is_err());
    }
}
