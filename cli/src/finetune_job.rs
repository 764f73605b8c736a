//! The job behind `train --init-from DIR`: fine-tunes a Hugging Face GPT-2 or Llama folder on
//! a text corpus tokenized by the folder's own tokenizer, in the shared text loop
//! ([`crate::text_training`], the GPT job's recipe and options: AdamW with decay on matrices
//! only, linear warm-up then cosine decay, gradient clipping, periodic train/validation loss
//! estimates, f16 loss scaling, `--distributed` at every `--shard` level, whole-run
//! checkpoints and `--resume`, `--log-dir`), and saves the model in the Hugging Face layout
//! (with the tokenizer files copied) at every loss estimate, which `generate --model-dir` and
//! `transformers` load.

use crate::gpt_job::{GptTrainConfig, GptTrainReport};
use crate::text_training::{train_text_model, TextJob};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tessera_core::{Backend, DType, Error, Result};
use tessera_nn::data::{TextCorpus, TokenWindows};
use tessera_nn::distributed::{
    save_on_rank0, Communicator, LocalCommunicator, ShardLevel, ShardedUnits,
};
use tessera_nn::pretrained::{hf_files, PretrainedModel, PretrainedOptions};
use tessera_nn::Module;
use tessera_tokenizer::Tokenizer;

/// The peak learning rate of a fine-tuning run when `--lr` is not given.
pub const DEFAULT_FINETUNE_LR: f64 = 1e-4;

/// Where a fine-tuned model goes when `--save` is not given.
pub const DEFAULT_FINETUNE_DIR: &str = "checkpoints/finetuned";

/// The files besides the weights and `config.json` that are copied from the initial folder to
/// the saved one, when present.
const COPIED_FILES: [&str; 6] = [
    "tokenizer.json",
    tessera_tokenizer::VOCAB_FILE,
    tessera_tokenizer::MERGES_FILE,
    "tokenizer_config.json",
    "special_tokens_map.json",
    "generation_config.json",
];

/// Everything a fine-tuning run needs.
#[derive(Clone, Debug)]
pub struct FinetuneConfig {
    /// The Hugging Face folder to start from.
    pub init_from: PathBuf,
    /// The run's options, as for `train --model gpt`: steps, context (`block_size`), schedule,
    /// clipping, evaluation, batch size, learning rate, seed, data, precision, the run folder
    /// (`save`: the fine-tuned model in the Hugging Face layout and the run checkpoints),
    /// resume, logging and sharding. The model-shape options (`n_layer`, `n_head`, `n_embd`,
    /// `dropout`) and `dtype` are the loaded folder's and are ignored, as is `sample_chars`.
    pub text: GptTrainConfig,
}

impl FinetuneConfig {
    /// What a checkpoint of this run must agree with to be resumed: the initial folder and
    /// every option that changes the training.
    pub fn run_config(&self) -> Value {
        let mut config = self.text.recipe_config();
        config["job"] = "train-finetune".into();
        config["init_from"] = self.init_from.display().to_string().into();
        config
    }
}

/// What a fine-tuning run did.
#[derive(Clone, Debug)]
pub struct FinetuneReport {
    /// `"gpt2"` or `"llama"`.
    pub model_type: &'static str,
    /// The loop's figures (`corpus_chars` counts the corpus's tokens).
    pub run: GptTrainReport,
}

/// `train --init-from`'s part of the text loop: the loaded folder, saved back in its layout.
struct HfFolderJob<'a> {
    config: &'a FinetuneConfig,
    corpus_tokens: usize,
}

/// Writes the model to `dir` in the Hugging Face layout with the initial folder's tokenizer
/// and generation files.
fn save<B: Backend>(model: &PretrainedModel<B>, from: &Path, dir: &Path) -> Result<()> {
    model.save_pretrained(dir)?;
    copy_tokenizer(from, dir)
}

/// Copies the tokenizer's files of the folder `from` that are there into `dir`.
fn copy_tokenizer(from: &Path, dir: &Path) -> Result<()> {
    for file in COPIED_FILES {
        let source = from.join(file);
        if source.is_file() {
            let target = dir.join(file);
            std::fs::copy(&source, &target).map_err(|e| Error::io(&target, e))?;
        }
    }
    Ok(())
}

impl<B: Backend> TextJob<B> for HfFolderJob<'_> {
    type Model = PretrainedModel<B>;

    fn label(&self) -> &str {
        "fine-tune"
    }

    fn run_config(&self) -> Value {
        self.config.run_config()
    }

    fn describe(
        &self,
        model: &PretrainedModel<B>,
        train: &TokenWindows,
        val: &TokenWindows,
    ) -> String {
        let t = &self.config.text;
        format!(
            "fine-tuning {} ({}, {} parameters, {} compute) on {} tokens of {} ({} train / {} \
             validation)",
            self.config.init_from.display(),
            model.model_type(),
            model.num_parameters(),
            t.precision,
            self.corpus_tokens,
            t.data.display(),
            train.tokens(),
            val.tokens(),
        )
    }

    fn save_model(
        &self,
        dir: &Path,
        model: &PretrainedModel<B>,
        _info: Value,
        units: Option<&ShardedUnits<B>>,
        comm: &dyn Communicator<B>,
    ) -> Result<()> {
        let from = &self.config.init_from;
        match units {
            // Level 3: rank 0 writes each block as it is gathered to it, never the whole model.
            Some(units) => {
                let max = hf_files::DEFAULT_MAX_SHARD_BYTES;
                model.save_pretrained_gathered(dir, max, Some(units), comm)?;
                save_on_rank0(comm, || copy_tokenizer(from, dir))
            }
            None => save_on_rank0(comm, || save(model, from, dir)),
        }
    }

    fn samples(&self, _config: &GptTrainConfig) -> bool {
        // `generate --model-dir` samples from the saved folder.
        false
    }

    fn sample(&self, _model: &PretrainedModel<B>, _config: &GptTrainConfig) -> Result<String> {
        Ok(String::new())
    }
}

/// Fine-tunes `config.init_from` on `config.text.data` with `backend` in one process.
pub fn run_finetune<B: Backend>(config: &FinetuneConfig, backend: &B) -> Result<FinetuneReport> {
    run_finetune_with(config, backend, Arc::new(LocalCommunicator::new()))
}

/// [`run_finetune`] as one rank of a data-parallel run over `comm` (every rank loads the
/// folder; rank 0's copy is what all start from; see [`train_text_model`]).
pub fn run_finetune_with<B: Backend>(
    config: &FinetuneConfig,
    backend: &B,
    comm: Arc<dyn Communicator<B>>,
) -> Result<FinetuneReport> {
    let start = Instant::now();
    let a = &config.text.args;
    let invalid = |msg: String| Error::InvalidArgument {
        op: "train --init-from",
        msg,
    };
    // Before loading a model that may take a while.
    config.text.check_counts("train --init-from")?;
    let options = PretrainedOptions {
        dtype: DType::F32,
        precision: config.text.precision,
    };
    // Level 3 reads the blocks one at a time, each rank keeping its share of each (or, on a
    // resume, reads none of them: the checkpoint has them), so that no rank holds the whole
    // model; the other levels load it whole.
    let model = if config.text.shard == ShardLevel::Parameters {
        PretrainedModel::from_pretrained_deferred(&config.init_from, backend, &options)?
    } else {
        PretrainedModel::from_pretrained(&config.init_from, backend, &options)?
    };
    if a.block_size > model.max_positions() {
        return Err(invalid(format!(
            "--block-size {} exceeds the model's {} positions",
            a.block_size,
            model.max_positions()
        )));
    }
    let tokenizer = Tokenizer::from_folder(&config.init_from)?;
    if tokenizer.vocab_size() > model.vocab_size() {
        return Err(invalid(format!(
            "the tokenizer has {} tokens, the model only {}",
            tokenizer.vocab_size(),
            model.vocab_size()
        )));
    }
    let corpus = TextCorpus::load(&config.text.data)?;
    let ids: Vec<usize> = tokenizer
        .encode(&corpus.text, false)?
        .into_iter()
        .map(|id| id as usize)
        .collect();
    let job = HfFolderJob {
        config,
        corpus_tokens: ids.len(),
    };
    let model_type = model.model_type();
    let run = train_text_model(&config.text, backend, comm, &job, model, &ids, start)?;
    Ok(FinetuneReport { model_type, run })
}

impl FinetuneReport {
    /// The JSON summary line of `train --init-from`.
    pub fn summary(&self, config: &FinetuneConfig, backend: &str) -> Value {
        let (t, r) = (&config.text, &self.run);
        let last = r.last();
        json!({
            "model": "finetune",
            "model_type": self.model_type,
            "init_from": config.init_from.display().to_string(),
            "backend": backend,
            "steps": t.args.steps,
            "batch_size": t.batch_size,
            "world_size": r.world_size,
            "global_batch_size": t.batch_size * r.world_size,
            "block_size": t.args.block_size,
            "lr": t.lr,
            "seed": t.seed,
            "precision": t.precision.name(),
            "skipped_steps": r.skipped_steps,
            "parameters": r.parameters,
            "corpus_tokens": r.corpus_chars,
            "initial_val_loss": r.evals[0].val_loss,
            "final_train_loss": last.train_loss,
            "final_val_loss": last.val_loss,
            "tokens_per_s": r.tokens_per_s,
            "seconds": r.seconds,
            "checkpoint": t.save.as_ref().map(|p| p.display().to_string()),
            "resumed_from_step": r.resumed_from_step,
            "shard": r.shard.number(),
            "state_bytes_per_rank": r.state_bytes_per_rank,
            "peak_rss_bytes": r.peak_rss_bytes,
            "peak_virtual_bytes": r.peak_virtual_bytes,
        })
    }
}
