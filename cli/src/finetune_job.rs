//! The job behind `train --init-from DIR`: fine-tunes a Hugging Face GPT-2 or Llama folder on
//! a text corpus tokenized by the folder's own tokenizer, with the GPT job's recipe (AdamW with
//! decay on matrices only, linear warm-up then cosine decay, gradient clipping, periodic
//! train/validation loss estimates), and saves the result in the Hugging Face layout (with the
//! tokenizer files copied), which `generate --model-dir` and `transformers` load.
//!
//! One process; `--distributed`, `--shard` and `--resume` are the GPT job's and are refused
//! here by the `train` binary.

use crate::gpt_job::{EvalPoint, GptArgs};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Instant;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType, Error, Result};
use tessera_nn::clip::clip_grad_norm;
use tessera_nn::data::{SplitMix64, TextCorpus, TokenWindows};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::precision::Precision;
use tessera_nn::pretrained::{PretrainedModel, PretrainedOptions};
use tessera_nn::schedule::{CosineAnnealing, LinearWarmup, LrSchedule};
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
    /// The text file or folder to fine-tune on.
    pub data: PathBuf,
    /// Where the fine-tuned folder is written at every loss estimate (None: not saved).
    pub save: Option<PathBuf>,
    /// Steps, context (`block_size`), schedule, clipping and evaluation (the model-shape
    /// options are the loaded model's and are ignored).
    pub args: GptArgs,
    /// Sequences per step.
    pub batch_size: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Seed of the batch sampling.
    pub seed: u64,
    /// The dtype the model computes in (parameters and optimizer state stay f32).
    pub precision: Precision,
}

/// What a fine-tuning run did.
#[derive(Clone, Debug)]
pub struct FinetuneReport {
    /// `"gpt2"` or `"llama"`.
    pub model_type: &'static str,
    /// Trainable parameters.
    pub parameters: usize,
    /// Tokens of the corpus.
    pub corpus_tokens: usize,
    /// Loss estimates, the first before any step.
    pub evals: Vec<EvalPoint>,
    /// Training tokens per second.
    pub tokens_per_s: f64,
    /// Wall time of the run.
    pub seconds: f64,
}

/// Mean loss over `iters` random batches, in evaluation mode, without gradients.
fn estimate_loss<B: Backend>(
    model: &PretrainedModel<B>,
    windows: &TokenWindows,
    batch: usize,
    iters: usize,
    rng: &mut SplitMix64,
    backend: &B,
) -> Result<f64> {
    model.eval();
    let mut total = 0.0;
    for _ in 0..iters.max(1) {
        let (x, y) = windows.random_batch(batch, rng, backend)?;
        total += no_grad(|| model.loss(&x, &y))?.value().to_scalar_f64()?;
    }
    model.train();
    Ok(total / iters.max(1) as f64)
}

/// Writes the model to `dir` in the Hugging Face layout with the initial folder's tokenizer
/// and generation files.
fn save<B: Backend>(model: &PretrainedModel<B>, from: &Path, dir: &Path) -> Result<()> {
    model.save_pretrained(dir)?;
    for file in COPIED_FILES {
        let source = from.join(file);
        if source.is_file() {
            let target = dir.join(file);
            std::fs::copy(&source, &target).map_err(|e| Error::io(&target, e))?;
        }
    }
    Ok(())
}

/// Fine-tunes `config.init_from` on `config.data` with `backend`, printing loss estimates on
/// stderr and saving at each.
pub fn run_finetune<B: Backend>(config: &FinetuneConfig, backend: &B) -> Result<FinetuneReport> {
    let start = Instant::now();
    let a = &config.args;
    if a.steps == 0 || config.batch_size == 0 || a.eval_interval == 0 {
        return Err(Error::InvalidArgument {
            op: "train --init-from",
            msg: "steps, batch size and eval interval must be at least 1".into(),
        });
    }
    let options = PretrainedOptions {
        dtype: DType::F32,
        precision: config.precision,
    };
    let model = PretrainedModel::from_pretrained(&config.init_from, backend, &options)?;
    if a.block_size > model.max_positions() {
        return Err(Error::InvalidArgument {
            op: "train --init-from",
            msg: format!(
                "--block-size {} exceeds the model's {} positions",
                a.block_size,
                model.max_positions()
            ),
        });
    }
    let tokenizer = Tokenizer::from_folder(&config.init_from)?;
    if tokenizer.vocab_size() > model.vocab_size() {
        return Err(Error::InvalidArgument {
            op: "train --init-from",
            msg: format!(
                "the tokenizer has {} tokens, the model only {}",
                tokenizer.vocab_size(),
                model.vocab_size()
            ),
        });
    }
    let corpus = TextCorpus::load(&config.data)?;
    let ids: Vec<usize> = tokenizer
        .encode(&corpus.text, false)?
        .into_iter()
        .map(|id| id as usize)
        .collect();
    let (train, val) = TokenWindows::split(&ids, a.block_size, 16 * a.block_size, 10)?;
    model.train();
    eprintln!(
        "fine-tuning {} ({}, {} parameters, {} compute) on {} tokens of {} ({} train / {} \
         validation)",
        config.init_from.display(),
        model.model_type(),
        model.num_parameters(),
        config.precision,
        ids.len(),
        config.data.display(),
        train.tokens(),
        val.tokens(),
    );
    let (decay, no_decay): (Vec<_>, Vec<_>) = model
        .parameters()
        .into_iter()
        .partition(|(_, v): &(String, Var<B>)| v.rank() >= 2);
    let base = AdamWConfig {
        lr: config.lr,
        betas: (0.9, 0.99),
        eps: 1e-8,
        weight_decay: a.weight_decay,
        amsgrad: false,
    };
    let mut optimizers = [
        AdamW::new(decay, base)?,
        AdamW::new(
            no_decay,
            AdamWConfig {
                weight_decay: 0.0,
                ..base
            },
        )?,
    ];
    let params: Vec<Var<B>> = model.parameters().into_iter().map(|(_, v)| v).collect();
    let cosine = CosineAnnealing::new(
        config.lr,
        a.steps.saturating_sub(a.warmup_steps).max(1),
        a.min_lr.min(config.lr),
    )?;
    let schedule = LinearWarmup::new(cosine, a.warmup_steps, 1.0 / (a.warmup_steps as f64 + 1.0))?;
    let mut batch_rng = SplitMix64::new(config.seed ^ 0x5eed_ba7c);
    let mut eval_rng = SplitMix64::new(config.seed ^ 0xe7a1);
    let mut estimate = |step: usize| -> Result<EvalPoint> {
        let point = EvalPoint {
            step,
            train_loss: estimate_loss(
                &model,
                &train,
                config.batch_size,
                a.eval_iters,
                &mut eval_rng,
                backend,
            )?,
            val_loss: estimate_loss(
                &model,
                &val,
                config.batch_size,
                a.eval_iters,
                &mut eval_rng,
                backend,
            )?,
        };
        eprintln!(
            "step {step:>5}: train loss {:.4}, val loss {:.4}",
            point.train_loss, point.val_loss
        );
        Ok(point)
    };
    let mut evals = vec![estimate(0)?];
    let (mut train_seconds, mut trained_tokens) = (0.0, 0usize);
    for step in 0..a.steps {
        let step_start = Instant::now();
        let lr = schedule.lr_at(step);
        let (x, y) = train.random_batch(config.batch_size, &mut batch_rng, backend)?;
        for opt in &mut optimizers {
            opt.set_learning_rate(lr);
            opt.zero_grad();
        }
        model.loss(&x, &y)?.backward()?;
        if a.grad_clip > 0.0 {
            clip_grad_norm(&params, a.grad_clip)?;
        }
        for opt in &mut optimizers {
            opt.step()?;
        }
        backend.synchronize()?;
        train_seconds += step_start.elapsed().as_secs_f64();
        trained_tokens += config.batch_size * a.block_size;
        let done = step + 1;
        if done % a.eval_interval == 0 || done == a.steps {
            evals.push(estimate(done)?);
            if let Some(dir) = &config.save {
                save(&model, &config.init_from, dir)?;
            }
        }
    }
    Ok(FinetuneReport {
        model_type: model.model_type(),
        parameters: model.num_parameters(),
        corpus_tokens: ids.len(),
        evals,
        tokens_per_s: trained_tokens as f64 / train_seconds.max(1e-9),
        seconds: start.elapsed().as_secs_f64(),
    })
}

impl FinetuneReport {
    /// The JSON summary line of `train --init-from`.
    pub fn summary(&self, config: &FinetuneConfig, backend: &str) -> Value {
        let last = self.evals.last().expect("the first estimate at least");
        json!({
            "model": "finetune",
            "model_type": self.model_type,
            "init_from": config.init_from.display().to_string(),
            "backend": backend,
            "steps": config.args.steps,
            "batch_size": config.batch_size,
            "block_size": config.args.block_size,
            "lr": config.lr,
            "seed": config.seed,
            "precision": config.precision.name(),
            "parameters": self.parameters,
            "corpus_tokens": self.corpus_tokens,
            "initial_val_loss": self.evals[0].val_loss,
            "final_train_loss": last.train_loss,
            "final_val_loss": last.val_loss,
            "tokens_per_s": self.tokens_per_s,
            "seconds": self.seconds,
            "checkpoint": config.save.as_ref().map(|p| p.display().to_string()),
        })
    }
}
