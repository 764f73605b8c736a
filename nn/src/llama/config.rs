//! [`LlamaConfig`]: the shape of a Llama model.

use super::Llama;
use crate::layers::RopeScaling;
use crate::precision::Precision;
use crate::Config;
use tessera_core::{Backend, DType, Error, Generator, Result};

/// The hyper-parameters of a [`Llama`] (`transformers`' `LlamaConfig`, same field names).
///
/// ```
/// use tessera_nn::llama::LlamaConfig;
/// let config = LlamaConfig::new(512, 64, 176, 2, 4, 2, 128);
/// assert_eq!(config.head_dim(), 16);
/// config.validate().unwrap();
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct LlamaConfig {
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// The model width.
    pub hidden_size: usize,
    /// The MLP's hidden width.
    pub intermediate_size: usize,
    /// Decoder layers.
    pub num_hidden_layers: usize,
    /// Query heads.
    pub num_attention_heads: usize,
    /// Key/value heads (grouped-query attention when fewer than the query heads; must divide
    /// them).
    pub num_key_value_heads: usize,
    /// The longest context (the rotary tables' length).
    pub max_position_embeddings: usize,
    /// The rotary base `θ`.
    #[config(default = 10_000.0)]
    pub rope_theta: f64,
    /// The rotary frequency scaling.
    #[config(default = RopeScaling::None)]
    pub rope_scaling: RopeScaling,
    /// The RMSNorms' `eps`.
    #[config(default = 1e-6)]
    pub rms_norm_eps: f64,
    /// Whether the output head is the token embedding.
    #[config(default = false)]
    pub tie_word_embeddings: bool,
    /// The width of one head; `hidden_size / num_attention_heads` when `None`.
    #[config(default = None)]
    pub head_dim_override: Option<usize>,
    /// Whether the attention projections learn biases (`attention_bias`).
    #[config(default = false)]
    pub attention_bias: bool,
    /// Whether the MLP's projections learn biases (`mlp_bias`).
    #[config(default = false)]
    pub mlp_bias: bool,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
    /// The dtype the projections and attention compute in.
    #[config(default = Precision::F32)]
    pub precision: Precision,
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument {
        op: "LlamaConfig",
        msg,
    }
}

impl LlamaConfig {
    /// The width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.head_dim_override
            .unwrap_or(self.hidden_size / self.num_attention_heads.max(1))
    }

    /// Errors unless every size is positive, the key/value heads divide the query heads, the
    /// head width is even and the norms' `eps` and the rotary base are valid.
    pub fn validate(&self) -> Result<()> {
        let sizes = [
            ("vocab_size", self.vocab_size),
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_hidden_layers", self.num_hidden_layers),
            ("num_attention_heads", self.num_attention_heads),
            ("num_key_value_heads", self.num_key_value_heads),
            ("max_position_embeddings", self.max_position_embeddings),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(invalid(format!("{name} must be positive")));
        }
        if self.num_attention_heads % self.num_key_value_heads != 0 {
            return Err(invalid(format!(
                "num_key_value_heads {} must divide num_attention_heads {}",
                self.num_key_value_heads, self.num_attention_heads
            )));
        }
        if self.head_dim_override.is_none() && self.hidden_size % self.num_attention_heads != 0 {
            return Err(invalid(format!(
                "num_attention_heads {} must divide hidden_size {}",
                self.num_attention_heads, self.hidden_size
            )));
        }
        let d = self.head_dim();
        if d == 0 || d % 2 != 0 {
            return Err(invalid(format!("the head width must be even, got {d}")));
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return Err(invalid(format!(
                "rms_norm_eps must be positive, got {}",
                self.rms_norm_eps
            )));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 1.0) {
            return Err(invalid(format!(
                "rope_theta must be above 1, got {}",
                self.rope_theta
            )));
        }
        if !self.dtype.is_float() {
            return Err(invalid(format!(
                "dtype must be a float, got {}",
                self.dtype
            )));
        }
        if self.checked_num_parameters().is_none() {
            return Err(Error::SizeOverflow {
                op: "LlamaConfig",
                msg: format!("the parameter count of {self:?} overflows"),
            });
        }
        Ok(())
    }

    /// Trainable scalars (a tied head counted once); `None` when the count overflows.
    pub fn checked_num_parameters(&self) -> Option<usize> {
        let (e, d) = (self.hidden_size, self.head_dim());
        let q = self.num_attention_heads.checked_mul(d)?;
        let kv = self.num_key_value_heads.checked_mul(d)?;
        let bias = |n: usize| if self.attention_bias { n } else { 0 };
        let mlp_bias = |n: usize| if self.mlp_bias { n } else { 0 };
        let attention = [
            e.checked_mul(q)?.checked_add(bias(q))?,
            e.checked_mul(kv)?
                .checked_mul(2)?
                .checked_add(bias(2 * kv))?,
            q.checked_mul(e)?.checked_add(bias(e))?,
        ];
        let i = self.intermediate_size;
        let mlp = e
            .checked_mul(i)?
            .checked_mul(3)?
            .checked_add(mlp_bias(2 * i + e))?;
        let layer = attention
            .into_iter()
            .chain([mlp, 2 * e])
            .try_fold(0usize, |a, x| a.checked_add(x))?;
        let embed = self.vocab_size.checked_mul(e)?;
        let head = if self.tie_word_embeddings { 0 } else { embed };
        self.num_hidden_layers
            .checked_mul(layer)?
            .checked_add(embed)?
            .checked_add(head)?
            .checked_add(e)
    }

    /// A model initialised like `transformers` does (`N(0, 0.02²)` weights, unit norms), drawn
    /// from `generator`.
    pub fn init<B: Backend>(&self, backend: &B, generator: &mut Generator) -> Result<Llama<B>> {
        Llama::new(*self, backend, generator)
    }
}
