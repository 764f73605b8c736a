//! Llama (`LlamaForCausalLM`) checkpoints in the Hugging Face layout, to and from [`Llama`].
//! The tensor names are the same on both sides; the work is in the configuration.

use super::folder_source::{tensors_under, FolderSource, Stored};
use super::hf_files::{self, ConfigReader, WeightsFolder};
use super::PretrainedOptions;
use crate::layers::RopeScaling;
use crate::llama::{Llama, LlamaConfig};
use crate::module::model_vars;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{Backend, Generator, Result};

/// The Hugging Face `model_type` of Llama.
pub const MODEL_TYPE: &str = "llama";

/// The head's and the token embedding's names (one weight when tied).
const HEAD: &str = "lm_head.weight";
const EMBED: &str = "model.embed_tokens.weight";
/// The name prefix of the decoder layers' tensors.
const LAYERS: &str = "model.layers";

/// The rotary base and scaling: `rope_parameters` (newer `transformers`) or `rope_theta` and
/// `rope_scaling` (older), a typed error naming any scaling kind other than `default`,
/// `llama3`, `linear` and `dynamic`. `max_positions` is the configuration's
/// `max_position_embeddings`: the original context of a `dynamic` scaling.
fn rope_from_hf(reader: &ConfigReader<'_>, max_positions: usize) -> Result<(f64, RopeScaling)> {
    let (theta, scaling) = match reader.get("rope_parameters") {
        Some(Value::Object(p)) => (p.get("rope_theta").and_then(Value::as_f64), Some(p.clone())),
        Some(other) => {
            return Err(reader.error(format!("`rope_parameters` is not an object: {other}")))
        }
        None => (
            None,
            match reader.get("rope_scaling") {
                Some(Value::Object(s)) => Some(s.clone()),
                Some(other) => {
                    return Err(reader.error(format!("`rope_scaling` is not an object: {other}")))
                }
                None => None,
            },
        ),
    };
    let theta = match theta {
        Some(t) => t,
        None => reader.number_or("rope_theta", 10_000.0)?,
    };
    let Some(s) = scaling else {
        return Ok((theta, RopeScaling::None));
    };
    let kind = s
        .get("rope_type")
        .or_else(|| s.get("type"))
        .and_then(Value::as_str)
        .unwrap_or("default");
    let number = |key: &str| -> Result<f64> {
        s.get(key)
            .and_then(Value::as_f64)
            .ok_or_else(|| reader.error(format!("{kind} rope scaling needs a number `{key}`")))
    };
    match kind {
        "default" => Ok((theta, RopeScaling::None)),
        "llama3" => Ok((
            theta,
            RopeScaling::Llama3 {
                factor: number("factor")?,
                low_freq_factor: number("low_freq_factor")?,
                high_freq_factor: number("high_freq_factor")?,
                original_max_position_embeddings: number("original_max_position_embeddings")?
                    as usize,
            },
        )),
        "linear" => Ok((
            theta,
            RopeScaling::Linear {
                factor: number("factor")?,
            },
        )),
        "dynamic" => Ok((
            theta,
            RopeScaling::Dynamic {
                factor: number("factor")?,
                original_max_position_embeddings: max_positions,
            },
        )),
        other => Err(reader.error(format!(
            "rope scaling \"{other}\" is not supported (only \"default\", \"llama3\", \
             \"linear\" and \"dynamic\")"
        ))),
    }
}

/// The [`LlamaConfig`] of a Llama `config.json`, with the dtypes of `options`.
pub fn config_from_hf(
    reader: &ConfigReader<'_>,
    options: &PretrainedOptions,
) -> Result<LlamaConfig> {
    let heads = reader.size("num_attention_heads")?;
    let hidden = reader.size("hidden_size")?;
    match reader.string("hidden_act")?.unwrap_or("silu") {
        "silu" | "swish" => {}
        other => {
            return Err(reader.error(format!(
                "`hidden_act` = \"{other}\" is not supported (only silu)"
            )))
        }
    }
    let dropout = reader.number_or("attention_dropout", 0.0)?;
    if dropout != 0.0 {
        return Err(reader.error(format!(
            "`attention_dropout` = {dropout} is not supported (only 0)"
        )));
    }
    let max_positions = reader.size("max_position_embeddings")?;
    let (theta, scaling) = rope_from_hf(reader, max_positions)?;
    // Dynamic NTK scaling exists to run past the original context: the model takes
    // `factor` times as many positions (its tables and KV cache sized for them).
    let max_positions = match scaling {
        RopeScaling::Dynamic { factor, .. } if factor.is_finite() && factor >= 1.0 => {
            let stretched = (max_positions as f64 * factor).floor();
            if stretched > (1u64 << 40) as f64 {
                return Err(reader.error(format!(
                    "dynamic rope scaling by {factor} of {max_positions} positions is too long"
                )));
            }
            stretched as usize
        }
        _ => max_positions,
    };
    let head_dim = reader.optional_size("head_dim")?;
    let config = LlamaConfig::new(
        reader.size("vocab_size")?,
        hidden,
        reader.size("intermediate_size")?,
        reader.size("num_hidden_layers")?,
        heads,
        reader
            .optional_size("num_key_value_heads")?
            .unwrap_or(heads),
        max_positions,
    )
    .rope_theta(theta)
    .rope_scaling(scaling)
    .rms_norm_eps(reader.number_or("rms_norm_eps", 1e-6)?)
    .tie_word_embeddings(reader.bool_or("tie_word_embeddings", false)?)
    // A head width the heads imply is no override; any other (or one where the heads do not
    // divide the width) is kept.
    .head_dim_override(
        head_dim.filter(|&d| heads == 0 || hidden % heads != 0 || d != hidden / heads),
    )
    .attention_bias(reader.bool_or("attention_bias", false)?)
    .mlp_bias(reader.bool_or("mlp_bias", false)?)
    .dtype(options.dtype)
    .precision(options.precision);
    config
        .validate()
        .map_err(|e| reader.error(format!("not a valid Llama configuration: {e}")))?;
    Ok(config)
}

impl<B: Backend> Llama<B> {
    /// Loads a Hugging Face Llama folder (`config.json` and `model.safetensors`, or sharded
    /// weights with their index) onto `backend`, in the dtypes of `options`.
    ///
    /// Strict: an unknown `model_type`, a configuration this model cannot compute (an
    /// unsupported `rope_scaling` kind, activation, attention dropout), and a missing, extra or
    /// mis-shaped tensor are errors naming the field or tensor.
    pub fn from_pretrained(
        dir: impl AsRef<Path>,
        backend: &B,
        options: &PretrainedOptions,
    ) -> Result<Self> {
        let (mut model, source) = Self::from_pretrained_deferred(dir.as_ref(), backend, options)?;
        source.load(&tensors_under(&model, LAYERS))?;
        model.set_deferred(false);
        Ok(model)
    }

    /// [`Llama::from_pretrained`] without the decoder layers' values: the folder is checked as
    /// a whole (configuration, every tensor's name and shape) and everything outside the
    /// layers is loaded, while the layers hold placeholders until the returned source loads
    /// them ([`FolderSource::load`]).
    pub(crate) fn from_pretrained_deferred(
        dir: &Path,
        backend: &B,
        options: &PretrainedOptions,
    ) -> Result<(Self, FolderSource)> {
        let map = hf_files::read_config_of(dir, MODEL_TYPE)?;
        let reader = ConfigReader::new(&map, dir);
        let config = config_from_hf(&reader, options)?;
        let folder = WeightsFolder::open(dir)?;
        let mut sources = BTreeMap::new();
        for spec in folder.specs() {
            // Rotary tables some exports keep as buffers are recomputed here.
            if !spec.name.ends_with("rotary_emb.inv_freq") {
                sources.insert(spec.name.clone(), Stored::plain(&spec.name));
            }
        }
        if config.tie_word_embeddings {
            if let (None, Some(embed)) = (sources.get(HEAD), sources.get(EMBED).cloned()) {
                sources.insert(HEAD.to_string(), embed);
            }
        }
        let source = FolderSource::new(dir, folder, sources, config.dtype);
        source.check_blocks(LAYERS, config.num_hidden_layers)?;
        // Nothing is drawn: every parameter is a placeholder until read.
        let mut model = config.init(backend, &mut Generator::deferred(0))?;
        model.set_deferred(true);
        let all = model_vars(&model);
        source.check(&all)?;
        if config.tie_word_embeddings {
            source.check_same(
                HEAD,
                EMBED,
                backend,
                "`lm_head.weight` differs from `model.embed_tokens.weight` although \
                 `tie_word_embeddings` is true",
            )?;
        }
        source.load_outside(all, LAYERS)?;
        Ok((model, source))
    }

    /// Writes the model as a Hugging Face Llama folder that `transformers` loads:
    /// `config.json` (`base`'s fields with the model's shape written over them) and
    /// `model.safetensors` (a tied head stored once).
    pub fn save_pretrained(
        &self,
        dir: impl AsRef<Path>,
        base: Option<&Map<String, Value>>,
    ) -> Result<()> {
        self.save_pretrained_sharded(dir, base, hf_files::DEFAULT_MAX_SHARD_BYTES)
    }

    /// [`save_pretrained`](Self::save_pretrained) with weights files of at most
    /// `max_shard_bytes` each: above it, shards and their index (see
    /// [`hf_files::write_folder`]).
    pub fn save_pretrained_sharded(
        &self,
        dir: impl AsRef<Path>,
        base: Option<&Map<String, Value>>,
        max_shard_bytes: u64,
    ) -> Result<()> {
        let config = self.hf_config(base);
        let tensors = hf_files::stored_tensors(self, |name| self.stored_as(name))?;
        hf_files::write_folder(dir.as_ref(), &config, &tensors, max_shard_bytes)
    }

    /// The `config.json` of [`Llama::save_pretrained`]: `base`'s fields with the model's shape
    /// written over them.
    pub(crate) fn hf_config(&self, base: Option<&Map<String, Value>>) -> Map<String, Value> {
        let c = self.config();
        let mut config = base.cloned().unwrap_or_default();
        // A base written by newer `transformers` carries the rotary settings here too.
        config.remove("rope_parameters");
        // A dynamic scaling's model covers `factor` times the original context; the file
        // keeps the original, as `transformers` reads it.
        let mut max_position_embeddings = c.max_position_embeddings;
        let rope_scaling = match c.rope_scaling {
            RopeScaling::None => Value::Null,
            RopeScaling::Linear { factor } => json!({ "rope_type": "linear", "factor": factor }),
            RopeScaling::Dynamic {
                factor,
                original_max_position_embeddings,
            } => {
                max_position_embeddings = original_max_position_embeddings;
                json!({ "rope_type": "dynamic", "factor": factor })
            }
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_position_embeddings,
            } => json!({
                "rope_type": "llama3",
                "factor": factor,
                "low_freq_factor": low_freq_factor,
                "high_freq_factor": high_freq_factor,
                "original_max_position_embeddings": original_max_position_embeddings,
            }),
        };
        let fields = json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": MODEL_TYPE,
            "vocab_size": c.vocab_size,
            "hidden_size": c.hidden_size,
            "intermediate_size": c.intermediate_size,
            "num_hidden_layers": c.num_hidden_layers,
            "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads,
            "head_dim": c.head_dim(),
            "max_position_embeddings": max_position_embeddings,
            "rope_theta": c.rope_theta,
            "rope_scaling": rope_scaling,
            "rms_norm_eps": c.rms_norm_eps,
            "tie_word_embeddings": c.tie_word_embeddings,
            "attention_bias": c.attention_bias,
            "mlp_bias": c.mlp_bias,
            "attention_dropout": 0.0,
            "hidden_act": "silu",
            "torch_dtype": super::torch_dtype_name(c.dtype),
        });
        if let Value::Object(f) = fields {
            config.extend(f);
        }
        config
    }

    /// Where the state-dict tensor `ours` is stored in a Llama folder: under its own name;
    /// `None` for a tied head, stored once as the token embedding.
    pub(crate) fn stored_as(&self, ours: &str) -> Option<Stored> {
        let tied_head = self.config().tie_word_embeddings && ours == HEAD;
        (!tied_head).then(|| Stored::plain(ours))
    }
}
