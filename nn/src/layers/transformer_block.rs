//! [`TransformerBlock`]: the pre-LayerNorm decoder block of GPT-2 (attention and a GELU MLP,
//! each behind a LayerNorm and added back to the residual stream), and its
//! [`TransformerBlockConfig`].

use super::kv_cache::KvCache;
use super::{
    Dropout, DropoutConfig, GeluApproximation, LayerNorm, LayerNormConfig, Linear, LinearConfig,
    MultiHeadAttention, MultiHeadAttentionConfig, GELU,
};
use crate::module::Forward;
use crate::precision::Precision;
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};

/// The hyper-parameters of a [`TransformerBlock`].
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct TransformerBlockConfig {
    /// The model width.
    pub n_embd: usize,
    /// Attention heads (dividing `n_embd`).
    pub n_head: usize,
    /// Dropout on the attention weights and on both residual branches during training.
    #[config(default = 0.0)]
    pub dropout: f64,
    /// Whether the linear layers and LayerNorms learn biases.
    #[config(default = true)]
    pub bias: bool,
    /// The MLP's hidden width is `mlp_ratio · n_embd`.
    #[config(default = 4)]
    pub mlp_ratio: usize,
    /// How the MLP's GELU is computed (exact, or GPT-2's tanh approximation).
    #[config(default = GeluApproximation::None)]
    pub gelu: GeluApproximation,
    /// The LayerNorms' `eps`.
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
    /// The dtype the attention and the MLP's linear layers compute in ([`Precision`]); the
    /// LayerNorms, GELU and the residual stream stay in `dtype`.
    #[config(default = Precision::F32)]
    pub precision: Precision,
}

impl TransformerBlockConfig {
    /// The block with PyTorch's default initialisation of each layer (a model such as
    /// [`crate::gpt::Gpt`] re-initialises it its own way).
    pub fn init<B: Backend>(
        &self,
        backend: &B,
        generator: &mut Generator,
    ) -> Result<TransformerBlock<B>> {
        let (e, dtype) = (self.n_embd, self.dtype);
        let norm = || {
            LayerNormConfig::new(vec![e])
                .eps(self.layer_norm_eps)
                .bias(self.bias)
                .dtype(dtype)
                .init(backend)
        };
        let hidden = self.mlp_ratio.checked_mul(e).ok_or(Error::SizeOverflow {
            op: "TransformerBlock",
            msg: format!("mlp_ratio {} times n_embd {e}", self.mlp_ratio),
        })?;
        Ok(TransformerBlock {
            ln_1: norm()?,
            attn: MultiHeadAttentionConfig::new(e, self.n_head)
                .dropout(self.dropout)
                .bias(self.bias)
                .dtype(dtype)
                .precision(self.precision)
                .init(backend, generator)?,
            attn_dropout: DropoutConfig::new().p(self.dropout).init(generator)?,
            ln_2: norm()?,
            mlp: Mlp {
                c_fc: LinearConfig::new(e, hidden)
                    .bias(self.bias)
                    .dtype(dtype)
                    .precision(self.precision)
                    .init(backend, generator)?,
                gelu: GELU::with_approximation(self.gelu),
                c_proj: LinearConfig::new(hidden, e)
                    .bias(self.bias)
                    .dtype(dtype)
                    .precision(self.precision)
                    .init(backend, generator)?,
                dropout: DropoutConfig::new().p(self.dropout).init(generator)?,
            },
        })
    }
}

/// The feed-forward half of a block: `c_fc` (`E → ratio·E`), GELU, `c_proj` back to `E`,
/// dropout (nanoGPT's names).
///
/// A clone shares the parameters (the same `Var`s); its random streams and training mode
/// are copies that continue from the same point.
#[derive(Module, Clone)]
pub struct Mlp<B: Backend> {
    /// The expanding projection.
    pub c_fc: Linear<B>,
    /// The activation.
    pub gelu: GELU,
    /// The contracting projection (a residual output: GPT-2 scales its initialisation).
    pub c_proj: Linear<B>,
    /// Dropout on the branch's output.
    pub dropout: Dropout,
}

impl<B: Backend> Forward<B> for Mlp<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let h = self.gelu.forward(&self.c_fc.forward(x)?)?;
        self.dropout.forward(&self.c_proj.forward(&h)?)
    }
}

/// A pre-LayerNorm transformer block on `[batch, length, E]`:
///
/// ```text
/// x = x + dropout(attn(ln_1(x)))      (causal self-attention, optionally masked)
/// x = x + mlp(ln_2(x))                (c_fc → GELU → c_proj → dropout)
/// ```
///
/// Parameters: `ln_1.*`, `attn.in_proj_weight`, `attn.in_proj_bias`, `attn.out_proj.*`,
/// `ln_2.*`, `mlp.c_fc.*`, `mlp.c_proj.*`.
///
/// A clone shares the parameters (the same `Var`s); its random streams and training mode
/// are copies that continue from the same point.
#[derive(Module, Clone)]
pub struct TransformerBlock<B: Backend> {
    /// The norm before attention.
    pub ln_1: LayerNorm<B>,
    /// Multi-head self-attention.
    pub attn: MultiHeadAttention<B>,
    /// Dropout on the attention branch's output.
    pub attn_dropout: Dropout,
    /// The norm before the MLP.
    pub ln_2: LayerNorm<B>,
    /// The feed-forward branch.
    pub mlp: Mlp<B>,
}

impl<B: Backend> TransformerBlock<B> {
    /// The block on `x: [batch, length, E]` with causal self-attention and an optional extra
    /// mask (see [`MultiHeadAttention::forward_self`]).
    pub fn forward_masked(
        &self,
        x: &Var<B>,
        causal: bool,
        mask: Option<&Tensor<B>>,
    ) -> Result<Var<B>> {
        let a = self
            .attn
            .forward_self(&self.ln_1.forward(x)?, causal, mask)?;
        let x = x.add(&self.attn_dropout.forward(&a)?)?;
        x.add(&self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }

    /// The block on new positions `x: [batch, n, E]` after those in `cache` (inference; see
    /// [`MultiHeadAttention::forward_cached`]).
    pub fn forward_cached(&self, x: &Var<B>, cache: &mut KvCache<B>) -> Result<Var<B>> {
        let a = self.attn.forward_cached(&self.ln_1.forward(x)?, cache)?;
        let x = x.add(&a)?;
        x.add(&self.mlp.forward(&self.ln_2.forward(&x)?)?)
    }
}

impl<B: Backend> Forward<B> for TransformerBlock<B> {
    /// The block with causal self-attention (a decoder block).
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.forward_masked(x, true, None)
    }
}
