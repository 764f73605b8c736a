//! [`GptConfig`]: the shape of a GPT, and its JSON form saved beside checkpoints.

use super::Gpt;
use crate::layers::GeluApproximation;
use crate::precision::Precision;
use crate::Config;
use serde_json::{json, Value};
use tessera_core::{Backend, DType, Error, Generator, Result};

/// The hyper-parameters of a [`Gpt`] (nanoGPT's `GPTConfig`).
///
/// ```
/// use tessera_nn::gpt::GptConfig;
/// use tessera_nn::precision::Precision;
/// let config = GptConfig::new(4, 4, 128, 64, 96)
///     .dropout(0.1)
///     .precision(Precision::BF16);
/// assert_eq!(GptConfig::from_json(&config.to_json()).unwrap(), config);
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct GptConfig {
    /// Transformer blocks.
    pub n_layer: usize,
    /// Attention heads per block (dividing `n_embd`).
    pub n_head: usize,
    /// The model width.
    pub n_embd: usize,
    /// The longest context (the number of learned positions).
    pub block_size: usize,
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Dropout (embeddings, attention weights, residual branches) during training.
    #[config(default = 0.0)]
    pub dropout: f64,
    /// Whether linear layers and LayerNorms learn biases (the output head never does).
    #[config(default = true)]
    pub bias: bool,
    /// How the MLPs' GELU is computed: exact (nanoGPT) or the tanh approximation (GPT-2's
    /// `gelu_new`, what a Hugging Face GPT-2 checkpoint was trained with).
    #[config(default = GeluApproximation::None)]
    pub gelu: GeluApproximation,
    /// The LayerNorms' `eps` (GPT-2's `layer_norm_epsilon`).
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
    /// The dtype the attention and linear layers (the output head too) compute in
    /// ([`Precision`]); embeddings, LayerNorms and the logits stay in `dtype`.
    #[config(default = Precision::F32)]
    pub precision: Precision,
}

fn invalid(msg: String) -> Error {
    Error::InvalidArgument {
        op: "GptConfig",
        msg,
    }
}

impl GptConfig {
    /// Errors unless every size is positive, `n_head` divides `n_embd` and dropout is in
    /// `[0, 1)`.
    pub fn validate(&self) -> Result<()> {
        let sizes = [
            ("n_layer", self.n_layer),
            ("n_head", self.n_head),
            ("n_embd", self.n_embd),
            ("block_size", self.block_size),
            ("vocab_size", self.vocab_size),
        ];
        if let Some((name, _)) = sizes.iter().find(|(_, v)| *v == 0) {
            return Err(invalid(format!("{name} must be positive")));
        }
        if self.n_embd % self.n_head != 0 {
            return Err(invalid(format!(
                "n_head {} must divide n_embd {}",
                self.n_head, self.n_embd
            )));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(invalid(format!(
                "dropout must be in [0, 1), got {}",
                self.dropout
            )));
        }
        if !(self.layer_norm_eps.is_finite() && self.layer_norm_eps > 0.0) {
            return Err(invalid(format!(
                "layer_norm_eps must be positive, got {}",
                self.layer_norm_eps
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
                op: "GptConfig",
                msg: format!("the parameter count of {self:?} overflows"),
            });
        }
        Ok(())
    }

    /// A model with nanoGPT's initialisation drawn from `generator` (see [`Gpt`]).
    pub fn init<B: Backend>(&self, backend: &B, generator: &mut Generator) -> Result<Gpt<B>> {
        Gpt::new(*self, backend, generator)
    }

    /// [`GptConfig::init`] without the blocks' values (deferred initialisation, FSDP's
    /// `param_init_fn`): the embeddings and the final LayerNorm are drawn as `init` draws them,
    /// while each block's matrices are placeholders of one element, and [`Gpt::init_block`]
    /// later draws the values `init` would have, block by block. For sharding level 3, where
    /// [`crate::distributed::ShardedUnits::initialize`] gives each block its values and keeps
    /// only this rank's share before the next, so that no rank holds the whole model. Until
    /// then, running a block that holds placeholders is an error.
    pub fn init_deferred<B: Backend>(
        &self,
        backend: &B,
        generator: &mut Generator,
    ) -> Result<Gpt<B>> {
        Gpt::build(*self, backend, generator, true)
    }

    /// Trainable scalars of the model (the tied output head counted once); `usize::MAX` for a
    /// configuration so large that the count overflows (which [`GptConfig::validate`] rejects).
    pub fn num_parameters(&self) -> usize {
        self.checked_num_parameters().unwrap_or(usize::MAX)
    }

    /// [`GptConfig::num_parameters`], `None` on overflow.
    fn checked_num_parameters(&self) -> Option<usize> {
        let (e, v, t, l) = (self.n_embd, self.vocab_size, self.block_size, self.n_layer);
        let b = usize::from(self.bias);
        let ee = e.checked_mul(e)?;
        let be = b * e;
        // ln_1, ln_2; in_proj; out_proj; c_fc; c_proj.
        let block = [
            2 * (e.checked_add(be)?),
            ee.checked_mul(3)?.checked_add(3 * be)?,
            ee.checked_add(be)?,
            ee.checked_mul(4)?.checked_add(4 * be)?,
            ee.checked_mul(4)?.checked_add(be)?,
        ]
        .into_iter()
        .try_fold(0usize, |a, x| a.checked_add(x))?;
        [
            v.checked_mul(e)?,
            t.checked_mul(e)?,
            l.checked_mul(block)?,
            e,
            be,
        ]
        .into_iter()
        .try_fold(0usize, |a, x| a.checked_add(x))
    }

    /// The configuration as JSON (the `config.json` of a checkpoint folder).
    pub fn to_json(&self) -> Value {
        json!({
            "n_layer": self.n_layer,
            "n_head": self.n_head,
            "n_embd": self.n_embd,
            "block_size": self.block_size,
            "vocab_size": self.vocab_size,
            "dropout": self.dropout,
            "bias": self.bias,
            "gelu": match self.gelu {
                GeluApproximation::None => "exact",
                GeluApproximation::Tanh => "tanh",
            },
            "layer_norm_eps": self.layer_norm_eps,
            "dtype": self.dtype.to_string(),
            "precision": self.precision.name(),
        })
    }

    /// Reads [`GptConfig::to_json`]'s form (extra keys are ignored; a missing `precision` is
    /// f32, a missing `gelu` exact, a missing `layer_norm_eps` 1e-5), validated.
    pub fn from_json(value: &Value) -> Result<Self> {
        let size = |key: &str| -> Result<usize> {
            value
                .get(key)
                .and_then(Value::as_u64)
                .map(|v| v as usize)
                .ok_or_else(|| invalid(format!("`{key}` must be a non-negative integer")))
        };
        let dtype = match value.get("dtype").and_then(Value::as_str) {
            None | Some("f32") => DType::F32,
            Some("f64") => DType::F64,
            Some(other) => return Err(invalid(format!("unknown dtype `{other}`"))),
        };
        let precision = match value.get("precision") {
            None => Precision::F32,
            Some(p) => p
                .as_str()
                .ok_or_else(|| invalid("`precision` must be a string".into()))?
                .parse::<Precision>()
                .map_err(invalid)?,
        };
        let gelu = match value.get("gelu").map(|g| g.as_str()) {
            None | Some(Some("exact")) => GeluApproximation::None,
            Some(Some("tanh")) => GeluApproximation::Tanh,
            Some(other) => {
                return Err(invalid(format!(
                    "`gelu` must be \"exact\" or \"tanh\", got {other:?}"
                )))
            }
        };
        let layer_norm_eps = match value.get("layer_norm_eps") {
            None => 1e-5,
            Some(v) => v
                .as_f64()
                .ok_or_else(|| invalid("`layer_norm_eps` must be a number".into()))?,
        };
        let config = GptConfig {
            n_layer: size("n_layer")?,
            n_head: size("n_head")?,
            n_embd: size("n_embd")?,
            block_size: size("block_size")?,
            vocab_size: size("vocab_size")?,
            dropout: value.get("dropout").and_then(Value::as_f64).unwrap_or(0.0),
            bias: value.get("bias").and_then(Value::as_bool).unwrap_or(true),
            gelu,
            layer_norm_eps,
            dtype,
            precision,
        };
        config.validate()?;
        Ok(config)
    }
}
