//! GPT-2 (`GPT2LMHeadModel`) checkpoints in the Hugging Face layout, to and from [`Gpt`].
//!
//! GPT-2 is nanoGPT's architecture with the tanh GELU: a [`Gpt`] with
//! [`GeluApproximation::Tanh`]. The checkpoint's `Conv1D` layers store their weights
//! `[in, out]`; [`Gpt`]'s projections are `nn.Linear`/`nn.MultiheadAttention` `[out, in]`, so
//! they are transposed on the way in and out.

use super::folder_source::{tensors_under, FolderSource, Stored};
use super::hf_files::{self, ConfigReader, WeightsFolder};
use super::PretrainedOptions;
use crate::gpt::{Gpt, GptConfig};
use crate::layers::GeluApproximation;
use crate::module::model_vars;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{Backend, Error, Generator, Result};

/// The Hugging Face `model_type` of GPT-2.
pub const MODEL_TYPE: &str = "gpt2";

/// The per-block projections stored as `Conv1D` (`[in, out]`), by their name inside a block.
const CONV1D: [&str; 4] = ["attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"];

/// Buffers older `transformers` versions saved beside the parameters (the causal mask and its
/// fill value); they are not weights and are skipped.
fn is_known_buffer(name: &str) -> bool {
    name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias")
}

/// The [`GptConfig`] of a GPT-2 `config.json`, with the dtypes of `options`.
pub fn config_from_hf(reader: &ConfigReader<'_>, options: &PretrainedOptions) -> Result<GptConfig> {
    let n_embd = reader.size("n_embd")?;
    if let Some(inner) = reader.optional_size("n_inner")? {
        if n_embd.checked_mul(4) != Some(inner) {
            return Err(reader.error(format!(
                "`n_inner` = {inner} is not supported (only 4 * n_embd, n_embd = {n_embd})"
            )));
        }
    }
    let gelu = match reader.string("activation_function")?.unwrap_or("gelu_new") {
        "gelu_new" | "gelu_pytorch_tanh" | "gelu_fast" => GeluApproximation::Tanh,
        "gelu" => GeluApproximation::None,
        other => {
            return Err(reader.error(format!(
                "`activation_function` = \"{other}\" is not supported (gelu_new, \
                 gelu_pytorch_tanh, gelu_fast or gelu)"
            )))
        }
    };
    let resid = reader.number_or("resid_pdrop", 0.1)?;
    let embd = reader.number_or("embd_pdrop", 0.1)?;
    let attn = reader.number_or("attn_pdrop", 0.1)?;
    if resid != embd || resid != attn {
        return Err(reader.error(format!(
            "resid_pdrop {resid}, embd_pdrop {embd} and attn_pdrop {attn} differ (Tessera's \
             GPT has one dropout probability)"
        )));
    }
    reader.require("scale_attn_weights", &json!(true))?;
    reader.require("scale_attn_by_inverse_layer_idx", &json!(false))?;
    reader.require("add_cross_attention", &json!(false))?;
    reader.require("tie_word_embeddings", &json!(true))?;
    let config = GptConfig::new(
        reader.size("n_layer")?,
        reader.size("n_head")?,
        n_embd,
        reader.size("n_positions")?,
        reader.size("vocab_size")?,
    )
    .dropout(resid)
    .gelu(gelu)
    .layer_norm_eps(reader.number_or("layer_norm_epsilon", 1e-5)?)
    .dtype(options.dtype)
    .precision(options.precision);
    config
        .validate()
        .map_err(|e| reader.error(format!("not a valid GPT-2 configuration: {e}")))?;
    Ok(config)
}

/// Where each of [`Gpt`]'s state-dict tensors is among the stored tensors `stored` (the
/// Hugging Face names): renamed, `Conv1D` weights transposed, the tied head the token
/// embedding unless a copy of it is stored.
fn hf_sources<'a>(stored: impl Iterator<Item = &'a str>) -> Result<BTreeMap<String, Stored>> {
    let stored: Vec<&str> = stored.collect();
    // The hub's original checkpoints name the body's tensors without `transformer.`.
    let prefixed = stored.iter().any(|k| k.starts_with("transformer."));
    let mut out = BTreeMap::new();
    let mut extra = Vec::new();
    for &hf in &stored {
        if is_known_buffer(hf) {
            continue;
        }
        let name = if prefixed || hf == "lm_head.weight" {
            hf.to_string()
        } else {
            format!("transformer.{hf}")
        };
        let (ours, transposed) = match name.strip_prefix("transformer.h.") {
            Some(rest) => {
                let (block, inner) = rest.split_once('.').unwrap_or((rest, ""));
                let (layer, param) = inner.rsplit_once('.').unwrap_or((inner, ""));
                let renamed = match layer {
                    "attn.c_attn" => Some(if param == "weight" {
                        "attn.in_proj_weight"
                    } else {
                        "attn.in_proj_bias"
                    }),
                    "attn.c_proj" => Some(if param == "weight" {
                        "attn.out_proj.weight"
                    } else {
                        "attn.out_proj.bias"
                    }),
                    _ => None,
                };
                let transposed = CONV1D.contains(&layer) && param == "weight";
                match renamed {
                    Some(r) => (format!("transformer.h.{block}.{r}"), transposed),
                    None => (name.clone(), transposed),
                }
            }
            None => (name, false),
        };
        let source = Stored {
            name: hf.to_string(),
            transposed,
        };
        if out.insert(ours.clone(), source).is_some() {
            extra.push(ours);
        }
    }
    if !extra.is_empty() {
        return Err(Error::checkpoint(format!(
            "tensors given twice: {}",
            extra.join(", ")
        )));
    }
    // The head is the token embedding (a stored copy is checked to be that).
    if let (None, Some(wte)) = (out.get(HEAD), out.get(WTE).cloned()) {
        out.insert(HEAD.to_string(), wte);
    }
    Ok(out)
}

/// The head's and the token embedding's state-dict names (one tied weight).
const HEAD: &str = "lm_head.weight";
const WTE: &str = "transformer.wte.weight";
/// The name prefix of the blocks' tensors.
const BLOCKS: &str = "transformer.h";

impl<B: Backend> Gpt<B> {
    /// Loads a Hugging Face GPT-2 folder (`config.json` and `model.safetensors`, or sharded
    /// weights with their index) onto `backend`, in the dtypes of `options`.
    ///
    /// Strict: an unknown `model_type`, a configuration Tessera's GPT cannot compute, and a
    /// missing, extra or mis-shaped tensor are errors naming the field or tensor.
    pub fn from_pretrained(
        dir: impl AsRef<Path>,
        backend: &B,
        options: &PretrainedOptions,
    ) -> Result<Self> {
        let (mut model, source) = Self::from_pretrained_deferred(dir.as_ref(), backend, options)?;
        source.load(&tensors_under(&model, BLOCKS))?;
        model.set_deferred(false);
        Ok(model)
    }

    /// [`Gpt::from_pretrained`] without the blocks' values: the folder is checked as a whole
    /// (configuration, every tensor's name and shape) and everything outside the blocks is
    /// loaded, while the blocks hold placeholders ([`Gpt::is_deferred`]) until the returned
    /// source loads them ([`FolderSource::load`]).
    pub(crate) fn from_pretrained_deferred(
        dir: &Path,
        backend: &B,
        options: &PretrainedOptions,
    ) -> Result<(Self, FolderSource)> {
        let map = hf_files::read_config_of(dir, MODEL_TYPE)?;
        let reader = ConfigReader::new(&map, dir);
        let config = config_from_hf(&reader, options)?;
        let folder = WeightsFolder::open(dir)?;
        let sources = hf_sources(folder.specs().map(|s| s.name.as_str()))?;
        let source = FolderSource::new(dir, folder, sources, config.dtype);
        source.check_blocks(BLOCKS, config.n_layer)?;
        // Nothing is drawn: every parameter is a placeholder until read.
        let model = config.init_deferred(backend, &mut Generator::deferred(0))?;
        let all = model_vars(&model);
        source.check(&all)?;
        source.check_same(
            HEAD,
            WTE,
            backend,
            "`lm_head.weight` differs from `transformer.wte.weight`; GPT-2's head is tied \
             (an untied head is not supported)",
        )?;
        source.load_outside(all, BLOCKS)?;
        Ok((model, source))
    }

    /// Writes the model as a Hugging Face GPT-2 folder that
    /// `transformers.AutoModelForCausalLM.from_pretrained` loads: `config.json` (`base`'s
    /// fields, e.g. the token ids of the checkpoint it was loaded from, with the model's own
    /// shape written over them) and `model.safetensors` (`Conv1D` layout, the tied head stored
    /// once, in the parameters' dtype).
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
        let config = self.hf_config(base)?;
        let tensors = hf_files::stored_tensors(self, |name| self.stored_as(name))?;
        hf_files::write_folder(dir.as_ref(), &config, &tensors, max_shard_bytes)
    }

    /// The `config.json` of [`Gpt::save_pretrained`]: `base`'s fields with the model's own
    /// shape written over them.
    pub(crate) fn hf_config(
        &self,
        base: Option<&Map<String, Value>>,
    ) -> Result<Map<String, Value>> {
        let c = self.config();
        if !c.bias {
            return Err(Error::InvalidArgument {
                op: "Gpt::save_pretrained",
                msg: "GPT-2 has biases; a GPT without them has no Hugging Face GPT-2 form".into(),
            });
        }
        let mut config = base.cloned().unwrap_or_default();
        let fields = json!({
            "architectures": ["GPT2LMHeadModel"],
            "model_type": MODEL_TYPE,
            "vocab_size": c.vocab_size,
            "n_positions": c.block_size,
            "n_embd": c.n_embd,
            "n_layer": c.n_layer,
            "n_head": c.n_head,
            "n_inner": null,
            "activation_function": match c.gelu {
                GeluApproximation::Tanh => "gelu_new",
                GeluApproximation::None => "gelu",
            },
            "layer_norm_epsilon": c.layer_norm_eps,
            "resid_pdrop": c.dropout,
            "embd_pdrop": c.dropout,
            "attn_pdrop": c.dropout,
            "scale_attn_weights": true,
            "scale_attn_by_inverse_layer_idx": false,
            "tie_word_embeddings": true,
            "torch_dtype": super::torch_dtype_name(c.dtype),
        });
        if let Value::Object(f) = fields {
            config.extend(f);
        }
        Ok(config)
    }

    /// Where the state-dict tensor `ours` is stored in a GPT-2 folder: renamed, `Conv1D`
    /// weights transposed; `None` for the tied head, stored once as the token embedding.
    pub(crate) fn stored_as(&self, ours: &str) -> Option<Stored> {
        if ours == HEAD {
            return None;
        }
        let Some(rest) = ours.strip_prefix("transformer.h.") else {
            return Some(Stored::plain(ours));
        };
        let (block, inner) = rest.split_once('.').unwrap_or((rest, ""));
        let (hf_inner, transposed) = match inner {
            "attn.in_proj_weight" => ("attn.c_attn.weight", true),
            "attn.in_proj_bias" => ("attn.c_attn.bias", false),
            "attn.out_proj.weight" => ("attn.c_proj.weight", true),
            "attn.out_proj.bias" => ("attn.c_proj.bias", false),
            "mlp.c_fc.weight" | "mlp.c_proj.weight" => (inner, true),
            other => (other, false),
        };
        Some(Stored {
            name: format!("transformer.h.{block}.{hf_inner}"),
            transposed,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_buffers_are_only_the_attention_masks() {
        assert!(is_known_buffer("transformer.h.0.attn.bias"));
        assert!(is_known_buffer("h.3.attn.masked_bias"));
        assert!(!is_known_buffer("transformer.h.0.attn.c_attn.bias"));
        assert!(!is_known_buffer("transformer.h.0.mlp.c_fc.bias"));
    }
}
