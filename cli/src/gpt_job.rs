//! The training job behind `train --model gpt`: a character-level GPT on a text corpus (by
//! default Debian's `fortunes`), with AdamW (decay on matrices only), linear warm-up then
//! cosine decay, gradient clipping, periodic train/validation loss estimates, tokens/s, a
//! progress bar and checkpoint folders that `generate` reads. Under `--precision bf16|f16` the
//! attention and linear layers compute in 16 bits with f32 master weights and optimizer state
//! (see [`tessera_nn::precision`]); f16 adds a [`DynamicLossScaler`].

use crate::gpt_optimizers::GptOptimizers;
use crate::memory::{max_over_ranks, peak_rss_bytes, peak_virtual_bytes};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};
use tessera_nn::data::{CharTokenizer, SplitMix64, TextCorpus, TokenWindows, FORTUNES_DIR};
use tessera_nn::distributed::{
    save_on_rank0, Communicator, DdpConfig, DistributedDataParallel, LocalCommunicator, Reduction,
    ShardLevel, DEFAULT_BUCKET_BYTES,
};
use tessera_nn::gpt::{generate, save_checkpoint, Gpt, GptConfig, SamplingConfig};
use tessera_nn::precision::{DynamicLossScaler, Precision, ScalerStep};
use tessera_nn::run::{
    self, f64_from_json, f64_to_json, scaler_from_json, scaler_to_json, u64_from_json, MetricsLog,
    RunDir,
};
use tessera_nn::schedule::{CosineAnnealing, LinearWarmup, LrSchedule};
use tessera_nn::Module;

/// The command-line options of `train --model gpt` (the others, `--batch-size`, `--lr`,
/// `--seed`, `--data`, `--save` and `--backend`, are shared with the other models).
#[derive(Clone, Debug, PartialEq, clap::Args)]
#[command(next_help_heading = "GPT options (--model gpt)")]
pub struct GptArgs {
    /// Optimisation steps.
    #[arg(long, default_value_t = DEFAULTS.steps)]
    pub steps: usize,
    /// Tokens (characters) of context.
    #[arg(long, default_value_t = DEFAULTS.block_size)]
    pub block_size: usize,
    /// Transformer blocks.
    #[arg(long, default_value_t = DEFAULTS.n_layer)]
    pub n_layer: usize,
    /// Attention heads.
    #[arg(long, default_value_t = DEFAULTS.n_head)]
    pub n_head: usize,
    /// Model width.
    #[arg(long, default_value_t = DEFAULTS.n_embd)]
    pub n_embd: usize,
    /// Dropout.
    #[arg(long, default_value_t = DEFAULTS.dropout)]
    pub dropout: f64,
    /// Linear warm-up steps before the cosine decay.
    #[arg(long, default_value_t = DEFAULTS.warmup_steps)]
    pub warmup_steps: usize,
    /// The learning rate the cosine decays to.
    #[arg(long, default_value_t = DEFAULTS.min_lr)]
    pub min_lr: f64,
    /// AdamW's decoupled weight decay (weights and embeddings only).
    #[arg(long, default_value_t = DEFAULTS.weight_decay)]
    pub weight_decay: f64,
    /// Clip the global gradient norm to this (0: no clipping).
    #[arg(long, default_value_t = DEFAULTS.grad_clip)]
    pub grad_clip: f64,
    /// Steps between loss estimates (and checkpoints).
    #[arg(long, default_value_t = DEFAULTS.eval_interval)]
    pub eval_interval: usize,
    /// Batches per loss estimate, on each split.
    #[arg(long, default_value_t = DEFAULTS.eval_iters)]
    pub eval_iters: usize,
    /// Characters of sample text printed at the end (0: none).
    #[arg(long, default_value_t = DEFAULTS.sample_chars)]
    pub sample_chars: usize,
}

/// The defaults of [`GptArgs`]: a 4-layer, 128-wide model with a 64-character context that
/// learns fortunes visibly in a few minutes on two cores.
pub const DEFAULTS: GptArgs = GptArgs {
    steps: 1000,
    block_size: 64,
    n_layer: 4,
    n_head: 4,
    n_embd: 128,
    dropout: 0.0,
    warmup_steps: 50,
    min_lr: 1e-4,
    weight_decay: 0.1,
    grad_clip: 1.0,
    eval_interval: 100,
    eval_iters: 10,
    sample_chars: 300,
};

/// The batch size when `--batch-size` is not given.
pub const DEFAULT_BATCH: usize = 32;

/// The peak learning rate when `--lr` is not given.
pub const DEFAULT_LR: f64 = 3e-3;

/// Where checkpoints go when `--save` is not given.
pub const DEFAULT_CHECKPOINT_DIR: &str = "checkpoints/gpt";

/// Everything the job needs.
#[derive(Clone, Debug)]
pub struct GptTrainConfig {
    /// Model and schedule options.
    pub args: GptArgs,
    /// Sequences per step.
    pub batch_size: usize,
    /// Peak learning rate.
    pub lr: f64,
    /// Seed of initialisation, dropout and batch sampling.
    pub seed: u64,
    /// A text file or folder.
    pub data: PathBuf,
    /// The checkpoint folder, written at every loss estimate and at the end (None: not saved):
    /// the model, its config and tokenizer for `generate`, and under `checkpoints/` the whole
    /// run's state (see [`tessera_nn::run`]).
    pub save: Option<PathBuf>,
    /// Also checkpoint the whole run every N steps (None: at the loss estimates only).
    pub checkpoint_every: Option<usize>,
    /// How many run checkpoints the folder keeps.
    pub keep_last: usize,
    /// Continue from the newest whole checkpoint in `save` (a fresh run when there is none).
    pub resume: bool,
    /// Where to log the run's scalars for TensorBoard and as `metrics.jsonl`, if anywhere.
    pub log_dir: Option<PathBuf>,
    /// Exits the process (status [`crate::mnist_job::HALT_EXIT_CODE`]) right after this many
    /// steps and any checkpoint of that step, as a kill would: how tests interrupt a run.
    pub halt_after_step: Option<usize>,
    /// Show a progress bar.
    pub progress: bool,
    /// The parameter dtype.
    pub dtype: DType,
    /// The dtype the attention and linear layers compute in (parameters and optimizer state
    /// stay `dtype`); f16 trains with a [`DynamicLossScaler`].
    pub precision: Precision,
    /// How much of the training state each rank keeps ([`ShardLevel`]; levels 1 and 2 split
    /// the AdamW state, and the gradients, over the ranks).
    pub shard: ShardLevel,
    /// Each rank writes its own part of the run checkpoints
    /// ([`run::save_sharded_checkpoint`]) instead of every rank gathering the whole state
    /// for rank 0 to write.
    pub sharded_checkpoints: bool,
    /// With several ranks: most bytes of gradients in one collective (buckets of the
    /// all-reduce at level 0, of the sharded optimizer at levels 1-3; default
    /// [`DEFAULT_BUCKET_BYTES`]). Smaller buckets at level 2 hold fewer whole gradients at once.
    pub bucket_bytes: usize,
}

impl GptTrainConfig {
    /// The defaults on `data` (the corpus) with `save` as checkpoint folder.
    pub fn new(data: impl Into<PathBuf>, save: Option<PathBuf>) -> Self {
        GptTrainConfig {
            args: DEFAULTS,
            batch_size: DEFAULT_BATCH,
            lr: DEFAULT_LR,
            seed: 0,
            data: data.into(),
            save,
            checkpoint_every: None,
            keep_last: crate::mnist_job::DEFAULT_KEEP_LAST,
            resume: false,
            halt_after_step: None,
            log_dir: None,
            progress: false,
            dtype: DType::F32,
            precision: Precision::F32,
            shard: ShardLevel::Replicated,
            sharded_checkpoints: false,
            bucket_bytes: DEFAULT_BUCKET_BYTES,
        }
    }

    /// What a checkpoint of this run must agree with to be resumed: every option that changes
    /// the training (not the progress display, the sample length or the checkpoint options).
    pub fn run_config(&self) -> Value {
        let a = &self.args;
        json!({
            "job": "train-gpt",
            "steps": a.steps,
            "block_size": a.block_size,
            "n_layer": a.n_layer,
            "n_head": a.n_head,
            "n_embd": a.n_embd,
            "dropout": a.dropout,
            "warmup_steps": a.warmup_steps,
            "min_lr": a.min_lr,
            "weight_decay": a.weight_decay,
            "grad_clip": a.grad_clip,
            "eval_interval": a.eval_interval,
            "eval_iters": a.eval_iters,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "seed": self.seed,
            "data": self.data.display().to_string(),
            "dtype": self.dtype.to_string(),
            "precision": self.precision.name(),
        })
    }

    /// The default corpus, Debian's fortunes.
    pub fn default_data() -> PathBuf {
        PathBuf::from(FORTUNES_DIR)
    }
}

/// One loss estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalPoint {
    /// Optimisation steps done.
    pub step: usize,
    /// Mean loss (nats/token) on random training windows.
    pub train_loss: f64,
    /// Mean loss (nats/token) on random validation windows.
    pub val_loss: f64,
}

/// The outcome of [`run_gpt_training`].
#[derive(Clone, Debug, PartialEq)]
pub struct GptTrainReport {
    /// Loss estimates: before training, every eval interval and at the end.
    pub evals: Vec<EvalPoint>,
    /// Training throughput (tokens of the optimisation steps per second of them).
    pub tokens_per_s: f64,
    /// Wall time of the whole job, seconds.
    pub seconds: f64,
    /// Trainable parameters.
    pub parameters: usize,
    /// Tokens in the vocabulary.
    pub vocab_size: usize,
    /// Characters in the corpus.
    pub corpus_chars: usize,
    /// Sample text generated at the end.
    pub sample: String,
    /// Optimisation steps the f16 loss scaler skipped (overflowing gradients); 0 otherwise.
    pub skipped_steps: usize,
    /// The step of the checkpoint the run continued from (None: it started fresh).
    pub resumed_from_step: Option<u64>,
    /// The sharding level the run used.
    pub shard: ShardLevel,
    /// The most bytes of parameters, gradients and optimizer state any rank held at once.
    pub state_bytes_per_rank: usize,
    /// The largest rank's peak resident set size (0 where the system does not report it).
    pub peak_rss_bytes: u64,
    /// The largest rank's peak address space, what `ulimit -v` limits (0 where not reported).
    pub peak_virtual_bytes: u64,
    /// The number of ranks that trained together (1 without `--distributed`).
    pub world_size: usize,
}

impl EvalPoint {
    fn to_json(&self) -> Value {
        json!([
            self.step,
            f64_to_json(self.train_loss),
            f64_to_json(self.val_loss)
        ])
    }

    fn from_json(v: &Value) -> Result<Self> {
        Ok(EvalPoint {
            step: u64_from_json(&v[0], "evals[].step")? as usize,
            train_loss: f64_from_json(&v[1], "evals[].train_loss")?,
            val_loss: f64_from_json(&v[2], "evals[].val_loss")?,
        })
    }
}

/// Where a GPT run stands: what a checkpoint saves besides the model and optimizer state.
#[derive(Clone, Debug, PartialEq)]
struct GptProgress {
    /// Optimisation steps done.
    step: usize,
    /// The states of every rank's batch and evaluation samplers (rank order).
    rngs: Vec<(u64, u64)>,
    /// Steps skipped by the loss scaler, and its position (f16).
    skipped_steps: usize,
    scaler: Option<(f64, usize)>,
    /// The loss estimates so far.
    evals: Vec<EvalPoint>,
    /// Seconds and tokens of the training steps so far.
    train_seconds: f64,
    trained_tokens: usize,
    /// Sum and count of the step losses since the last logged `train/loss`.
    log_loss: f64,
    log_steps: usize,
}

impl GptProgress {
    /// Carries the progress of a run of `saved` ranks over to `ranks` ranks: the samplers of
    /// the ranks that exist on both sides continue, and the tokens per rank are scaled so that
    /// the throughput (all ranks' tokens over the training time) stays that of the saved run.
    fn rescale_ranks(&mut self, saved: usize, ranks: usize) {
        self.rngs.truncate(ranks);
        self.trained_tokens = self.trained_tokens * saved / ranks.max(1);
    }

    fn to_json(&self) -> Value {
        json!({
            "step": self.step,
            "rngs": self.rngs.iter().map(|(b, e)| json!([b, e])).collect::<Vec<_>>(),
            "skipped_steps": self.skipped_steps,
            "scaler": scaler_to_json(self.scaler),
            "evals": self.evals.iter().map(EvalPoint::to_json).collect::<Vec<_>>(),
            "train_seconds": f64_to_json(self.train_seconds),
            "trained_tokens": self.trained_tokens,
            "log_loss": f64_to_json(self.log_loss),
            "log_steps": self.log_steps,
        })
    }

    fn from_json(v: &Value) -> Result<Self> {
        let count = |key: &str| u64_from_json(&v[key], key);
        let scaler = scaler_from_json(&v["scaler"])?;
        let evals = v["evals"]
            .as_array()
            .ok_or_else(|| Error::checkpoint("checkpoint state `evals` is not a list"))?
            .iter()
            .map(EvalPoint::from_json)
            .collect::<Result<_>>()?;
        let rngs = v["rngs"]
            .as_array()
            .ok_or_else(|| Error::checkpoint("checkpoint state `rngs` is not a list"))?
            .iter()
            .map(|r| {
                Ok((
                    u64_from_json(&r[0], "rngs[].batch")?,
                    u64_from_json(&r[1], "rngs[].eval")?,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(GptProgress {
            step: count("step")? as usize,
            rngs,
            skipped_steps: count("skipped_steps")? as usize,
            scaler,
            evals,
            train_seconds: f64_from_json(&v["train_seconds"], "train_seconds")?,
            trained_tokens: count("trained_tokens")? as usize,
            log_loss: f64_from_json(&v["log_loss"], "log_loss")?,
            log_steps: count("log_steps")? as usize,
        })
    }
}

impl GptTrainReport {
    /// The last estimate.
    pub fn last(&self) -> &EvalPoint {
        self.evals.last().expect("at least the final estimate")
    }
}

/// Mean loss over `iters` random batches of `windows`, in evaluation mode, without gradients.
fn estimate_loss<B: Backend>(
    model: &Gpt<B>,
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

fn progress_bar(config: &GptTrainConfig) -> ProgressBar {
    let bar = ProgressBar::new(config.args.steps as u64);
    if !config.progress {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("gpt [{bar:30}] {pos}/{len} {msg} ({elapsed}, eta {eta})")
            .expect("static template is valid")
            .progress_chars("=> "),
    );
    bar
}

/// Steps between reads of the running loss (each read waits for the device).
const LOSS_READ_INTERVAL: usize = 10;

/// Trains a GPT on `config.data` with `backend`, printing loss estimates on stderr (and a
/// progress bar when asked), saving checkpoints, and returning the figures.
pub fn run_gpt_training<B: Backend>(
    config: &GptTrainConfig,
    backend: &B,
) -> Result<GptTrainReport> {
    run_gpt_training_with(config, backend, Arc::new(LocalCommunicator::new()))
}

/// The seed of rank `rank`'s stream derived from `seed` (rank 0's is `seed` itself, so that a
/// one-rank run draws what it always drew).
fn rank_stream(seed: u64, rank: usize) -> u64 {
    seed ^ (rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// [`run_gpt_training`] as one rank of a data-parallel run over `comm`: every rank starts from
/// rank 0's model, draws its own training windows (the global batch is `world_size *
/// batch_size` windows), averages its gradients with the others' before clipping, and
/// estimates the losses on its own windows (the estimates are averaged over the ranks); rank 0
/// alone prints, logs and saves.
pub fn run_gpt_training_with<B: Backend>(
    config: &GptTrainConfig,
    backend: &B,
    comm: Arc<dyn Communicator<B>>,
) -> Result<GptTrainReport> {
    let start = Instant::now();
    let (rank, world_size) = (comm.rank(), comm.world_size());
    let a = &config.args;
    if a.steps == 0 || config.batch_size == 0 || a.eval_interval == 0 {
        return Err(Error::InvalidArgument {
            op: "train",
            msg: "steps, batch size and eval interval must be at least 1".into(),
        });
    }
    let corpus = TextCorpus::load(&config.data)?;
    let tokenizer = CharTokenizer::from_text(&corpus.text);
    let ids = tokenizer.encode(&corpus.text)?;
    let (train, val) = TokenWindows::split(&ids, a.block_size, 16 * a.block_size, 10)?;
    let model_config = GptConfig::new(
        a.n_layer,
        a.n_head,
        a.n_embd,
        a.block_size,
        tokenizer.vocab_size(),
    )
    .dropout(a.dropout)
    .dtype(config.dtype)
    .precision(config.precision);
    // Rank 0's initial model on every rank.
    let ddp = DistributedDataParallel::with_config(
        model_config.init(backend, &mut Generator::new(config.seed))?,
        comm.clone(),
        DdpConfig {
            bucket_bytes: config.bucket_bytes,
            ..DdpConfig::default()
        },
    )?;
    let model = ddp.module();
    model.train();
    let say = |line: String| {
        if rank == 0 {
            eprintln!("{line}");
        }
    };
    say(format!(
        "gpt: {} parameters ({} layers, {} heads, width {}, context {}, {} compute), vocabulary \
         of {} characters, {} characters of text from {} file(s) of {} ({} train / {} \
         validation tokens)",
        model.num_parameters(),
        a.n_layer,
        a.n_head,
        a.n_embd,
        a.block_size,
        config.precision,
        tokenizer.vocab_size(),
        ids.len(),
        corpus.files.len(),
        config.data.display(),
        train.tokens(),
        val.tokens(),
    ));
    let mut optimizers = GptOptimizers::new(model, config, &comm)?;
    let params: Vec<Var<B>> = model.parameters().into_iter().map(|(_, v)| v).collect();
    let mut scaler = config
        .precision
        .needs_loss_scaling()
        .then(DynamicLossScaler::new);
    let cosine = CosineAnnealing::new(
        config.lr,
        a.steps.saturating_sub(a.warmup_steps).max(1),
        a.min_lr,
    )?;
    // Like nanoGPT, the first step already moves: (step + 1) / (warmup + 1) of the peak.
    let schedule = LinearWarmup::new(cosine, a.warmup_steps, 1.0 / (a.warmup_steps as f64 + 1.0))?;
    let mut batch_rng = SplitMix64::new(rank_stream(config.seed ^ 0x5eed_ba7c, rank));
    let mut eval_rng = SplitMix64::new(rank_stream(config.seed ^ 0xe7a1, rank));
    let estimate = |model: &Gpt<B>, step: usize, rng: &mut SplitMix64| -> Result<EvalPoint> {
        let batch = config.batch_size;
        let mut losses = [
            estimate_loss(model, &train, batch, a.eval_iters, rng, backend)?,
            estimate_loss(model, &val, batch, a.eval_iters, rng, backend)?,
        ];
        if world_size > 1 {
            comm.all_reduce_host(&mut losses, Reduction::Sum)?;
            losses = losses.map(|l| l / world_size as f64);
        }
        Ok(EvalPoint {
            step,
            train_loss: losses[0],
            val_loss: losses[1],
        })
    };
    // Every rank's sampler states, gathered exactly (32-bit halves in f64s, summed with zeros).
    let gather_rngs = |batch: &SplitMix64, eval: &SplitMix64| -> Result<Vec<(u64, u64)>> {
        let mut parts = vec![0.0; 4 * world_size];
        for (i, v) in [batch.state(), eval.state()].into_iter().enumerate() {
            parts[4 * rank + 2 * i] = (v >> 32) as f64;
            parts[4 * rank + 2 * i + 1] = (v & 0xffff_ffff) as f64;
        }
        if world_size > 1 {
            comm.all_reduce_host(&mut parts, Reduction::Sum)?;
        }
        let word = |hi: f64, lo: f64| ((hi as u64) << 32) | lo as u64;
        Ok(parts
            .chunks(4)
            .map(|p| (word(p[0], p[1]), word(p[2], p[3])))
            .collect())
    };

    // The run folder: a fresh run, or (with `resume`) the newest whole checkpoint's state.
    let mut run_config = config.run_config();
    run_config["world_size"] = world_size.into();
    let run_dir = match &config.save {
        Some(dir) => Some(RunDir::open(dir)?.keep_last(config.keep_last)),
        None => None,
    };
    let mut progress = None;
    if let Some(dir) = &run_dir {
        if config.resume {
            let groups = &mut optimizers.groups_mut();
            // The model and optimizer state load into any number of ranks.
            let elastic = &["world_size"];
            if let Some(found) =
                run::resume_allowing(dir, model, groups, &run_config, backend, elastic)?
            {
                for skipped in &found.skipped {
                    say(format!("warning: skipped a damaged checkpoint ({skipped})"));
                }
                say(format!(
                    "resuming from step {} ({})",
                    found.step,
                    found.path.display()
                ));
                let mut resumed = GptProgress::from_json(&found.state)?;
                let saved_world = found.config["world_size"].as_u64().unwrap_or(1) as usize;
                if saved_world != world_size {
                    say(format!(
                        "the checkpoint was written by {saved_world} rank(s), this run has \
                         {world_size}: the global batch becomes {world_size} x {}, and ranks \
                         from {saved_world} on draw fresh windows (the data order differs \
                         from an uninterrupted run)",
                        config.batch_size
                    ));
                    resumed.rescale_ranks(saved_world, world_size);
                }
                progress = Some((found.step, resumed));
            }
        } else {
            dir.ensure_no_checkpoints()?;
        }
    }
    // Level 3: the blocks' parameters become shares (of the restored values, if any).
    optimizers.release()?;
    let resumed_from_step = progress.as_ref().map(|(step, _)| *step);
    let mut progress = match progress {
        Some((_, p)) => {
            // A rank the checkpoint has no sampler state of (it was written by fewer ranks)
            // keeps its fresh streams.
            if let Some(&(b, e)) = p.rngs.get(rank) {
                batch_rng = SplitMix64::new(b);
                eval_rng = SplitMix64::new(e);
            }
            if let (Some(scaler), Some((scale, n))) = (scaler.as_mut(), p.scaler) {
                scaler.set_position(scale, n)?;
            }
            p
        }
        None => {
            let first = estimate(model, 0, &mut eval_rng)?;
            say(format!(
                "step {:>5}: train loss {:.4}, val loss {:.4}",
                0, first.train_loss, first.val_loss
            ));
            GptProgress {
                step: 0,
                rngs: Vec::new(),
                skipped_steps: 0,
                scaler: None,
                evals: vec![first],
                train_seconds: 0.0,
                trained_tokens: 0,
                log_loss: 0.0,
                log_steps: 0,
            }
        }
    };

    // The scalars (after a resume, without what the killed process logged later).
    let mut metrics = match &config.log_dir {
        Some(dir) if rank == 0 => Some(MetricsLog::open_resumed(dir, resumed_from_step)?),
        _ => None,
    };
    if let (Some(log), None) = (metrics.as_mut(), resumed_from_step) {
        let first = &progress.evals[0];
        log.log(
            0,
            &[
                ("train/estimated_loss", first.train_loss),
                ("val/loss", first.val_loss),
            ],
        )?;
    }
    let bar = progress_bar(config);
    if rank != 0 {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_position(progress.step as u64);
    let tokens_per_step = config.batch_size * a.block_size;
    let mut pending: Vec<Tensor<B>> = Vec::new();
    let (mut running, mut running_n) = (0.0, 0usize);
    for step in progress.step..a.steps {
        let step_start = Instant::now();
        let lr = schedule.lr_at(step);
        optimizers.set_learning_rate(lr);
        let (x, y) = train.random_batch(config.batch_size, &mut batch_rng, backend)?;
        optimizers.zero_grad();
        let loss = model.loss(&x, &y)?;
        // With f16, the scaled loss is differentiated and the gradients unscaled before they
        // are clipped (PyTorch's order); a step whose gradients overflowed is skipped. Several
        // ranks average their gradients first, so they clip, skip and step alike.
        let apply = match scaler.as_mut() {
            Some(scaler) => {
                scaler.scale_loss(&loss)?.backward()?;
                optimizers.sync_gradients(&ddp)?;
                optimizers.unscale(scaler, &params, &*comm)? == ScalerStep::Apply
            }
            None => {
                loss.backward()?;
                optimizers.sync_gradients(&ddp)?;
                true
            }
        };
        let log_due = (step + 1) % LOSS_READ_INTERVAL == 0 || step + 1 == a.steps;
        let log_now = metrics.is_some() && log_due;
        let mut norm = None;
        if apply {
            if a.grad_clip > 0.0 {
                norm = Some(optimizers.clip(a.grad_clip, &params, &*comm)?);
            } else if log_now || (config.log_dir.is_some() && log_due) {
                // Every rank takes part (the norm of a sharded state is a collective).
                norm = Some(optimizers.norm(&params, &*comm)?);
            }
            optimizers.step()?;
        } else {
            progress.skipped_steps += 1;
        }
        pending.push(loss.value());
        let done = step + 1;
        let estimate_now = done % a.eval_interval == 0 || done == a.steps;
        let checkpoint_now = run_dir.is_some()
            && (estimate_now
                || config
                    .checkpoint_every
                    .is_some_and(|every| every > 0 && done % every == 0));
        if done % LOSS_READ_INTERVAL == 0 || done == a.steps || checkpoint_now {
            // Added in step order whenever read: the same sums after a resume.
            for l in pending.drain(..) {
                let value = l.to_scalar_f64()?;
                running += value;
                running_n += 1;
                progress.log_loss += value;
                progress.log_steps += 1;
            }
        }
        backend.synchronize()?;
        progress.train_seconds += step_start.elapsed().as_secs_f64();
        progress.trained_tokens += tokens_per_step;
        progress.step = step + 1;
        // Over all ranks (they step in lockstep).
        let rate = (progress.trained_tokens * world_size) as f64 / progress.train_seconds;
        if let Some(log) = metrics.as_mut().filter(|_| log_now) {
            let mut values = vec![
                (
                    "train/loss",
                    progress.log_loss / progress.log_steps.max(1) as f64,
                ),
                ("train/lr", lr),
                ("train/tokens_per_s", rate),
            ];
            // A skipped f16 step has no gradient norm (its gradients overflowed).
            if let Some(norm) = norm {
                values.push(("train/grad_norm", norm));
            }
            if let Some(scaler) = &scaler {
                values.push(("train/loss_scale", scaler.scale()));
            }
            log.log(progress.step as u64, &values)?;
            (progress.log_loss, progress.log_steps) = (0.0, 0);
        }
        if running_n > 0 {
            bar.set_message(format!(
                "loss {:.4} | lr {lr:.2e} | {rate:.0} tok/s",
                running / running_n as f64
            ));
        }
        bar.inc(1);
        if estimate_now {
            (running, running_n) = (0.0, 0);
            let point = estimate(model, done, &mut eval_rng)?;
            bar.suspend(|| {
                say(format!(
                    "step {done:>5}: train loss {:.4}, val loss {:.4}, {rate:.0} tokens/s",
                    point.train_loss, point.val_loss
                ))
            });
            if let Some(dir) = &config.save {
                let info = serde_json::json!({
                    "step": done,
                    "train_loss": point.train_loss,
                    "val_loss": point.val_loss,
                    "batch_size": config.batch_size,
                    "lr": config.lr,
                    "seed": config.seed,
                    "precision": config.precision.name(),
                    "data": config.data.display().to_string(),
                    "backend": backend.name(),
                });
                // Level 3 holds the parameters whole while rank 0 writes them.
                optimizers.hold()?;
                let saved = save_on_rank0(&*comm, || save_checkpoint(dir, model, &tokenizer, info));
                optimizers.release()?;
                saved?;
            }
            if let Some(log) = metrics.as_mut() {
                let values = [
                    ("train/estimated_loss", point.train_loss),
                    ("val/loss", point.val_loss),
                ];
                log.log(done as u64, &values)?;
            }
            progress.evals.push(point);
        }
        if let Some(dir) = run_dir.as_ref().filter(|_| checkpoint_now) {
            progress.rngs = gather_rngs(&batch_rng, &eval_rng)?;
            progress.scaler = scaler.as_ref().map(DynamicLossScaler::position);
            let state = progress.to_json();
            let step = done as u64;
            if config.sharded_checkpoints {
                // Every rank writes its own shares; nothing is gathered.
                let groups = &optimizers.groups();
                bar.suspend(|| {
                    run::save_sharded_checkpoint(
                        dir,
                        step,
                        model,
                        groups,
                        &run_config,
                        &state,
                        &*comm,
                    )
                })?;
            } else if world_size > 1 {
                // A sharded state is gathered a bucket at a time (a collective), level 3's
                // parameters whole.
                optimizers.hold()?;
                let groups = &optimizers.groups();
                let saved = bar.suspend(|| {
                    run::save_gathered_checkpoint(
                        dir,
                        step,
                        model,
                        groups,
                        &run_config,
                        &state,
                        &*comm,
                    )
                });
                optimizers.release()?;
                saved?;
            } else {
                // One rank: a sharded state is its whole state, gathered from itself.
                optimizers.prepare_checkpoint()?;
                let groups = &optimizers.groups();
                let saved = bar.suspend(|| {
                    run::save_checkpoint(dir, step, model, groups, &run_config, &state)
                });
                optimizers.finish_checkpoint()?;
                saved?;
            }
        }
        if config.halt_after_step == Some(done) {
            std::process::exit(crate::mnist_job::HALT_EXIT_CODE);
        }
    }
    bar.finish_and_clear();

    let mut sample = String::new();
    // Level 3: every rank gathers the whole model (rank 0 samples from it).
    optimizers.hold()?;
    if a.sample_chars > 0 && rank == 0 {
        let first: String = corpus.text.chars().take(1).collect();
        let prompt = tokenizer
            .encode("\n")
            .or_else(|_| tokenizer.encode(&first))?;
        let mut sampler = SamplingConfig::new()
            .temperature(0.8)
            .top_k(Some(20))
            .seed(config.seed)
            .sampler()?;
        let report = generate(model, &prompt, a.sample_chars, &mut sampler, &mut |_| {})?;
        sample = tokenizer.decode(&report.tokens)?;
    }
    let mut memory = [
        optimizers.state_bytes(&params) as f64,
        peak_rss_bytes() as f64,
        peak_virtual_bytes() as f64,
    ];
    max_over_ranks(&*comm, &mut memory)?;
    Ok(GptTrainReport {
        evals: progress.evals,
        tokens_per_s: (progress.trained_tokens * world_size) as f64
            / progress.train_seconds.max(1e-9),
        seconds: start.elapsed().as_secs_f64(),
        parameters: model.num_parameters(),
        vocab_size: tokenizer.vocab_size(),
        corpus_chars: ids.len(),
        sample,
        skipped_steps: progress.skipped_steps,
        resumed_from_step,
        world_size,
        shard: config.shard,
        state_bytes_per_rank: memory[0] as usize,
        peak_rss_bytes: memory[1] as u64,
        peak_virtual_bytes: memory[2] as u64,
    })
}
