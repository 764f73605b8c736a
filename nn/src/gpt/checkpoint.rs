//! GPT checkpoint folders: the weights (`model.safetensors`, readable by PyTorch), the
//! tokenizer's vocabulary (`vocab.json`) and the configuration with whatever the trainer
//! records (`config.json`), everything `generate` needs.

use super::{Gpt, GptConfig};
use crate::checkpoint::write_atomically;
use crate::data::CharTokenizer;
use crate::distributed::{all_ranks_ok, save_on_rank0, Communicator, ShardedUnits};
use crate::module::persistence::module_file_metadata;
use crate::run::save_gathered_model;
use crate::Module;
use serde_json::{json, Value};
use std::path::Path;
use tessera_core::{Backend, Error, Generator, Result};

/// The weights file of a checkpoint folder.
pub const MODEL_FILE: &str = "model.safetensors";
/// The vocabulary file of a checkpoint folder.
pub const VOCAB_FILE: &str = "vocab.json";
/// The configuration file of a checkpoint folder: `{"model": GptConfig, "training": {...}}`.
pub const CONFIG_FILE: &str = "config.json";

/// A loaded checkpoint folder.
pub struct GptCheckpoint<B: Backend> {
    /// The model, in evaluation mode.
    pub model: Gpt<B>,
    /// Its tokenizer.
    pub tokenizer: CharTokenizer,
    /// The whole `config.json` (the `training` entry holds what the trainer recorded).
    pub info: Value,
}

/// Writes `model`, `tokenizer` and `config.json` (`{"model": ..., "training": training}`) into
/// `dir`, creating it; every file is replaced atomically.
pub fn save_checkpoint<B: Backend>(
    dir: impl AsRef<Path>,
    model: &Gpt<B>,
    tokenizer: &CharTokenizer,
    training: Value,
) -> Result<()> {
    let dir = dir.as_ref();
    check_vocabulary(model, tokenizer)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    model.save(dir.join(MODEL_FILE))?;
    save_tokenizer_and_config(dir, model, tokenizer, training)
}

/// [`save_checkpoint`] from the ranks of a data-parallel run (a collective: every rank of
/// `comm` calls it): rank 0 writes the folder, a level-3 model's blocks (`units`,
/// [`Gpt::shard_blocks`]) gathered to it a block at a time
/// ([`crate::run::save_gathered_model`]), so that no rank holds the whole model to save it.
/// When any rank fails, every rank returns an error.
pub fn save_checkpoint_gathered<B: Backend>(
    dir: impl AsRef<Path>,
    model: &Gpt<B>,
    units: Option<&ShardedUnits<B>>,
    tokenizer: &CharTokenizer,
    training: Value,
    comm: &dyn Communicator<B>,
) -> Result<()> {
    let dir = dir.as_ref();
    let prepared = match comm.rank() {
        0 => check_vocabulary(model, tokenizer)
            .and_then(|()| std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))),
        _ => Ok(()),
    };
    all_ranks_ok(comm, prepared, "prepare the checkpoint folder")?;
    let metadata = module_file_metadata();
    save_gathered_model(&dir.join(MODEL_FILE), model, units, &metadata, comm)?;
    save_on_rank0(comm, || {
        save_tokenizer_and_config(dir, model, tokenizer, training)
    })
}

/// Fails unless the tokenizer's vocabulary is the model's.
fn check_vocabulary<B: Backend>(model: &Gpt<B>, tokenizer: &CharTokenizer) -> Result<()> {
    if tokenizer.vocab_size() != model.config().vocab_size {
        return Err(Error::InvalidArgument {
            op: "save_checkpoint",
            msg: format!(
                "a vocabulary of {} tokens for a model of {}",
                tokenizer.vocab_size(),
                model.config().vocab_size
            ),
        });
    }
    Ok(())
}

/// Writes `vocab.json` and `config.json` into the existing folder `dir`.
fn save_tokenizer_and_config<B: Backend>(
    dir: &Path,
    model: &Gpt<B>,
    tokenizer: &CharTokenizer,
    training: Value,
) -> Result<()> {
    tokenizer.save(dir.join(VOCAB_FILE))?;
    let info = json!({ "model": model.config().to_json(), "training": training });
    let text = serde_json::to_string_pretty(&info).expect("JSON values serialise");
    write_atomically(&dir.join(CONFIG_FILE), text.as_bytes())
}

/// Reads a folder written by [`save_checkpoint`] onto `backend` (the weights strictly: a
/// missing, extra or mis-shaped tensor is an error naming it).
pub fn load_checkpoint<B: Backend>(dir: impl AsRef<Path>, backend: &B) -> Result<GptCheckpoint<B>> {
    let dir = dir.as_ref();
    let config_path = dir.join(CONFIG_FILE);
    if !config_path.is_file() {
        return Err(Error::MissingData {
            path: dir.to_path_buf(),
            hint: format!("no {CONFIG_FILE} there: not a checkpoint folder of `train --model gpt`"),
        });
    }
    let text = std::fs::read_to_string(&config_path).map_err(|e| Error::io(&config_path, e))?;
    let info: Value =
        serde_json::from_str(&text).map_err(|e| Error::format(&config_path, e.to_string()))?;
    let config = GptConfig::from_json(info.get("model").unwrap_or(&Value::Null))
        .map_err(|e| Error::format(&config_path, e.to_string()))?;
    let tokenizer = CharTokenizer::load(dir.join(VOCAB_FILE))?;
    if tokenizer.vocab_size() != config.vocab_size {
        return Err(Error::format(
            dir.join(VOCAB_FILE),
            format!(
                "{} tokens, but the model has {}",
                tokenizer.vocab_size(),
                config.vocab_size
            ),
        ));
    }
    let model = config.init(backend, &mut Generator::new(0))?;
    model.load(dir.join(MODEL_FILE))?;
    model.eval();
    Ok(GptCheckpoint {
        model,
        tokenizer,
        info,
    })
}
