//! Scaled dot-product attention: the parameters a backend receives
//! ([`AttentionParams`], [`AttentionDropout`]) and what it returns ([`AttentionOutput`],
//! [`AttentionGrads`]). The op itself is [`crate::Tensor::scaled_dot_product_attention`]; its
//! definition, the default every backend may override, is [`crate::composite::scaled_dot_product_attention`].
//!
//! # Definition
//! For `q: [..b, L, E]`, `k: [..b, S, E]`, `v: [..b, S, Ev]` and each batch element:
//!
//! ```text
//! s[i][j] = scale · q[i]·k[j]                 (scale defaults to 1/√E)
//! s[i][j] = -inf   where the mask excludes j for i (bool mask false, or causal and j > i)
//! s[i][j] += m[i][j]                          (a float mask is added)
//! lse[i]  = log Σ_j exp(s[i][j])              (-inf when every s[i][j] is -inf)
//! p[i][j] = exp(s[i][j] - lse[i])             (0 on a row where every score is -inf)
//! p[i][j] = p[i][j] · keep[i][j] / (1 - p_drop) with dropout (keep: uniform draw >= p_drop)
//! out[i]  = Σ_j p[i][j] · v[j]
//! ```
//!
//! PyTorch's `torch.nn.functional.scaled_dot_product_attention` with the same arguments gives
//! the same values (including zeros for fully masked rows); `causal` is its `is_causal`,
//! aligned to the top-left corner (query `i` sees keys `0..=i`, also when `L != S`).

use crate::{Backend, Generator, Tensor};

/// Dropout on the attention probabilities, drawn from the counter-based generator: element
/// `n` of the `[..b, L, S]` probabilities (row-major) is kept when uniform sample
/// `offset + n` of stream `seed` (see [`crate::random::sample_f32`] / `sample_f64`, in the
/// dtype of `q`) is at least `p`, and then scaled by `1 / (1 - p)`. The backward pass draws
/// the same numbers again instead of keeping a mask.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionDropout {
    /// Probability of dropping a weight, in `[0, 1)`.
    pub p: f64,
    /// Stream of the draws.
    pub seed: u64,
    /// Counter of the first draw. Weight `n` of the `[..b, L, S]` weights (row-major) uses
    /// counter `offset + n` modulo 2^64: counters wrap around, as for every counter-based
    /// draw ([`crate::random`]), so any `offset` is valid, `u64::MAX` included.
    pub offset: u64,
}

impl AttentionDropout {
    /// Dropout with probability `p` for `numel` probabilities (`batch · L · S`), reserving
    /// that many draws from `generator`.
    pub fn draw(p: f64, generator: &mut Generator, numel: usize) -> Self {
        let (seed, offset) = generator.advance(numel);
        AttentionDropout { p, seed, offset }
    }
}

/// The parameters of one attention call as a backend receives them (the mask is passed
/// separately). Built by [`crate::Tensor::scaled_dot_product_attention`] from
/// [`AttentionOptions`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttentionParams {
    /// Factor applied to `q·k` (already resolved: `1/√E` by default).
    pub scale: f64,
    /// Query `i` attends only keys `j <= i` (top-left aligned, PyTorch's `is_causal`).
    pub causal: bool,
    /// Dropout on the probabilities, if any (`p > 0`).
    pub dropout: Option<AttentionDropout>,
}

/// What the user passes to [`crate::Tensor::scaled_dot_product_attention`]: PyTorch's
/// `attn_mask`, `is_causal`, `dropout_p` (with its random stream) and `scale`.
///
/// ```
/// # fn demo<B: tessera_core::Backend>(q: &tessera_core::Tensor<B>) -> tessera_core::Result<()> {
/// use tessera_core::AttentionOptions;
/// let out = q.scaled_dot_product_attention(q, q, &AttentionOptions::new().causal(true))?;
/// assert_eq!(out.dims(), q.dims());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct AttentionOptions<'a, B: Backend> {
    /// A mask broadcastable to `[..b, L, S]`: `Bool` (true = may attend) or the float dtype of
    /// `q` (added to the scores; `-inf` excludes).
    pub mask: Option<&'a Tensor<B>>,
    /// Causal masking (combined with `mask` when both are given).
    pub causal: bool,
    /// Dropout on the probabilities.
    pub dropout: Option<AttentionDropout>,
    /// The score scale; `None` means `1/√E`.
    pub scale: Option<f64>,
}

impl<B: Backend> Default for AttentionOptions<'_, B> {
    fn default() -> Self {
        AttentionOptions {
            mask: None,
            causal: false,
            dropout: None,
            scale: None,
        }
    }
}

impl<'a, B: Backend> AttentionOptions<'a, B> {
    /// No mask, not causal, no dropout, scale `1/√E`.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the mask (see [`AttentionOptions::mask`]).
    pub fn mask(mut self, mask: &'a Tensor<B>) -> Self {
        self.mask = Some(mask);
        self
    }

    /// Sets causal masking.
    pub fn causal(mut self, causal: bool) -> Self {
        self.causal = causal;
        self
    }

    /// Sets dropout (a `p` of 0 means none).
    pub fn dropout(mut self, dropout: AttentionDropout) -> Self {
        self.dropout = (dropout.p > 0.0).then_some(dropout);
        self
    }

    /// Sets the score scale.
    pub fn scale(mut self, scale: f64) -> Self {
        self.scale = Some(scale);
        self
    }
}

/// The tensors attention attends with, as a backend receives them: `q: [..b, L, E]`,
/// `k: [..b, S, E]`, `v: [..b, S, Ev]` (one batch shape, float dtype and device, any strided
/// views) and an optional mask, `Bool` or `q`'s dtype, broadcast to `[..b, L, S]`.
#[derive(Debug)]
pub struct AttentionInputs<'a, B: Backend> {
    /// The queries.
    pub q: &'a Tensor<B>,
    /// The keys.
    pub k: &'a Tensor<B>,
    /// The values.
    pub v: &'a Tensor<B>,
    /// Positions that may be attended (`Bool`), or added to the scores (float).
    pub mask: Option<&'a Tensor<B>>,
}

impl<B: Backend> Clone for AttentionInputs<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B: Backend> Copy for AttentionInputs<'_, B> {}

/// The result of the attention forward pass.
#[derive(Clone, Debug)]
pub struct AttentionOutput<B: Backend> {
    /// `[..b, L, Ev]`, contiguous.
    pub out: Tensor<B>,
    /// `[..b, L]`: the log-sum-exp of each row of masked, scaled scores (before dropout),
    /// `-inf` for a fully masked row: all the backward pass needs besides the inputs. In the
    /// compute dtype of the queries ([`crate::DType::compute_dtype`]): f32 for 16-bit inputs,
    /// as in PyTorch, since rounding it to 16 bits would cost every probability the backward
    /// pass rebuilds from it a relative error of `|lse|` 16-bit unit roundoffs.
    pub logsumexp: Tensor<B>,
}

/// The gradients of the attention with respect to its three inputs.
#[derive(Clone, Debug)]
pub struct AttentionGrads<B: Backend> {
    /// With respect to `q`: `[..b, L, E]`.
    pub q: Tensor<B>,
    /// With respect to `k`: `[..b, S, E]`.
    pub k: Tensor<B>,
    /// With respect to `v`: `[..b, S, Ev]`.
    pub v: Tensor<B>,
}
pub use crate::tensor::{check_attention_backward_operands, check_attention_operands};
