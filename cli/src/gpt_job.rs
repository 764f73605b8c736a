//! The training job behind `train --model gpt`: a character-level GPT on a text corpus (by
//! default Debian's `fortunes`), with AdamW (decay on matrices only), linear warm-up then
//! cosine decay, gradient clipping, periodic train/validation loss estimates, tokens/s, a
//! progress bar and checkpoint folders that `generate` reads. Under `--precision bf16|f16` the
//! attention and linear layers compute in 16 bits with f32 master weights and optimizer state
//! (see [`tessera_nn::precision`]); f16 adds a [`DynamicLossScaler`].

use crate::text_training::{train_text_model, TextJob};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;
use tessera_core::{Backend, DType, Error, Generator, Result};
use tessera_nn::data::{CharTokenizer, TextCorpus, TokenWindows, FORTUNES_DIR};
use tessera_nn::distributed::{
    Communicator, LocalCommunicator, ShardLevel, ShardedUnits, DEFAULT_BUCKET_BYTES,
};
use tessera_nn::gpt::{generate, save_checkpoint_gathered, Gpt, GptConfig, SamplingConfig};
use tessera_nn::precision::Precision;
use tessera_nn::run::{f64_from_json, f64_to_json, u64_from_json};
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
    /// At level 3: each unit's gather starts while the unit before it computes
    /// ([`tessera_nn::distributed::ShardedUnits::set_prefetch`]; one more unit's parameters
    /// held at once).
    pub shard_prefetch: bool,
    /// At levels 2 and 3: each bucket's reduction during backward is started and the pass
    /// computes on meanwhile
    /// ([`tessera_nn::distributed::ShardedOptimizer::set_overlap_reductions`]; the same bits).
    pub overlap_reductions: bool,
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
            shard_prefetch: false,
            overlap_reductions: false,
            sharded_checkpoints: false,
            bucket_bytes: DEFAULT_BUCKET_BYTES,
        }
    }

    /// Errors (as `op`'s) unless the steps, batch size and eval interval are at least 1.
    pub fn check_counts(&self, op: &'static str) -> Result<()> {
        let a = &self.args;
        if a.steps == 0 || self.batch_size == 0 || a.eval_interval == 0 {
            return Err(Error::InvalidArgument {
                op,
                msg: "steps, batch size and eval interval must be at least 1".into(),
            });
        }
        Ok(())
    }

    /// What a checkpoint of this run must agree with to be resumed: every option that changes
    /// the training (not the progress display, the sample length or the checkpoint options).
    pub fn run_config(&self) -> Value {
        let a = &self.args;
        let mut config = self.recipe_config();
        config["job"] = "train-gpt".into();
        config["n_layer"] = a.n_layer.into();
        config["n_head"] = a.n_head.into();
        config["n_embd"] = a.n_embd.into();
        config["dropout"] = a.dropout.into();
        config["dtype"] = self.dtype.to_string().into();
        config
    }

    /// The options of the training recipe both text jobs share (steps, context, schedule,
    /// clipping, evaluation, batch, learning rate, seed, data and precision): the part of
    /// [`GptTrainConfig::run_config`] that is not the model's.
    pub fn recipe_config(&self) -> Value {
        let a = &self.args;
        json!({
            "steps": a.steps,
            "block_size": a.block_size,
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
    pub(crate) fn to_json(&self) -> Value {
        json!([
            self.step,
            f64_to_json(self.train_loss),
            f64_to_json(self.val_loss)
        ])
    }

    pub(crate) fn from_json(v: &Value) -> Result<Self> {
        Ok(EvalPoint {
            step: u64_from_json(&v[0], "evals[].step")? as usize,
            train_loss: f64_from_json(&v[1], "evals[].train_loss")?,
            val_loss: f64_from_json(&v[2], "evals[].val_loss")?,
        })
    }
}

impl GptTrainReport {
    /// The last estimate.
    pub fn last(&self) -> &EvalPoint {
        self.evals.last().expect("at least the final estimate")
    }
}

/// Trains a GPT on `config.data` with `backend`, printing loss estimates on stderr (and a
/// progress bar when asked), saving checkpoints, and returning the figures.
pub fn run_gpt_training<B: Backend>(
    config: &GptTrainConfig,
    backend: &B,
) -> Result<GptTrainReport> {
    run_gpt_training_with(config, backend, Arc::new(LocalCommunicator::new()))
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
    let a = &config.args;
    config.check_counts("train")?;
    let corpus = TextCorpus::load(&config.data)?;
    let tokenizer = CharTokenizer::from_text(&corpus.text);
    let ids = tokenizer.encode(&corpus.text)?;
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
    let mut generator = Generator::new(config.seed);
    // Level 3 builds the blocks without their values: each rank gives them one at a time
    // and keeps its share, so that no rank holds the whole model (the same values).
    let model = if config.shard == ShardLevel::Parameters {
        model_config.init_deferred(backend, &mut generator)?
    } else {
        model_config.init(backend, &mut generator)?
    };
    let job = CharGptJob {
        config,
        tokenizer,
        corpus_chars: ids.len(),
        files: corpus.files.len(),
        first_char: corpus.text.chars().take(1).collect(),
    };
    train_text_model(config, backend, comm, &job, model, &ids, start)
}

/// `train --model gpt`'s part of the text loop: a character-level GPT, saved with its
/// tokenizer by [`save_checkpoint`], sampled at the end.
struct CharGptJob<'a> {
    config: &'a GptTrainConfig,
    tokenizer: CharTokenizer,
    corpus_chars: usize,
    files: usize,
    /// The corpus's first character: the sample's prompt where the text has no newline.
    first_char: String,
}

impl<B: Backend> TextJob<B> for CharGptJob<'_> {
    type Model = Gpt<B>;

    fn label(&self) -> &str {
        "gpt"
    }

    fn run_config(&self) -> Value {
        self.config.run_config()
    }

    fn describe(&self, model: &Gpt<B>, train: &TokenWindows, val: &TokenWindows) -> String {
        let (a, config) = (&self.config.args, self.config);
        format!(
            "gpt: {} parameters ({} layers, {} heads, width {}, context {}, {} compute), \
             vocabulary of {} characters, {} characters of text from {} file(s) of {} ({} train \
             / {} validation tokens)",
            model.num_parameters(),
            a.n_layer,
            a.n_head,
            a.n_embd,
            a.block_size,
            config.precision,
            self.tokenizer.vocab_size(),
            self.corpus_chars,
            self.files,
            config.data.display(),
            train.tokens(),
            val.tokens(),
        )
    }

    fn save_model(
        &self,
        dir: &Path,
        model: &Gpt<B>,
        info: Value,
        units: Option<&ShardedUnits<B>>,
        comm: &dyn Communicator<B>,
    ) -> Result<()> {
        save_checkpoint_gathered(dir, model, units, &self.tokenizer, info, comm)
    }

    fn samples(&self, config: &GptTrainConfig) -> bool {
        config.args.sample_chars > 0
    }

    fn sample(&self, model: &Gpt<B>, config: &GptTrainConfig) -> Result<String> {
        let prompt = self
            .tokenizer
            .encode("\n")
            .or_else(|_| self.tokenizer.encode(&self.first_char))?;
        let mut sampler = SamplingConfig::new()
            .temperature(0.8)
            .top_k(Some(20))
            .seed(config.seed)
            .sampler()?;
        let n = config.args.sample_chars;
        let tokens = generate(model, &prompt, n, &mut sampler, &mut |_| {})?.tokens;
        self.tokenizer.decode(&tokens)
    }
}
