//! [`Llama`]: a decoder-only transformer with RMSNorm, rotary positions, grouped-query
//! attention and SwiGLU MLPs (`transformers`' `LlamaForCausalLM`).

use super::{LlamaAttention, LlamaCache, LlamaConfig};
use crate::distributed::{cached_step, install_units, ShardedUnits};
use crate::init;
use crate::layers::{Embedding, Linear, RmsNorm, RotaryEmbedding, SiLU, SwiGlu};
use crate::loss::cross_entropy;
use crate::module::placeholder::check_blocks_runnable;
use crate::module::{child_name, Forward, ModuleVisitor, ToBackend};
use crate::Module;
use std::sync::{Arc, OnceLock};
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};

/// One decoder layer: `x += attn(norm(x)); x += mlp(norm(x))` (names as `transformers`').
///
/// A clone shares the parameters (the same `Var`s).
#[derive(Module, Clone)]
pub struct LlamaDecoderLayer<B: Backend> {
    /// Self-attention.
    pub self_attn: LlamaAttention<B>,
    /// The gated MLP.
    pub mlp: SwiGlu<B>,
    /// The norm before attention.
    pub input_layernorm: RmsNorm<B>,
    /// The norm before the MLP.
    pub post_attention_layernorm: RmsNorm<B>,
}

impl<B: Backend> LlamaDecoderLayer<B> {
    /// The layer on `x: [batch, n, hidden]` at positions `start..`, with or without a cache.
    pub fn forward_at(
        &self,
        x: &Var<B>,
        rope: &RotaryEmbedding,
        start: usize,
        cache: Option<&mut crate::layers::KvCache<B>>,
    ) -> Result<Var<B>> {
        let a = self
            .self_attn
            .forward_at(&self.input_layernorm.forward(x)?, rope, start, cache)?;
        let x = x.add(&a)?;
        x.add(
            &self
                .mlp
                .forward(&self.post_attention_layernorm.forward(&x)?)?,
        )
    }
}

/// The body of a [`Llama`] (`transformers`' `LlamaModel`): embedding, layers, final norm.
#[derive(Module)]
pub struct LlamaModel<B: Backend> {
    /// The token embedding `[vocab_size, hidden_size]`.
    pub embed_tokens: Embedding<B>,
    /// The decoder layers, `layers.0` to `layers.{n - 1}`.
    pub layers: Vec<LlamaDecoderLayer<B>>,
    /// The final norm.
    pub norm: RmsNorm<B>,
}

/// A Llama causal language model: `logits = lm_head(norm(layers(embed_tokens[idx])))` for
/// `idx: [batch, t]`.
///
/// * **Names** are `transformers`' `state_dict` keys: `model.embed_tokens.weight`,
///   `model.layers.{i}.self_attn.q_proj.weight`, ..., `model.layers.{i}.mlp.gate_proj.weight`,
///   `model.layers.{i}.input_layernorm.weight`, `model.norm.weight`, `lm_head.weight`.
/// * **Tied head** (`tie_word_embeddings`): `lm_head.weight` is the embedding's `Var`, listed
///   under both names and updated once, as in [`crate::gpt::Gpt`].
/// * **Precision**: under a 16-bit [`LlamaConfig::precision`] the projections and attention
///   compute in the 16-bit dtype; norms, the residual stream and the logits stay in
///   [`LlamaConfig::dtype`].
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::llama::{LlamaCache, LlamaConfig};
/// use tessera_core::{DType, Tensor};
/// let (dev, mut g) = (tessera_cpu::Cpu::new(), tessera_core::Generator::new(0));
/// let model = LlamaConfig::new(32, 16, 44, 2, 4, 2, 16).init(&dev, &mut g)?;
/// let idx = Tensor::from_vec(vec![1i64, 2, 3], [1, 3], &dev)?;
/// let full = model.forward(&idx)?.value();
/// let mut cache = LlamaCache::new(model.config(), 1, &dev)?;
/// let cached = model.forward_cached(&idx, &mut cache)?;
/// let (a, b) = (full.to_vec_f64()?, cached.to_vec_f64()?);
/// assert!(a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5));
/// # Ok(()) }
/// ```
pub struct Llama<B: Backend> {
    model: LlamaModel<B>,
    lm_head: Linear<B>,
    rope: RotaryEmbedding,
    config: LlamaConfig,
    /// Set by [`Llama::shard_layers`]: the decoder layers run as sharded units.
    units: OnceLock<Arc<ShardedUnits<B>>>,
    /// Built without the layers' values (a deferred load): they hold placeholders until
    /// loaded.
    deferred: bool,
}

/// A decoder layer with the rotary embedding it applies at positions `0..`: what one sharded
/// unit runs (and replays for its gradient), a [`Forward`] module over the layer's parameters.
#[derive(Clone)]
struct LayerFromStart<B: Backend> {
    layer: LlamaDecoderLayer<B>,
    rope: RotaryEmbedding,
}

impl<B: Backend> Module<B> for LayerFromStart<B> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        self.layer.visit(prefix, visitor);
    }

    fn set_training(&self, training: bool) {
        self.layer.set_training(training);
    }

    fn training_mode(&self) -> Option<bool> {
        self.layer.training_mode()
    }
}

impl<B: Backend> Forward<B> for LayerFromStart<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.layer.forward_at(x, &self.rope, 0, None)
    }
}

/// `transformers`' `initializer_range`.
const INIT_STD: f64 = 0.02;

impl<B: Backend> Llama<B> {
    /// A model of `config` on `backend`, initialised from `generator` (`N(0, 0.02²)` weights,
    /// unit norms).
    pub fn new(config: LlamaConfig, backend: &B, generator: &mut Generator) -> Result<Self> {
        config.validate()?;
        let (e, dtype) = (config.hidden_size, config.dtype);
        let (h, kvh, d) = (
            config.num_attention_heads,
            config.num_key_value_heads,
            config.head_dim(),
        );
        let linear = |i: usize, o: usize, bias: bool, g: &mut Generator| -> Result<Linear<B>> {
            let w = init::normal([o, i], 0.0, INIT_STD, dtype, g, backend)?;
            let b = bias
                .then(|| Tensor::zeros([o], dtype, backend))
                .transpose()?;
            Ok(Linear::from_tensors(w, b)?.with_precision(config.precision))
        };
        let norm = || RmsNorm::from_tensor(Tensor::ones([e], dtype, backend)?, config.rms_norm_eps);
        let embed = Embedding::from_tensor(init::normal(
            [config.vocab_size, e],
            0.0,
            INIT_STD,
            dtype,
            generator,
            backend,
        )?)?;
        let mut layers = Vec::new();
        layers
            .try_reserve_exact(config.num_hidden_layers)
            .map_err(|_| Error::OutOfMemory {
                device: "host".into(),
                requested_bytes: config
                    .num_hidden_layers
                    .saturating_mul(std::mem::size_of::<LlamaDecoderLayer<B>>()),
            })?;
        for _ in 0..config.num_hidden_layers {
            let ab = config.attention_bias;
            let self_attn = LlamaAttention::new(
                linear(e, h * d, ab, generator)?,
                linear(e, kvh * d, ab, generator)?,
                linear(e, kvh * d, ab, generator)?,
                linear(h * d, e, ab, generator)?,
                h,
                kvh,
                config.precision,
            )?;
            let (m, mb) = (config.intermediate_size, config.mlp_bias);
            let mlp = SwiGlu {
                gate_proj: linear(e, m, mb, generator)?,
                up_proj: linear(e, m, mb, generator)?,
                down_proj: linear(m, e, mb, generator)?,
                act: SiLU::new(),
            };
            layers.push(LlamaDecoderLayer {
                self_attn,
                mlp,
                input_layernorm: norm()?,
                post_attention_layernorm: norm()?,
            });
        }
        let lm_head = if config.tie_word_embeddings {
            Linear::from_vars(embed.weight().clone(), None)?.with_precision(config.precision)
        } else {
            linear(e, config.vocab_size, false, generator)?
        };
        let model = LlamaModel {
            embed_tokens: embed,
            layers,
            norm: norm()?,
        };
        Self::from_parts(model, lm_head, config)
    }

    /// A model from its parts (a loader's path), checked against `config`.
    pub fn from_parts(
        model: LlamaModel<B>,
        lm_head: Linear<B>,
        config: LlamaConfig,
    ) -> Result<Self> {
        config.validate()?;
        let rope = RotaryEmbedding::new(
            config.head_dim(),
            config.max_position_embeddings,
            config.rope_theta,
            config.rope_scaling,
        )?;
        if model.layers.len() != config.num_hidden_layers
            || model.embed_tokens.weight().dims() != [config.vocab_size, config.hidden_size]
            || lm_head.weight().dims() != [config.vocab_size, config.hidden_size]
        {
            return Err(Error::InvalidArgument {
                op: "Llama",
                msg: format!(
                    "{} layers, embedding {}, head {} do not match {config:?}",
                    model.layers.len(),
                    model.embed_tokens.weight().shape(),
                    lm_head.weight().shape()
                ),
            });
        }
        Ok(Llama {
            model,
            lm_head,
            rope,
            config,
            units: OnceLock::new(),
            deferred: false,
        })
    }

    /// The parameter-name prefix of each decoder layer (`model.layers.{i}`): the units of
    /// [`Llama::shard_layers`].
    pub fn layer_prefixes(&self) -> Vec<String> {
        (0..self.model.layers.len())
            .map(|i| format!("model.layers.{i}"))
            .collect()
    }

    /// Runs every decoder layer through `units` from now on (sharding level 3: each layer's
    /// parameters gathered for its forward and backward passes only; see [`ShardedUnits`]),
    /// whose units must be [`Llama::layer_prefixes`]. Once per model. Cached decoding
    /// ([`Llama::forward_cached`]) needs the layers whole (`ShardedUnits::gather_all`).
    pub fn shard_layers(&self, units: Arc<ShardedUnits<B>>) -> Result<()> {
        let layers = self.model.layers.len();
        install_units(&self.units, units, layers, "Llama::shard_layers", "layers")
    }

    /// Marks the model as built with (`true`) or without placeholders in its layers: a
    /// loader's (see [`crate::pretrained::PretrainedModel::from_pretrained_deferred`]).
    pub(crate) fn set_deferred(&mut self, deferred: bool) {
        self.deferred = deferred;
    }

    /// Whether the layers may hold placeholders (a deferred load's, not all loaded yet).
    pub fn is_deferred(&self) -> bool {
        self.deferred
    }

    /// An error naming a parameter that would run as a placeholder: one of a deferred load's
    /// layers not loaded yet.
    fn check_runnable(&self) -> Result<()> {
        let layers = (self.model.layers.iter().enumerate())
            .map(|(i, layer)| (format!("model.layers.{i}."), layer));
        check_blocks_runnable(
            "Llama",
            self.deferred,
            self.units.get().map(|u| &**u),
            layers,
            "load each layer (PretrainedModel::load_block, or ShardedUnits::initialize)",
        )
    }

    /// The configuration.
    pub fn config(&self) -> &LlamaConfig {
        &self.config
    }

    /// The body (embedding, layers, final norm).
    pub fn model(&self) -> &LlamaModel<B> {
        &self.model
    }

    /// The output head `hidden → vocab_size` (no bias).
    pub fn lm_head(&self) -> &Linear<B> {
        &self.lm_head
    }

    /// Checks `idx` (i64 `[batch, t]`) and that `t` positions fit after `start`.
    fn check_tokens(&self, idx: &Tensor<B>, start: usize) -> Result<()> {
        if idx.dtype() != DType::I64 || idx.rank() != 2 {
            return Err(Error::InvalidArgument {
                op: "Llama",
                msg: format!(
                    "token indices must be i64 [batch, length], got a {} tensor of shape {}",
                    idx.dtype(),
                    idx.shape()
                ),
            });
        }
        let t = idx.dims()[1];
        if start + t > self.config.max_position_embeddings {
            return Err(Error::InvalidArgument {
                op: "Llama",
                msg: format!(
                    "{} positions exceed max_position_embeddings {}",
                    start + t,
                    self.config.max_position_embeddings
                ),
            });
        }
        Ok(())
    }

    /// The logits `[batch, t, vocab_size]` of every position of `idx: [batch, t]`.
    pub fn forward(&self, idx: &Tensor<B>) -> Result<Var<B>> {
        self.check_tokens(idx, 0)?;
        self.check_runnable()?;
        let mut x = self.model.embed_tokens.lookup(idx)?;
        for (i, layer) in self.model.layers.iter().enumerate() {
            x = match self.units.get() {
                Some(units) => {
                    let unit = LayerFromStart {
                        layer: layer.clone(),
                        rope: self.rope.clone(),
                    };
                    units.run(i, &x, &unit)?
                }
                None => layer.forward_at(&x, &self.rope, 0, None)?,
            };
        }
        self.lm_head.forward(&self.model.norm.forward(&x)?)
    }

    /// The mean next-token cross-entropy (nats) of `idx: [batch, t]` against
    /// `targets: [batch, t]`.
    pub fn loss(&self, idx: &Tensor<B>, targets: &Tensor<B>) -> Result<Var<B>> {
        let logits = self.forward(idx)?;
        let (b, t, v) = (logits.dims()[0], logits.dims()[1], logits.dims()[2]);
        cross_entropy(&logits.reshape([b * t, v])?, &targets.reshape([b * t])?)
    }

    /// The logits `[batch, n, vocab_size]` of the new tokens `idx: [batch, n]` after the
    /// positions in `cache`, whose keys and values it appends (inference: no gradient). Equal
    /// to the last `n` rows of [`Llama::forward`] over the whole sequence.
    pub fn forward_cached(&self, idx: &Tensor<B>, cache: &mut LlamaCache<B>) -> Result<Tensor<B>> {
        if cache.layers().len() != self.model.layers.len() {
            return Err(Error::InvalidArgument {
                op: "Llama::forward_cached",
                msg: format!(
                    "a cache of {} layers for a model of {}",
                    cache.layers().len(),
                    self.model.layers.len()
                ),
            });
        }
        let start = cache.len();
        self.check_tokens(idx, start)?;
        self.check_runnable()?;
        no_grad(|| {
            let mut x = self.model.embed_tokens.lookup(idx)?;
            let caches = cache.layers_mut().iter_mut();
            for (i, (layer, kv)) in self.model.layers.iter().zip(caches).enumerate() {
                let units = self.units.get().map(|u| &**u);
                let step = |x: &Var<B>, c: &mut _| layer.forward_at(x, &self.rope, start, Some(c));
                x = cached_step(units, i, &x, kv, step)?;
            }
            Ok(self.lm_head.forward(&self.model.norm.forward(&x)?)?.value())
        })
    }
}

impl<B: Backend> Module<B> for Llama<B> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        self.model.visit(&child_name(prefix, "model"), visitor);
        self.lm_head.visit(&child_name(prefix, "lm_head"), visitor);
    }

    fn set_training(&self, training: bool) {
        self.model.set_training(training);
        self.lm_head.set_training(training);
    }

    fn training_mode(&self) -> Option<bool> {
        self.model.training_mode()
    }
}

/// Written by hand: a tied head must be rebuilt over the moved embedding (see
/// [`crate::gpt::Gpt`]'s).
impl<B: Backend> ToBackend<B> for Llama<B> {
    type On<B2: Backend> = Llama<B2>;

    fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Llama<B2>> {
        let model = self.model.to_backend(backend)?;
        let lm_head = if self.config.tie_word_embeddings {
            Linear::from_vars(model.embed_tokens.weight().clone(), None)?
                .with_precision(self.lm_head.precision())
        } else {
            self.lm_head.to_backend(backend)?
        };
        lm_head.set_training(self.lm_head.is_training());
        Ok(Llama {
            model,
            lm_head,
            rope: self.rope.clone(),
            config: self.config,
            units: OnceLock::new(),
            deferred: self.deferred,
        })
    }
}
