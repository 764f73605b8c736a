//! [`PretrainedModel`]: a GPT-2 or Llama checkpoint, chosen by its `config.json`.

use super::folder_source::{tensors_under, FolderSource, Stored};
use super::gathered_folder::write_folder_gathered;
use super::hf_files::{self, ConfigReader};
use super::{gpt2, llama, PretrainedOptions};
use crate::distributed::{Communicator, ShardedUnits};
use crate::gpt::{Gpt, GptCache};
use crate::llama::{Llama, LlamaCache};
use crate::module::ModuleVisitor;
use crate::Module;
use serde_json::{Map, Value};
use std::path::Path;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result, Tensor};

/// A causal language model loaded from a Hugging Face folder, whichever architecture its
/// `model_type` names (`gpt2` or `llama`), with the folder's `config.json` kept so that
/// [`PretrainedModel::save_pretrained`] writes back the fields Tessera does not use (token
/// ids, names).
pub enum PretrainedModel<B: Backend> {
    /// GPT-2.
    Gpt2 {
        /// The model.
        model: Gpt<B>,
        /// The `config.json` it was loaded from.
        hf_config: Map<String, Value>,
        /// Where a deferred load reads its blocks from; `None` when loaded whole.
        blocks_from: Option<FolderSource>,
    },
    /// Llama.
    Llama {
        /// The model.
        model: Llama<B>,
        /// The `config.json` it was loaded from.
        hf_config: Map<String, Value>,
        /// Where a deferred load reads its blocks from; `None` when loaded whole.
        blocks_from: Option<FolderSource>,
    },
}

/// The key/value caches of a [`PretrainedModel`].
#[derive(Debug)]
pub enum PretrainedCache<B: Backend> {
    /// A GPT-2's.
    Gpt2(GptCache<B>),
    /// A Llama's.
    Llama(LlamaCache<B>),
}

impl<B: Backend> PretrainedCache<B> {
    /// Positions cached.
    pub fn len(&self) -> usize {
        match self {
            PretrainedCache::Gpt2(c) => c.len(),
            PretrainedCache::Llama(c) => c.len(),
        }
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every position.
    pub fn clear(&mut self) {
        match self {
            PretrainedCache::Gpt2(c) => c.clear(),
            PretrainedCache::Llama(c) => c.clear(),
        }
    }

    /// Keeps the first `len` positions (see [`crate::layers::KvCache::truncate`]).
    pub fn truncate(&mut self, len: usize) {
        match self {
            PretrainedCache::Gpt2(c) => c.truncate(len),
            PretrainedCache::Llama(c) => c.truncate(len),
        }
    }
}

impl<B: Backend> PretrainedModel<B> {
    /// Loads the Hugging Face folder `dir` onto `backend` (see [`super`]).
    pub fn from_pretrained(
        dir: impl AsRef<Path>,
        backend: &B,
        options: &PretrainedOptions,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let hf_config = hf_files::read_config(dir)?;
        match Self::model_type_of(&hf_config, dir)? {
            gpt2::MODEL_TYPE => Ok(PretrainedModel::Gpt2 {
                model: Gpt::from_pretrained(dir, backend, options)?,
                hf_config,
                blocks_from: None,
            }),
            _ => Ok(PretrainedModel::Llama {
                model: Llama::from_pretrained(dir, backend, options)?,
                hf_config,
                blocks_from: None,
            }),
        }
    }

    /// [`PretrainedModel::from_pretrained`] without the blocks' values, so that no one holds
    /// the whole model at once: the folder is checked as a whole (configuration, every
    /// tensor's name, shape and dtype) and everything outside the blocks (embeddings, final
    /// norm, head) is loaded, while each block holds placeholders (one element per tensor)
    /// until [`PretrainedModel::load_block`] reads it. Running the model before then is an
    /// error naming the first parameter without values. Sharding level 3 loads each block
    /// this way and keeps only its share of it ([`ShardedUnits::initialize`]).
    ///
    /// ```no_run
    /// # fn main() -> tessera_core::Result<()> {
    /// use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};
    /// let dev = tessera_cpu::Cpu::new();
    /// let options = PretrainedOptions::default();
    /// let model = PretrainedModel::from_pretrained_deferred("gpt2", &dev, &options)?;
    /// for block in 0..model.block_prefixes().len() {
    ///     model.load_block(block)?;
    /// }
    /// # Ok(()) }
    /// ```
    pub fn from_pretrained_deferred(
        dir: impl AsRef<Path>,
        backend: &B,
        options: &PretrainedOptions,
    ) -> Result<Self> {
        let dir = dir.as_ref();
        let hf_config = hf_files::read_config(dir)?;
        match Self::model_type_of(&hf_config, dir)? {
            gpt2::MODEL_TYPE => {
                let (model, source) = Gpt::from_pretrained_deferred(dir, backend, options)?;
                Ok(PretrainedModel::Gpt2 {
                    model,
                    hf_config,
                    blocks_from: Some(source),
                })
            }
            _ => {
                let (model, source) = Llama::from_pretrained_deferred(dir, backend, options)?;
                Ok(PretrainedModel::Llama {
                    model,
                    hf_config,
                    blocks_from: Some(source),
                })
            }
        }
    }

    /// The folder's `model_type`: `"gpt2"` or `"llama"`, anything else an error.
    fn model_type_of(hf_config: &Map<String, Value>, dir: &Path) -> Result<&'static str> {
        match ConfigReader::new(hf_config, dir).string("model_type")? {
            Some(gpt2::MODEL_TYPE) => Ok(gpt2::MODEL_TYPE),
            Some(llama::MODEL_TYPE) => Ok(llama::MODEL_TYPE),
            other => Err(Error::format(
                dir.join(hf_files::CONFIG_FILE),
                format!(
                    "`model_type` {other:?} is not supported (only \"{}\" and \"{}\")",
                    gpt2::MODEL_TYPE,
                    llama::MODEL_TYPE
                ),
            )),
        }
    }

    /// Whether the model came from [`PretrainedModel::from_pretrained_deferred`] (its blocks
    /// are read by [`PretrainedModel::load_block`]).
    pub fn is_deferred(&self) -> bool {
        self.blocks_from().is_some()
    }

    /// Reads block `block`'s tensors from the folder of a deferred load
    /// ([`PretrainedModel::from_pretrained_deferred`]) into the model, in the model's dtype.
    /// Reading a block again reads the stored values again. An error for a model loaded whole,
    /// and for a block that does not exist. With the blocks sharded (level 3), call it through
    /// [`ShardedUnits::initialize`], which takes each rank's share of what it reads.
    pub fn load_block(&self, block: usize) -> Result<()> {
        let prefixes = self.block_prefixes();
        let (Some(source), Some(prefix)) = (self.blocks_from(), prefixes.get(block)) else {
            return Err(Error::InvalidArgument {
                op: "PretrainedModel::load_block",
                msg: match self.blocks_from() {
                    None => "the model was loaded whole (from_pretrained), not deferred".into(),
                    Some(_) => format!("no block {block}: the model has {}", prefixes.len()),
                },
            });
        };
        source.load(&tensors_under(self, prefix))
    }

    fn blocks_from(&self) -> Option<&FolderSource> {
        match self {
            PretrainedModel::Gpt2 { blocks_from, .. }
            | PretrainedModel::Llama { blocks_from, .. } => blocks_from.as_ref(),
        }
    }

    /// `"gpt2"` or `"llama"`.
    pub fn model_type(&self) -> &'static str {
        match self {
            PretrainedModel::Gpt2 { .. } => gpt2::MODEL_TYPE,
            PretrainedModel::Llama { .. } => llama::MODEL_TYPE,
        }
    }

    /// Tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.config().vocab_size,
            PretrainedModel::Llama { model, .. } => model.config().vocab_size,
        }
    }

    /// The longest context.
    pub fn max_positions(&self) -> usize {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.config().block_size,
            PretrainedModel::Llama { model, .. } => model.config().max_position_embeddings,
        }
    }

    /// The `config.json` the model was loaded from.
    pub fn hf_config(&self) -> &Map<String, Value> {
        match self {
            PretrainedModel::Gpt2 { hf_config, .. } | PretrainedModel::Llama { hf_config, .. } => {
                hf_config
            }
        }
    }

    /// A token id of the configuration (`"bos_token_id"`, `"eos_token_id"`; the first of a
    /// list), if set.
    pub fn token_id(&self, key: &str) -> Option<usize> {
        let v = self.hf_config().get(key)?;
        let first = match v {
            Value::Array(items) => items.first()?,
            other => other,
        };
        first.as_u64().map(|n| n as usize)
    }

    /// The parameter-name prefix of each transformer block (GPT-2's `transformer.h.{i}`,
    /// Llama's `model.layers.{i}`): the units of [`PretrainedModel::shard_blocks`].
    pub fn block_prefixes(&self) -> Vec<String> {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.block_prefixes(),
            PretrainedModel::Llama { model, .. } => model.layer_prefixes(),
        }
    }

    /// Runs every block through `units` (sharding level 3; see [`Gpt::shard_blocks`] and
    /// [`Llama::shard_layers`]), whose units must be [`PretrainedModel::block_prefixes`].
    pub fn shard_blocks(&self, units: Arc<ShardedUnits<B>>) -> Result<()> {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.shard_blocks(units),
            PretrainedModel::Llama { model, .. } => model.shard_layers(units),
        }
    }

    /// The logits `[batch, t, vocab_size]` of every position of `idx: [batch, t]`.
    pub fn forward(&self, idx: &Tensor<B>) -> Result<Var<B>> {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.forward(idx),
            PretrainedModel::Llama { model, .. } => model.forward(idx),
        }
    }

    /// The mean next-token cross-entropy of `idx` against `targets` (both `[batch, t]`).
    pub fn loss(&self, idx: &Tensor<B>, targets: &Tensor<B>) -> Result<Var<B>> {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.loss(idx, targets),
            PretrainedModel::Llama { model, .. } => model.loss(idx, targets),
        }
    }

    /// Empty caches for `batch` sequences.
    pub fn new_cache(&self, batch: usize) -> Result<PretrainedCache<B>> {
        match self {
            PretrainedModel::Gpt2 { model, .. } => {
                let backend = model.transformer().wte.weight().value().backend().clone();
                Ok(PretrainedCache::Gpt2(GptCache::new(
                    model.config(),
                    batch,
                    &backend,
                )?))
            }
            PretrainedModel::Llama { model, .. } => {
                let backend = model
                    .model()
                    .embed_tokens
                    .weight()
                    .value()
                    .backend()
                    .clone();
                Ok(PretrainedCache::Llama(LlamaCache::new(
                    model.config(),
                    batch,
                    &backend,
                )?))
            }
        }
    }

    /// The logits `[batch, n, vocab_size]` of new tokens `idx: [batch, n]` after the cached
    /// positions (inference).
    pub fn forward_cached(
        &self,
        idx: &Tensor<B>,
        cache: &mut PretrainedCache<B>,
    ) -> Result<Tensor<B>> {
        match (self, cache) {
            (PretrainedModel::Gpt2 { model, .. }, PretrainedCache::Gpt2(c)) => {
                model.forward_cached(idx, c)
            }
            (PretrainedModel::Llama { model, .. }, PretrainedCache::Llama(c)) => {
                model.forward_cached(idx, c)
            }
            _ => Err(Error::InvalidArgument {
                op: "PretrainedModel::forward_cached",
                msg: "the cache was made for another architecture".into(),
            }),
        }
    }

    /// Writes the model as a Hugging Face folder (its loaded `config.json` fields kept).
    pub fn save_pretrained(&self, dir: impl AsRef<Path>) -> Result<()> {
        self.save_pretrained_sharded(dir, hf_files::DEFAULT_MAX_SHARD_BYTES)
    }

    /// [`save_pretrained`](Self::save_pretrained) with weights files of at most
    /// `max_shard_bytes` each (shards and an index above it).
    pub fn save_pretrained_sharded(
        &self,
        dir: impl AsRef<Path>,
        max_shard_bytes: u64,
    ) -> Result<()> {
        match self {
            PretrainedModel::Gpt2 {
                model, hf_config, ..
            } => model.save_pretrained_sharded(dir, Some(hf_config), max_shard_bytes),
            PretrainedModel::Llama {
                model, hf_config, ..
            } => model.save_pretrained_sharded(dir, Some(hf_config), max_shard_bytes),
        }
    }

    /// [`save_pretrained_sharded`](Self::save_pretrained_sharded) from every rank of a
    /// data-parallel run at once (a collective), rank 0 writing the same files: a level-3
    /// model's blocks (`units`) are gathered to rank 0 one at a time and spooled to disk, so
    /// that no rank holds the whole model to save it (without `units`, rank 0 writes its own
    /// copy). When any rank fails, every rank returns an error.
    pub fn save_pretrained_gathered(
        &self,
        dir: impl AsRef<Path>,
        max_shard_bytes: u64,
        units: Option<&ShardedUnits<B>>,
        comm: &dyn Communicator<B>,
    ) -> Result<()> {
        type StoredAs<'a> = Box<dyn Fn(&str) -> Option<Stored> + 'a>;
        let (config, module, stored_as): (_, &dyn Module<B>, StoredAs<'_>) = match self {
            PretrainedModel::Gpt2 {
                model, hf_config, ..
            } => (
                model.hf_config(Some(hf_config))?,
                model,
                Box::new(|name| model.stored_as(name)),
            ),
            PretrainedModel::Llama {
                model, hf_config, ..
            } => (
                model.hf_config(Some(hf_config)),
                model,
                Box::new(|name| model.stored_as(name)),
            ),
        };
        let dir = dir.as_ref();
        write_folder_gathered(
            dir,
            &config,
            module,
            &*stored_as,
            max_shard_bytes,
            units,
            comm,
        )
    }
}

impl<B: Backend> Module<B> for PretrainedModel<B> {
    fn visit(&self, prefix: &str, visitor: &mut dyn ModuleVisitor<B>) {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.visit(prefix, visitor),
            PretrainedModel::Llama { model, .. } => model.visit(prefix, visitor),
        }
    }

    fn set_training(&self, training: bool) {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.set_training(training),
            PretrainedModel::Llama { model, .. } => model.set_training(training),
        }
    }

    fn training_mode(&self) -> Option<bool> {
        match self {
            PretrainedModel::Gpt2 { model, .. } => model.training_mode(),
            PretrainedModel::Llama { model, .. } => model.training_mode(),
        }
    }
}
