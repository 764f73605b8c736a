//! The training job behind `train --model mlp|cnn`: data, model, optimizer, epochs,
//! evaluation, whole-run checkpoints (resumable bit for bit, see [`tessera_nn::run`]) and a
//! summary.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tessera_core::{Backend, DType, Error, Result};
use tessera_nn::clip::grad_norm;
use tessera_nn::data::{
    DataLoader, Dataset, LoaderConfig, MnistDataset, MnistLike, Normalization, Split, Subset,
};
use tessera_nn::distributed::{
    save_on_rank0, Communicator, DistributedDataParallel, DistributedSampler, LocalCommunicator,
    Reduction,
};
use tessera_nn::models::ModelKind;
use tessera_nn::optim::{Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};
use tessera_nn::precision::{DynamicLossScaler, Precision};
use tessera_nn::run::{self, f64_from_json, f64_to_json, u64_from_json, MetricsLog, RunDir};
use tessera_nn::schedule::{CosineAnnealing, LrSchedule};
use tessera_nn::training::{evaluate, train_step, train_step_scaled, train_step_scaled_across};
use tessera_nn::{Forward, Module};

/// Which optimizer the job uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OptimizerKind {
    /// SGD with momentum 0.9.
    Sgd,
    /// Adam.
    Adam,
    /// AdamW (weight decay 0.01).
    AdamW,
}

/// How the learning rate evolves over the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScheduleKind {
    /// The same learning rate throughout.
    Constant,
    /// Cosine annealing from the learning rate to 0 over all steps.
    Cosine,
}

/// Everything a training job needs to know.
#[derive(Clone, Debug)]
pub struct TrainConfig {
    /// The model to train.
    pub model: ModelKind,
    /// Number of passes over the training set.
    pub epochs: usize,
    /// Samples per optimisation step and rank (a data-parallel step of `W` ranks uses
    /// `W * batch_size` samples).
    pub batch_size: usize,
    /// Learning rate.
    pub lr: f64,
    /// The optimizer.
    pub optimizer: OptimizerKind,
    /// Learning-rate schedule over the whole run.
    pub schedule: ScheduleKind,
    /// Seed of initialisation and shuffling.
    pub seed: u64,
    /// Folder with the (Fashion-)MNIST IDX files.
    pub data_dir: PathBuf,
    /// The run folder, if any: `model.safetensors` (the newest model), `run.json` and
    /// `checkpoints/` (the whole run's state after every epoch and every
    /// `checkpoint_every` steps; see [`tessera_nn::run`]).
    pub save: Option<PathBuf>,
    /// Also checkpoint every N optimisation steps (None: at the end of each epoch only).
    pub checkpoint_every: Option<usize>,
    /// How many checkpoints the run folder keeps.
    pub keep_last: usize,
    /// Continue from the newest whole checkpoint in `save` (a fresh run when there is none).
    pub resume: bool,
    /// Where to log the run's scalars for TensorBoard (event files) and as `metrics.jsonl`
    /// (rank 0), if anywhere (see [`MetricsLog`]).
    pub log_dir: Option<PathBuf>,
    /// Exits the process (status [`HALT_EXIT_CODE`]) right after this many optimisation steps
    /// and any checkpoint of that step, as a kill would: how tests interrupt a run.
    pub halt_after_step: Option<usize>,
    /// Use only the first N training samples (quick runs).
    pub train_limit: Option<usize>,
    /// Use only the first N test samples (quick runs).
    pub test_limit: Option<usize>,
    /// Show progress bars on a terminal.
    pub progress: bool,
    /// The dtype the linear layers compute in (parameters and optimizer state stay f32);
    /// f16 trains with a [`DynamicLossScaler`].
    pub precision: Precision,
}

/// The exit status of a run stopped by [`TrainConfig::halt_after_step`].
pub const HALT_EXIT_CODE: i32 = 75;

/// The defaults of the checkpoint options: no run folder, a checkpoint per epoch, 3 kept.
pub const DEFAULT_KEEP_LAST: usize = 3;

impl TrainConfig {
    /// What a checkpoint of this run must agree with to be resumed: every option that changes
    /// the result (not the progress display or the checkpoint options).
    pub fn run_config(&self, world_size: usize) -> Value {
        json!({
            "job": "train",
            "model": format!("{:?}", self.model).to_lowercase(),
            "epochs": self.epochs,
            "batch_size": self.batch_size,
            "lr": self.lr,
            "optimizer": format!("{:?}", self.optimizer).to_lowercase(),
            "schedule": format!("{:?}", self.schedule).to_lowercase(),
            "seed": self.seed,
            "data_dir": self.data_dir.display().to_string(),
            "train_limit": self.train_limit,
            "test_limit": self.test_limit,
            "precision": self.precision.name(),
            "world_size": world_size,
        })
    }
}

/// Per-epoch figures.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochReport {
    /// 1-based epoch number.
    pub epoch: usize,
    /// Mean training loss over the epoch.
    pub train_loss: f64,
    /// Training throughput (samples per second, training steps only; over all ranks).
    pub samples_per_s: f64,
    /// Test-set accuracy after the epoch.
    pub test_accuracy: f64,
}

/// The outcome of [`run_training`].
#[derive(Clone, Debug, PartialEq)]
pub struct TrainReport {
    /// One entry per epoch.
    pub epochs: Vec<EpochReport>,
    /// Total wall time in seconds, data loading included.
    pub seconds: f64,
    /// The number of ranks that trained together (1 without `--distributed`).
    pub world_size: usize,
    /// The step of the checkpoint the run continued from (None: it started fresh).
    pub resumed_from_step: Option<u64>,
    /// The run folder, when the run saved one.
    pub checkpoint: Option<PathBuf>,
}

impl EpochReport {
    fn to_json(&self) -> Value {
        json!({
            "epoch": self.epoch,
            "train_loss": f64_to_json(self.train_loss),
            "samples_per_s": f64_to_json(self.samples_per_s),
            "test_accuracy": f64_to_json(self.test_accuracy),
        })
    }

    fn from_json(v: &Value) -> Result<Self> {
        Ok(EpochReport {
            epoch: u64_from_json(&v["epoch"], "epochs[].epoch")? as usize,
            train_loss: f64_from_json(&v["train_loss"], "epochs[].train_loss")?,
            samples_per_s: f64_from_json(&v["samples_per_s"], "epochs[].samples_per_s")?,
            test_accuracy: f64_from_json(&v["test_accuracy"], "epochs[].test_accuracy")?,
        })
    }
}

/// Where a run stands: what a checkpoint saves besides the model and optimizer state.
#[derive(Clone, Debug, Default, PartialEq)]
struct Progress {
    /// Optimisation steps done.
    global_step: usize,
    /// The epoch under way (0-based; `epochs` when done).
    epoch: usize,
    /// Batches of that epoch done.
    batch_in_epoch: usize,
    /// Sum of `loss * batch size` over this rank's batches of that epoch, and their samples.
    loss_sum: f64,
    samples: usize,
    /// Every rank's `(loss_sum, samples)` when the checkpoint was taken (the ranks' sums
    /// differ: each restores its own); empty on one rank.
    ranks: Vec<(f64, usize)>,
    /// Seconds spent in that epoch's training steps so far.
    train_seconds: f64,
    /// The loss scaler's position (f16).
    scaler: Option<(f64, usize)>,
    /// Sum of `loss * batch size` and samples since the last logged `train/loss`.
    log_loss: f64,
    log_samples: usize,
    /// The finished epochs.
    epochs: Vec<EpochReport>,
}

impl Progress {
    fn to_json(&self) -> Value {
        json!({
            "global_step": self.global_step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "loss_sum": f64_to_json(self.loss_sum),
            "samples": self.samples,
            "ranks": self.ranks.iter().map(|(l, n)| json!([f64_to_json(*l), n])).collect::<Vec<_>>(),
            "train_seconds": f64_to_json(self.train_seconds),
            "scaler": self.scaler.map(|(scale, n)| json!([f64_to_json(scale), n])),
            "log_loss": f64_to_json(self.log_loss),
            "log_samples": self.log_samples,
            "epochs": self.epochs.iter().map(EpochReport::to_json).collect::<Vec<_>>(),
        })
    }

    fn from_json(v: &Value) -> Result<Self> {
        let count = |key: &str| u64_from_json(&v[key], key).map(|n| n as usize);
        let scaler = match &v["scaler"] {
            Value::Null => None,
            s => Some((
                f64_from_json(&s[0], "scaler.scale")?,
                u64_from_json(&s[1], "scaler.finite_steps")? as usize,
            )),
        };
        let epochs = v["epochs"]
            .as_array()
            .ok_or_else(|| Error::checkpoint("checkpoint state `epochs` is not a list"))?
            .iter()
            .map(EpochReport::from_json)
            .collect::<Result<_>>()?;
        let ranks = v["ranks"]
            .as_array()
            .ok_or_else(|| Error::checkpoint("checkpoint state `ranks` is not a list"))?
            .iter()
            .map(|r| {
                Ok((
                    f64_from_json(&r[0], "ranks[].loss_sum")?,
                    u64_from_json(&r[1], "ranks[].samples")? as usize,
                ))
            })
            .collect::<Result<_>>()?;
        Ok(Progress {
            ranks,
            global_step: count("global_step")?,
            epoch: count("epoch")?,
            batch_in_epoch: count("batch_in_epoch")?,
            loss_sum: f64_from_json(&v["loss_sum"], "loss_sum")?,
            samples: count("samples")?,
            log_loss: f64_from_json(&v["log_loss"], "log_loss")?,
            log_samples: count("log_samples")?,
            train_seconds: f64_from_json(&v["train_seconds"], "train_seconds")?,
            scaler,
            epochs,
        })
    }
}

impl TrainReport {
    /// The test accuracy after the last epoch.
    pub fn final_accuracy(&self) -> f64 {
        self.epochs.last().map_or(0.0, |e| e.test_accuracy)
    }

    /// Mean training throughput over all epochs.
    pub fn samples_per_s(&self) -> f64 {
        let n = self.epochs.len().max(1) as f64;
        self.epochs.iter().map(|e| e.samples_per_s).sum::<f64>() / n
    }
}

fn load_split(config: &TrainConfig, split: Split, limit: Option<usize>) -> Result<MnistDataset> {
    let mut raw = MnistLike::load(&config.data_dir, split)?;
    if let Some(n) = limit.filter(|&n| n < raw.len()) {
        let pixels = raw.pixels_per_image();
        raw = MnistLike::from_raw(
            raw.images()[..n * pixels].to_vec(),
            [raw.rows(), raw.cols()],
            raw.labels()[..n].to_vec(),
        )?;
    }
    let dataset = MnistDataset::new(Arc::new(raw), Normalization::FASHION_MNIST);
    Ok(match config.model {
        ModelKind::Mlp => dataset.flattened(),
        ModelKind::Cnn => dataset,
    })
}

fn make_optimizer<B: Backend, M: Module<B>>(
    config: &TrainConfig,
    model: &M,
) -> Result<Box<dyn Optimizer<B>>> {
    let params = model.parameters();
    Ok(match config.optimizer {
        OptimizerKind::Sgd => Box::new(Sgd::new(params, SgdConfig::new(config.lr).momentum(0.9))?),
        OptimizerKind::Adam => Box::new(Adam::new(params, AdamConfig::new(config.lr))?),
        OptimizerKind::AdamW => Box::new(AdamW::new(params, AdamWConfig::new(config.lr))?),
    })
}

/// How often (in steps) the running loss is read back for the progress bar.
const LOSS_READ_INTERVAL: usize = 25;

/// Trains `config.model` on `backend`, printing a progress bar per epoch (when `progress` and a
/// terminal) and a line per epoch on stderr; returns the per-epoch figures.
pub fn run_training<B: Backend>(config: &TrainConfig, backend: &B) -> Result<TrainReport> {
    run_training_with(config, backend, Arc::new(LocalCommunicator::new()))
}

/// [`run_training`] as one rank of a data-parallel run over `comm` (see
/// [`crate::distributed`]): the model is rank 0's, each rank trains on its shard of every
/// epoch at `batch_size` per step and evaluates its share of the test set; figures are over all
/// ranks, only rank 0 prints and saves. With a one-rank communicator it is [`run_training`].
pub fn run_training_with<B: Backend>(
    config: &TrainConfig,
    backend: &B,
    comm: Arc<dyn Communicator<B>>,
) -> Result<TrainReport> {
    let model =
        config
            .model
            .build_with_precision(DType::F32, config.precision, config.seed, backend)?;
    train_model(config, model, backend, comm)
}

/// Sums `values` over the ranks (nothing to do on one rank).
fn sum_over_ranks<B: Backend>(comm: &dyn Communicator<B>, values: &mut [f64]) -> Result<()> {
    if comm.world_size() > 1 {
        comm.all_reduce_host(values, Reduction::Sum)?;
    }
    Ok(())
}

/// [`run_training_with`] of a built model.
fn train_model<B: Backend, M: Forward<B>>(
    config: &TrainConfig,
    model: M,
    backend: &B,
    comm: Arc<dyn Communicator<B>>,
) -> Result<TrainReport> {
    let start = Instant::now();
    if config.batch_size == 0 || config.epochs == 0 {
        return Err(Error::InvalidArgument {
            op: "train",
            msg: "epochs and batch size must be at least 1".into(),
        });
    }
    let (rank, world_size) = (comm.rank(), comm.world_size());
    let train_set = load_split(config, Split::Train, config.train_limit)?;
    let test_set = load_split(config, Split::Test, config.test_limit)?;
    // Each rank's shard of every epoch (on one rank: the loader's own shuffled order).
    let sampler = DistributedSampler::new(train_set.len(), rank, world_size)?.shuffled(config.seed);
    let train_loader = DataLoader::new(
        train_set,
        LoaderConfig::new(config.batch_size)
            .shuffled(config.seed)
            .prefetch(2),
    )?;
    // Every `world_size`-th test image: the ranks' shares add up to the test set exactly.
    let test_share: Vec<usize> = (rank..test_set.len()).step_by(world_size).collect();
    let test_loader = DataLoader::new(
        Subset::new(test_set, test_share)?,
        LoaderConfig::new(1000).sequential().prefetch(2),
    )?;

    // Rank 0's initial model on every rank; gradients averaged inside the optimizer's step.
    let model = DistributedDataParallel::new(model, comm.clone())?;
    let mut optimizer = model.wrap_optimizer(make_optimizer(config, &model)?);
    let params: Vec<_> = model.parameters().into_iter().map(|(_, p)| p).collect();
    let mut scaler = config
        .precision
        .needs_loss_scaling()
        .then(DynamicLossScaler::new);
    let steps_per_epoch = train_loader.batches_for(sampler.num_samples());
    let total_steps = config.epochs * steps_per_epoch;
    let schedule = CosineAnnealing::new(config.lr, total_steps.max(1), 0.0)?;

    // The run folder: a fresh run, or (with `resume`) the newest whole checkpoint's state.
    let run_config = config.run_config(world_size);
    let run_dir = match &config.save {
        Some(dir) => Some(RunDir::open(dir)?.keep_last(config.keep_last)),
        None => None,
    };
    let mut progress = Progress::default();
    let mut resumed_from_step = None;
    if let Some(dir) = &run_dir {
        if config.resume {
            let groups: &mut [(&str, &mut dyn Optimizer<B>)] = &mut [("optimizer", &mut optimizer)];
            if let Some(found) = run::resume(dir, &model, groups, &run_config, backend)? {
                progress = Progress::from_json(&found.state)?;
                if let Some(&(loss_sum, samples)) = progress.ranks.get(rank) {
                    (progress.loss_sum, progress.samples) = (loss_sum, samples);
                }
                if let (Some(scaler), Some((scale, n))) = (scaler.as_mut(), progress.scaler) {
                    scaler.set_position(scale, n)?;
                }
                if rank == 0 {
                    for skipped in &found.skipped {
                        eprintln!("warning: skipped a damaged checkpoint ({skipped})");
                    }
                    eprintln!(
                        "resuming from step {} ({})",
                        found.step,
                        found.path.display()
                    );
                }
                resumed_from_step = Some(found.step);
            }
        } else if !dir.steps()?.is_empty() {
            return Err(Error::checkpoint(format!(
                "{} already holds the checkpoints of a run: pass --resume to continue it, or \
                 save into another folder",
                dir.root().display()
            )));
        }
    }
    // Rank 0 logs the scalars (after a resume, without what the killed process logged later).
    let mut metrics = match &config.log_dir {
        Some(dir) if rank == 0 => Some(MetricsLog::open_resumed(dir, resumed_from_step)?),
        _ => None,
    };
    // Saves the run's state (rank 0 writes; every rank holds the same).
    let save = |progress: &Progress, optimizer: &dyn Optimizer<B>| -> Result<()> {
        let Some(dir) = &run_dir else {
            return Ok(());
        };
        save_on_rank0(&*comm, || {
            let groups: &[(&str, &dyn Optimizer<B>)] = &[("optimizer", optimizer)];
            let state = progress.to_json();
            let step = progress.global_step as u64;
            run::save_checkpoint(dir, step, &model, groups, &run_config, &state)?;
            dir.save_model(&model)
        })
    };
    let halt_if_asked = |global_step: usize| {
        if config.halt_after_step == Some(global_step) {
            std::process::exit(HALT_EXIT_CODE);
        }
    };

    for epoch in progress.epoch..config.epochs {
        model.train();
        let bar = progress_bar(config, steps_per_epoch, epoch, rank == 0);
        // A resumed epoch skips the batches it had done (the order is fixed by seed and epoch).
        let done = progress.batch_in_epoch;
        bar.set_position(done as u64);
        let order = sampler.indices(epoch as u64);
        let rest = order[(done * config.batch_size).min(order.len())..].to_vec();
        let epoch_start = Instant::now();
        let mut pending = Vec::new();
        for (i, batch) in train_loader.batches_of(rest)?.enumerate() {
            let step = done + i;
            let batch = batch?;
            let n = batch.len();
            let (x, y) = batch.into_tensors(backend)?;
            if config.schedule == ScheduleKind::Cosine {
                optimizer.set_learning_rate(schedule.lr_at(progress.global_step));
            }
            progress.global_step += 1;
            let loss = match scaler.as_mut() {
                // The ranks agree on skipping a step (one flag all-reduced per step).
                Some(scaler) if world_size > 1 => {
                    let comm = &*comm;
                    train_step_scaled_across(&model, &mut optimizer, x, &y, scaler, &params, comm)?
                        .0
                }
                Some(scaler) => {
                    train_step_scaled(&model, &mut optimizer, x, &y, scaler, &params)?.0
                }
                None => train_step(&model, &mut optimizer, x, &y)?,
            };
            pending.push((loss, n));
            progress.samples += n;
            progress.batch_in_epoch = step + 1;
            let checkpoint_now = config
                .checkpoint_every
                .is_some_and(|every| every > 0 && progress.global_step % every == 0)
                && run_dir.is_some()
                // The epoch's last step is saved after its evaluation.
                && step + 1 < steps_per_epoch;
            let log_now = (step + 1) % LOSS_READ_INTERVAL == 0;
            if log_now || checkpoint_now {
                // The sum is the same whenever it is read: losses are added in step order.
                for (l, k) in pending.drain(..) {
                    let weighted = l.to_scalar_f64()? * k as f64;
                    progress.loss_sum += weighted;
                    progress.log_loss += weighted;
                    progress.log_samples += k;
                }
                let seconds = progress.train_seconds + epoch_start.elapsed().as_secs_f64();
                if let Some(log) = metrics.as_mut().filter(|_| log_now) {
                    let mut values = vec![
                        (
                            "train/loss",
                            progress.log_loss / progress.log_samples.max(1) as f64,
                        ),
                        ("train/lr", optimizer.learning_rate()),
                        ("train/grad_norm", grad_norm(&params)?),
                        (
                            "train/samples_per_s",
                            (progress.samples * world_size) as f64 / seconds.max(1e-9),
                        ),
                    ];
                    if let Some(scaler) = &scaler {
                        values.push(("train/loss_scale", scaler.scale()));
                    }
                    log.log(progress.global_step as u64, &values)?;
                    (progress.log_loss, progress.log_samples) = (0.0, 0);
                }
                bar.set_message(format!(
                    "loss {:.4} | {:.0} samples/s",
                    progress.loss_sum / progress.samples.max(1) as f64,
                    progress.samples as f64 / seconds.max(1e-9)
                ));
            }
            if checkpoint_now {
                backend.synchronize()?;
                let mut snapshot = progress.clone();
                if world_size > 1 {
                    // Each rank's partial sums, exactly (a rank adds its values to zeros).
                    let mut parts = vec![0.0; 2 * world_size];
                    parts[2 * rank] = progress.loss_sum;
                    parts[2 * rank + 1] = progress.samples as f64;
                    sum_over_ranks(&*comm, &mut parts)?;
                    snapshot.ranks = parts.chunks(2).map(|p| (p[0], p[1] as usize)).collect();
                }
                snapshot.train_seconds += epoch_start.elapsed().as_secs_f64();
                snapshot.scaler = scaler.as_ref().map(DynamicLossScaler::position);
                bar.suspend(|| save(&snapshot, &optimizer))?;
            }
            bar.inc(1);
            halt_if_asked(progress.global_step);
        }
        for (l, k) in pending.drain(..) {
            progress.loss_sum += l.to_scalar_f64()? * k as f64;
        }
        backend.synchronize()?;
        let train_seconds = progress.train_seconds + epoch_start.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let eval = evaluate(&model, &test_loader, backend)?;
        let (mut accuracy, mut test_loss, mut train_loss, mut samples) = (
            eval.accuracy,
            eval.mean_loss,
            progress.loss_sum / progress.samples.max(1) as f64,
            progress.samples as f64,
        );
        if world_size > 1 {
            // Totals over the ranks; the ranks ran in lockstep, rank 0's clock times them all.
            let tested = eval.samples as f64;
            let mut totals = [
                eval.accuracy * tested,
                progress.loss_sum,
                samples,
                tested,
                eval.mean_loss * tested,
            ];
            sum_over_ranks(&*comm, &mut totals)?;
            accuracy = totals[0].round() / totals[3].max(1.0);
            train_loss = totals[1] / totals[2].max(1.0);
            samples = totals[2];
            test_loss = totals[4] / totals[3].max(1.0);
        }
        let report = EpochReport {
            epoch: epoch + 1,
            train_loss,
            samples_per_s: samples / train_seconds,
            test_accuracy: accuracy,
        };
        if rank == 0 {
            eprintln!(
                "epoch {}/{}: train loss {:.4}, {:.0} samples/s, test accuracy {:.2}%",
                report.epoch,
                config.epochs,
                report.train_loss,
                report.samples_per_s,
                100.0 * report.test_accuracy
            );
        }
        if let Some(log) = metrics.as_mut() {
            let values = [
                ("test/accuracy", report.test_accuracy),
                ("test/loss", test_loss),
                ("train/epoch_loss", report.train_loss),
                ("train/epoch_samples_per_s", report.samples_per_s),
            ];
            log.log(progress.global_step as u64, &values)?;
        }
        progress.epochs.push(report);
        progress = Progress {
            global_step: progress.global_step,
            epoch: epoch + 1,
            scaler: scaler.as_ref().map(DynamicLossScaler::position),
            log_loss: progress.log_loss,
            log_samples: progress.log_samples,
            epochs: std::mem::take(&mut progress.epochs),
            ..Progress::default()
        };
        save(&progress, &optimizer)?;
    }
    Ok(TrainReport {
        epochs: progress.epochs,
        seconds: start.elapsed().as_secs_f64(),
        world_size,
        resumed_from_step,
        checkpoint: run_dir.map(|d| d.root().to_path_buf()),
    })
}

fn progress_bar(config: &TrainConfig, len: usize, epoch: usize, shown: bool) -> ProgressBar {
    let bar = ProgressBar::new(len as u64);
    if !(config.progress && shown) {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar.set_style(
        ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
            .expect("static template is valid")
            .progress_chars("=> "),
    );
    bar.set_prefix(format!("{}/{}", epoch + 1, config.epochs));
    bar
}
