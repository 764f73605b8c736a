//! The training loop of the text models, shared by `train --model gpt` (a character-level GPT
//! built from scratch, [`crate::gpt_job`]) and `train --init-from DIR` (a Hugging Face GPT-2
//! or Llama fine-tuned, [`crate::finetune_job`]): AdamW (decay on matrices only), linear
//! warm-up then cosine decay, gradient clipping, periodic train/validation loss estimates,
//! tokens/s and a progress bar; f16 with a [`DynamicLossScaler`]; data parallel over a
//! [`Communicator`] at every [`ShardLevel`]; whole-run checkpoints that `--resume` continues
//! bit for bit; TensorBoard scalars. What differs between the jobs is a [`TextJob`]: the
//! model, how its folder is written for `generate`, and the sample printed at the end.

use crate::gpt_job::{EvalPoint, GptTrainConfig, GptTrainReport};
use crate::gpt_optimizers::GptOptimizers;
use crate::memory::{max_over_ranks, peak_rss_bytes, peak_virtual_bytes};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, Error, Result, Tensor};
use tessera_nn::data::{SplitMix64, TokenWindows};
use tessera_nn::distributed::{
    Communicator, DdpConfig, DistributedDataParallel, Reduction, ShardedUnits,
};
use tessera_nn::gpt::Gpt;
use tessera_nn::precision::{DynamicLossScaler, ScalerStep};
use tessera_nn::pretrained::PretrainedModel;
use tessera_nn::run::{
    self, f64_from_json, f64_to_json, scaler_from_json, scaler_to_json, u64_from_json, MetricsLog,
    RunDir,
};
use tessera_nn::schedule::{CosineAnnealing, LinearWarmup, LrSchedule};
use tessera_nn::Module;

/// A causal language model the loop trains: next-token cross-entropy over token windows, and
/// transformer blocks that `--shard 3` gathers one at a time.
pub trait LanguageModel<B: Backend>: Module<B> {
    /// The mean next-token cross-entropy of `idx` against `targets` (both i64 `[batch, t]`).
    fn loss(&self, idx: &Tensor<B>, targets: &Tensor<B>) -> Result<Var<B>>;

    /// Tokens in the vocabulary.
    fn vocab_size(&self) -> usize;

    /// The parameter-name prefix of each block: the units of [`LanguageModel::shard_blocks`].
    fn block_prefixes(&self) -> Vec<String>;

    /// Runs every block through `units` from now on (sharding level 3).
    fn shard_blocks(&self, units: Arc<ShardedUnits<B>>) -> Result<()>;

    /// Gives block `block` its initial values if the model was built without them (a deferred
    /// build, which level 3 uses so that no rank holds the whole model); otherwise nothing.
    fn init_block(&self, block: usize) -> Result<()>;
}

impl<B: Backend> LanguageModel<B> for Gpt<B> {
    fn loss(&self, idx: &Tensor<B>, targets: &Tensor<B>) -> Result<Var<B>> {
        Gpt::loss(self, idx, targets)
    }

    fn vocab_size(&self) -> usize {
        self.config().vocab_size
    }

    fn block_prefixes(&self) -> Vec<String> {
        Gpt::block_prefixes(self)
    }

    fn shard_blocks(&self, units: Arc<ShardedUnits<B>>) -> Result<()> {
        Gpt::shard_blocks(self, units)
    }

    fn init_block(&self, block: usize) -> Result<()> {
        if self.is_deferred() {
            Gpt::init_block(self, block)?;
        }
        Ok(())
    }
}

impl<B: Backend> LanguageModel<B> for PretrainedModel<B> {
    fn loss(&self, idx: &Tensor<B>, targets: &Tensor<B>) -> Result<Var<B>> {
        PretrainedModel::loss(self, idx, targets)
    }

    fn vocab_size(&self) -> usize {
        PretrainedModel::vocab_size(self)
    }

    fn block_prefixes(&self) -> Vec<String> {
        PretrainedModel::block_prefixes(self)
    }

    fn shard_blocks(&self, units: Arc<ShardedUnits<B>>) -> Result<()> {
        PretrainedModel::shard_blocks(self, units)
    }

    fn init_block(&self, block: usize) -> Result<()> {
        // A deferred load reads the block from the folder; loaded whole, it has its values.
        if self.is_deferred() {
            self.load_block(block)?;
        }
        Ok(())
    }
}

/// What one text job adds to the shared loop.
pub trait TextJob<B: Backend> {
    /// The model trained.
    type Model: LanguageModel<B>;

    /// The progress bar's label.
    fn label(&self) -> &str;

    /// What a checkpoint of this run must agree with to be resumed (every option that changes
    /// the training; see [`GptTrainConfig::run_config`]).
    fn run_config(&self) -> Value;

    /// The line printed (by rank 0) before training: the model and the data.
    fn describe(&self, model: &Self::Model, train: &TokenWindows, val: &TokenWindows) -> String;

    /// Writes the model's folder, what `generate` reads, into `dir` from rank 0 (a collective
    /// over `comm`, at every loss estimate; `info` holds the step, losses and options). A
    /// level-3 model's `units` are released: gather them to rank 0 as it needs them.
    fn save_model(
        &self,
        dir: &Path,
        model: &Self::Model,
        info: Value,
        units: Option<&ShardedUnits<B>>,
        comm: &dyn Communicator<B>,
    ) -> Result<()>;

    /// Whether [`TextJob::sample`] draws from the model at the end of the run.
    fn samples(&self, config: &GptTrainConfig) -> bool;

    /// Text sampled from the trained model at the end, with a key/value cache (called only
    /// when [`TextJob::samples`]): on rank 0 alone, or at level 3 on every rank at once (each
    /// block runs on the rank that holds it, `ShardedUnits::hold_by_owners`, and every rank
    /// draws the same tokens).
    fn sample(&self, model: &Self::Model, config: &GptTrainConfig) -> Result<String>;
}

/// Where a text run stands: what a checkpoint saves besides the model and optimizer state.
#[derive(Clone, Debug, PartialEq)]
struct TextProgress {
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

impl TextProgress {
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
        Ok(TextProgress {
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

/// Mean loss over `iters` random batches of `windows`, in evaluation mode, without gradients.
fn estimate_loss<B: Backend, M: LanguageModel<B>>(
    model: &M,
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

fn progress_bar(config: &GptTrainConfig, label: &str) -> ProgressBar {
    let bar = ProgressBar::new(config.args.steps as u64);
    if !config.progress {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{label} [{{bar:30}}] {{pos}}/{{len}} {{msg}} ({{elapsed}}, eta {{eta}})"
        ))
        .expect("the template is valid")
        .progress_chars("=> "),
    );
    bar
}

/// Steps between reads of the running loss (each read waits for the device).
const LOSS_READ_INTERVAL: usize = 10;

/// The seed of rank `rank`'s stream derived from `seed` (rank 0's is `seed` itself, so that a
/// one-rank run draws what it always drew).
fn rank_stream(seed: u64, rank: usize) -> u64 {
    seed ^ (rank as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// Trains `model` on the token ids `ids` of a corpus (split into training and validation
/// windows of `block_size` tokens, the losses estimated on both) as one rank of a
/// data-parallel run over `comm`: every rank starts from rank 0's model, draws its
/// own training windows (the global batch is `world_size * batch_size` windows), averages its
/// gradients with the others' before clipping, and estimates the losses on its own windows
/// (the estimates are averaged over the ranks); rank 0 alone prints, logs and saves. With
/// `config.resume`, continues from the newest whole checkpoint in `config.save`. The report's
/// `seconds` count from `start`.
pub fn train_text_model<B: Backend, J: TextJob<B>>(
    config: &GptTrainConfig,
    backend: &B,
    comm: Arc<dyn Communicator<B>>,
    job: &J,
    model: J::Model,
    ids: &[usize],
    start: Instant,
) -> Result<GptTrainReport> {
    let (rank, world_size) = (comm.rank(), comm.world_size());
    let a = &config.args;
    config.check_counts("train")?;
    let (train, val) = TokenWindows::split(ids, a.block_size, 16 * a.block_size, 10)?;
    // Rank 0's initial model on every rank.
    let ddp = DistributedDataParallel::with_config(
        model,
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
    say(job.describe(model, &train, &val));
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
    let estimate = |model: &J::Model, step: usize, rng: &mut SplitMix64| -> Result<EvalPoint> {
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
    let mut run_config = job.run_config();
    run_config["world_size"] = world_size.into();
    let run_dir = match &config.save {
        Some(dir) => Some(RunDir::open(dir)?.keep_last(config.keep_last)),
        None => None,
    };
    let mut progress = None;
    if let Some(dir) = &run_dir {
        if config.resume {
            let units = optimizers.shared_units();
            let groups = &mut optimizers.groups_mut();
            // The model and optimizer state load into any number of ranks; level 3 reads the
            // blocks one at a time, each rank keeping its shares.
            let elastic = &["world_size"];
            let found = match &units {
                Some(units) => {
                    run::resume_sharded(dir, model, units, groups, &run_config, backend, elastic)?
                }
                None => run::resume_allowing(dir, model, groups, &run_config, backend, elastic)?,
            };
            if let Some(found) = found {
                for skipped in &found.skipped {
                    say(format!("warning: skipped a damaged checkpoint ({skipped})"));
                }
                say(format!(
                    "resuming from step {} ({})",
                    found.step,
                    found.path.display()
                ));
                let mut resumed = TextProgress::from_json(&found.state)?;
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
    // Level 3 on a fresh run: the blocks' parameters become shares of each block's initial
    // values, given one block at a time (a resume has given them the restored ones).
    if progress.is_none() {
        optimizers.initialize(&mut |block| model.init_block(block))?;
    }
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
            TextProgress {
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
    let bar = progress_bar(config, job.label());
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
                job.save_model(dir, model, info, optimizers.units(), &*comm)?;
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
                // A sharded state is gathered to rank 0 a bucket at a time (a collective),
                // level 3's parameters a block at a time.
                let groups = &optimizers.groups();
                bar.suspend(|| {
                    run::save_gathered_checkpoint(
                        dir,
                        step,
                        model,
                        optimizers.units(),
                        groups,
                        &run_config,
                        &state,
                        &*comm,
                    )
                })?;
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

    // Level 3: every rank samples, each holding its own run of blocks whole and passing the
    // activations on (pipelined), so that no rank holds the whole model (a model that trains
    // only sharded also samples); rank 0 reports it.
    let units = optimizers.shared_units();
    let sample = if job.samples(config) && (units.is_some() || rank == 0) {
        let text = match units {
            Some(units) => {
                units.hold_by_owners()?;
                let text = job.sample(model, config);
                units.release_all()?;
                text?
            }
            None => job.sample(model, config)?,
        };
        if rank == 0 {
            text
        } else {
            String::new()
        }
    } else {
        String::new()
    };
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
        vocab_size: model.vocab_size(),
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
