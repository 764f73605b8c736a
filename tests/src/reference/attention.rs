//! Reference scaled dot-product attention and its gradient, from the definition of
//! `tessera_core::attention` with loops over every (query, key) pair.

use super::RefArray;
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{DType, Distribution};

/// The mask of a reference problem, broadcast to `[nb, L, S]` (flat, row-major).
#[derive(Clone, Debug)]
pub enum RefMask {
    /// No mask.
    None,
    /// `true` (non-zero) may attend.
    Bool(Vec<f64>),
    /// Added to the scores.
    Additive(Vec<f64>),
}

/// One problem: q `[nb, L, E]`, k `[nb, S, E]`, v `[nb, S, Ev]` (flattened batch), mask,
/// causality, scale and dropout `(p, seed, offset)`.
#[derive(Clone, Debug)]
pub struct RefAttention {
    /// Element type the backend computes in (its dropout draws use that precision).
    pub dtype: DType,
    /// Batch elements.
    pub nb: usize,
    /// `[nb, L, E]`.
    pub q: RefArray,
    /// `[nb, S, E]`.
    pub k: RefArray,
    /// `[nb, S, Ev]`.
    pub v: RefArray,
    /// The mask.
    pub mask: RefMask,
    /// Top-left aligned causal masking.
    pub causal: bool,
    /// The score scale.
    pub scale: f64,
    /// `(p, seed, offset)`.
    pub dropout: Option<(f64, u64, u64)>,
}

/// The forward results: output, log-sum-exp and the error scales of each.
pub struct RefForward {
    /// `[nb, L, Ev]`.
    pub out: RefArray,
    /// `[nb, L]`.
    pub lse: RefArray,
    /// Per output element: `Σ_j p·keep·|v| · (1 + score magnitude)`.
    pub out_scale: RefArray,
    /// Per row: `1 + score magnitude`.
    pub lse_scale: RefArray,
}

/// The gradients and their error scales.
pub struct RefGrads {
    /// dq, dk, dv.
    pub grads: [RefArray; 3],
    /// Their error scales.
    pub scales: [RefArray; 3],
}

impl RefAttention {
    fn l(&self) -> usize {
        self.q.shape[1]
    }
    fn s(&self) -> usize {
        self.k.shape[1]
    }
    fn e(&self) -> usize {
        self.q.shape[2]
    }
    fn ev(&self) -> usize {
        self.v.shape[2]
    }

    /// The masked, scaled score of (b, i, j), `-inf` when masked, and its magnitude.
    fn score(&self, b: usize, i: usize, j: usize) -> (f64, f64) {
        let (l, s, e) = (self.l(), self.s(), self.e());
        let at = (b * l + i) * s + j;
        if self.causal && j > i {
            return (f64::NEG_INFINITY, 0.0);
        }
        if let RefMask::Bool(m) = &self.mask {
            if m[at] == 0.0 {
                return (f64::NEG_INFINITY, 0.0);
            }
        }
        let (mut dot, mut mag) = (0.0, 0.0);
        for d in 0..e {
            let (x, y) = (
                self.q.data[(b * l + i) * e + d],
                self.k.data[(b * s + j) * e + d],
            );
            dot += x * y;
            mag += (x * y).abs();
        }
        let mut value = dot * self.scale;
        mag *= self.scale.abs();
        if let RefMask::Additive(m) = &self.mask {
            value += m[at];
            if m[at].is_finite() {
                mag += m[at].abs();
            }
        }
        (value, mag)
    }

    /// The dropout factor of (b, i, j): `1/(1-p)` kept, 0 dropped, 1 without dropout.
    fn keep(&self, b: usize, i: usize, j: usize) -> f64 {
        let Some((p, seed, offset)) = self.dropout else {
            return 1.0;
        };
        // Counters wrap modulo 2^64.
        let n = offset.wrapping_add(((b * self.l() + i) * self.s() + j) as u64);
        let uniform = Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        };
        let u = match self.dtype {
            DType::F32 => sample_f32(uniform, seed, n) as f64,
            _ => sample_f64(uniform, seed, n),
        };
        if u >= p {
            1.0 / (1.0 - p)
        } else {
            0.0
        }
    }

    /// For row (b, i): the probabilities, the log-sum-exp and the largest score magnitude.
    fn row(&self, b: usize, i: usize) -> (Vec<f64>, f64, f64) {
        let scores: Vec<(f64, f64)> = (0..self.s()).map(|j| self.score(b, i, j)).collect();
        let max = scores.iter().map(|s| s.0).fold(f64::NEG_INFINITY, f64::max);
        let mag = scores.iter().map(|s| s.1).fold(0.0, f64::max);
        if max == f64::NEG_INFINITY {
            return (vec![0.0; self.s()], f64::NEG_INFINITY, mag);
        }
        let total: f64 = scores.iter().map(|s| (s.0 - max).exp()).sum();
        let lse = max + total.ln();
        let p = scores.iter().map(|s| (s.0 - lse).exp()).collect();
        (p, lse, mag + lse.abs())
    }

    /// The forward pass.
    pub fn forward(&self) -> RefForward {
        let (nb, l, s, ev) = (self.nb, self.l(), self.s(), self.ev());
        let mut out = RefArray::full(vec![nb, l, ev], 0.0);
        let mut out_scale = RefArray::full(vec![nb, l, ev], 0.0);
        let mut lse = RefArray::full(vec![nb, l], 0.0);
        let mut lse_scale = RefArray::full(vec![nb, l], 0.0);
        for b in 0..nb {
            for i in 0..l {
                let (p, row_lse, mag) = self.row(b, i);
                lse.data[b * l + i] = row_lse;
                lse_scale.data[b * l + i] = 1.0 + mag;
                for (j, &pj) in p.iter().enumerate().take(s) {
                    let w = pj * self.keep(b, i, j);
                    for d in 0..ev {
                        let x = self.v.data[(b * s + j) * ev + d];
                        out.data[(b * l + i) * ev + d] += w * x;
                        out_scale.data[(b * l + i) * ev + d] += (w * x).abs() * (1.0 + mag);
                    }
                }
            }
        }
        RefForward {
            out,
            lse,
            out_scale,
            lse_scale,
        }
    }

    /// The gradients given the upstream gradient `g: [nb, L, Ev]`:
    /// `dV = Σ_i p·keep·dO`, `dP = keep·(dO·v)`, `D = Σ_j p·dP`, `dS = p·(dP - D)`,
    /// `dQ = scale·Σ_j dS·k`, `dK = scale·Σ_i dS·q`.
    pub fn backward(&self, g: &RefArray) -> RefGrads {
        let (nb, l, s, e, ev) = (self.nb, self.l(), self.s(), self.e(), self.ev());
        let zeros = |rows: usize, cols: usize| RefArray::full(vec![nb, rows, cols], 0.0);
        let (mut dq, mut dk, mut dv) = (zeros(l, e), zeros(s, e), zeros(s, ev));
        let (mut sq, mut sk, mut sv) = (zeros(l, e), zeros(s, e), zeros(s, ev));
        for b in 0..nb {
            for i in 0..l {
                let (p, _, mag) = self.row(b, i);
                let grow = &g.data[(b * l + i) * ev..(b * l + i + 1) * ev];
                let mut dp = vec![0.0; s];
                let mut dp_mag = vec![0.0; s];
                for j in 0..s {
                    let keep = self.keep(b, i, j);
                    let vrow = &self.v.data[(b * s + j) * ev..(b * s + j + 1) * ev];
                    dp[j] = keep * grow.iter().zip(vrow).map(|(x, y)| x * y).sum::<f64>();
                    dp_mag[j] = keep
                        * grow
                            .iter()
                            .zip(vrow)
                            .map(|(x, y)| (x * y).abs())
                            .sum::<f64>();
                    for (d, &gd) in grow.iter().enumerate() {
                        let term = p[j] * keep * gd;
                        dv.data[(b * s + j) * ev + d] += term;
                        sv.data[(b * s + j) * ev + d] += term.abs() * (1.0 + mag);
                    }
                }
                let delta: f64 = p.iter().zip(&dp).map(|(x, y)| x * y).sum();
                let delta_mag: f64 = p.iter().zip(&dp_mag).map(|(x, y)| x * y).sum();
                for j in 0..s {
                    let ds = p[j] * (dp[j] - delta) * self.scale;
                    let ds_mag = p[j] * (dp_mag[j] + delta_mag) * self.scale.abs() * (1.0 + mag);
                    for d in 0..e {
                        let (kq, qk) = (
                            self.k.data[(b * s + j) * e + d],
                            self.q.data[(b * l + i) * e + d],
                        );
                        dq.data[(b * l + i) * e + d] += ds * kq;
                        sq.data[(b * l + i) * e + d] += ds_mag * kq.abs();
                        dk.data[(b * s + j) * e + d] += ds * qk;
                        sk.data[(b * s + j) * e + d] += ds_mag * qk.abs();
                    }
                }
            }
        }
        RefGrads {
            grads: [dq, dk, dv],
            scales: [sq, sk, sv],
        }
    }
}
