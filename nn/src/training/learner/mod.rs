//! [`Learner`]: the training loop, written once. It fits a model with an optimizer, an optional
//! learning-rate schedule and loss scaler, on one rank or as one rank of a data-parallel run,
//! evaluates after every epoch, checkpoints the whole run (see [`crate::run`]) so that a killed
//! run resumes bit for bit, logs scalars for TensorBoard, and reports to [`Callback`]s (a
//! progress bar, [`EarlyStopping`], ...). burn's `Learner` and Lightning's `Trainer` are the
//! shape: the model says how to compute, the learner runs the loop.
//!
//! ```
//! use tessera_core::{DType, Error, Generator, Tensor};
//! use tessera_cpu::Cpu;
//! use tessera_nn::data::{DataLoader, Dataset, LoaderConfig};
//! use tessera_nn::layers::{Linear, LinearConfig};
//! use tessera_nn::optim::{Adam, AdamConfig};
//! use tessera_nn::training::{EarlyStopping, Learner};
//! use tessera_nn::Module;
//!
//! /// Points of 4 features; the class is whether the first feature is positive.
//! #[derive(Clone)]
//! struct Points(Vec<f32>);
//!
//! impl Dataset for Points {
//!     fn len(&self) -> usize {
//!         self.0.len() / 4
//!     }
//!     fn item_dims(&self) -> &[usize] {
//!         &[4]
//!     }
//!     fn fill_batch(&self, at: &[usize], x: &mut Vec<f32>, y: &mut Vec<i64>) -> tessera_core::Result<()> {
//!         if let Some(&bad) = at.iter().find(|&&i| i >= self.len()) {
//!             let msg = format!("no point {bad}");
//!             return Err(Error::InvalidArgument { op: "Points", msg });
//!         }
//!         for &i in at {
//!             let features = &self.0[4 * i..4 * i + 4];
//!             x.extend_from_slice(features);
//!             y.push(i64::from(features[0] > 0.0));
//!         }
//!         Ok(())
//!     }
//! }
//!
//! # fn main() -> tessera_core::Result<()> {
//! let dev = Cpu::new();
//! let points = Points(Tensor::<Cpu>::randn([256, 4], DType::F32, 1, &dev)?.to_vec::<f32>()?);
//! let train = DataLoader::new(points.clone(), LoaderConfig::new(32).shuffled(7))?;
//! let test = DataLoader::new(points, LoaderConfig::new(256).sequential())?;
//!
//! let model: Linear<Cpu> = LinearConfig::new(4, 2).init(&dev, &mut Generator::new(0))?;
//! let optimizer = Adam::new(model.parameters(), AdamConfig::new(0.05))?;
//! let mut learner = Learner::new(model, optimizer)
//!     .epochs(30)
//!     .callback(Box::new(EarlyStopping::new(3, 0.0)));
//! let report = learner.fit(&train, &test, &dev)?;
//! assert!(report.epochs.last().unwrap().test_accuracy > 0.9);
//! # Ok(()) }
//! ```

mod callback;
mod progress;

pub use callback::{Callback, Control, EarlyStopping, EpochStart, StepEnd};
pub use progress::EpochReport;

use self::progress::Progress;
use super::{
    evaluate, evaluate_in_lockstep, train_step, train_step_scaled, train_step_scaled_across,
};
use crate::data::{DataLoader, Dataset};
use crate::distributed::{
    Communicator, DistributedSampler, LocalCommunicator, Reduction, ShardedUnits,
};
use crate::module::Forward;
use crate::optim::Optimizer;
use crate::precision::DynamicLossScaler;
use crate::run::{self, MetricsLog, RunDir};
use crate::schedule::LrSchedule;
use crate::{Error, Result};
use serde_json::Value;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tessera_autograd::Var;
use tessera_core::Backend;

/// The run folder of a [`Learner`] and what its checkpoints must agree with.
struct RunFolder {
    dir: RunDir,
    config: Value,
    checkpoint_every: Option<usize>,
    resume: bool,
    /// Each rank writes its own part of the checkpoints ([`run::save_sharded_checkpoint`]).
    sharded: bool,
}

/// What [`Learner::fit`] did.
#[derive(Clone, Debug, PartialEq)]
pub struct FitReport {
    /// One entry per finished epoch (those of a resumed run's earlier processes included).
    pub epochs: Vec<EpochReport>,
    /// Optimisation steps done in the whole run.
    pub global_step: usize,
    /// The step of the checkpoint the run continued from (None: it started fresh).
    pub resumed_from_step: Option<u64>,
    /// Whether a callback ended the run before its last epoch.
    pub stopped_early: bool,
}

/// Sums `values` over the ranks (nothing to do on one rank).
fn sum_over_ranks<B: Backend>(comm: &dyn Communicator<B>, values: &mut [f64]) -> Result<()> {
    if comm.world_size() > 1 {
        comm.all_reduce_host(values, Reduction::Sum)?;
    }
    Ok(())
}

/// The training loop for a classifier trained with cross-entropy on `(features, labels)`
/// batches (see the module docs of `training/learner/mod.rs`). Built with [`Learner::new`] and the builder methods,
/// run with [`Learner::fit`].
pub struct Learner<B: Backend, M: Forward<B>, O: Optimizer<B>> {
    model: M,
    optimizer: O,
    epochs: usize,
    schedule: Option<Box<dyn LrSchedule>>,
    scaler: Option<DynamicLossScaler>,
    comm: Arc<dyn Communicator<B>>,
    sampler: Option<DistributedSampler>,
    run: Option<RunFolder>,
    log_dir: Option<PathBuf>,
    log_every: usize,
    callbacks: Vec<Box<dyn Callback>>,
    /// Sharding level 3: the model's units, released while training.
    units: Option<Arc<ShardedUnits<B>>>,
}

impl<B: Backend, M: Forward<B>, O: Optimizer<B>> Learner<B, M, O> {
    /// A learner of `model` with `optimizer` (over the model's parameters): one epoch, the
    /// optimizer's own learning rate, no checkpoints, no log, one rank.
    pub fn new(model: M, optimizer: O) -> Self {
        Learner {
            model,
            optimizer,
            epochs: 1,
            schedule: None,
            scaler: None,
            comm: Arc::new(LocalCommunicator::new()),
            sampler: None,
            run: None,
            log_dir: None,
            log_every: 25,
            callbacks: Vec::new(),
            units: None,
        }
    }

    /// Trains for `epochs` passes over the data.
    pub fn epochs(mut self, epochs: usize) -> Self {
        self.epochs = epochs;
        self
    }

    /// Sets the learning rate of every step from `schedule` (step 0 first).
    pub fn schedule(mut self, schedule: Box<dyn LrSchedule>) -> Self {
        self.schedule = Some(schedule);
        self
    }

    /// Trains with dynamic loss scaling (f16 compute).
    pub fn loss_scaler(mut self, scaler: DynamicLossScaler) -> Self {
        self.scaler = Some(scaler);
        self
    }

    /// Runs as one rank of `comm` (the model a
    /// [`crate::distributed::DistributedDataParallel`] and the optimizer its wrapped one; give
    /// each rank its shard with [`Learner::sampler`]): figures are over all ranks, rank 0 alone
    /// writes the run folder and the log.
    pub fn communicator(mut self, comm: Arc<dyn Communicator<B>>) -> Self {
        self.comm = comm;
        self
    }

    /// The items of every epoch, in order (a rank's shard); default: the training loader's
    /// own order.
    pub fn sampler(mut self, sampler: DistributedSampler) -> Self {
        self.sampler = Some(sampler);
        self
    }

    /// Checkpoints the whole run into `dir` after every epoch (and every `checkpoint_every`
    /// steps); `config` is what a resumed run must agree with (every option that changes the
    /// result). With `resume`, [`Learner::fit`] first restores the newest whole checkpoint
    /// of `dir`; without it, a `dir` that holds checkpoints is an error.
    pub fn run_dir(
        mut self,
        dir: RunDir,
        config: Value,
        checkpoint_every: Option<usize>,
        resume: bool,
    ) -> Self {
        self.run = Some(RunFolder {
            dir,
            config,
            checkpoint_every,
            resume,
            sharded: false,
        });
        self
    }

    /// Sharding level 3: the model runs some of its layers through `units` (e.g.
    /// [`crate::models::ReferenceModel::shard_layers`]) and the optimizer is a
    /// [`crate::distributed::ShardedOptimizer::with_units`] over them. The learner restores a
    /// checkpoint a unit at a time, each rank keeping its shares ([`run::resume_sharded`]),
    /// releases the units' parameters for training, evaluates with the
    /// ranks in lockstep (each unit gathered as it runs, [`crate::training::evaluate_in_lockstep`]),
    /// gathers them to rank 0 a unit at a time as it saves
    /// ([`ShardedUnits::visit_whole_on`]). [`Learner::fit`] returns with them released, as in
    /// training: hold them whole to use the model ([`ShardedUnits::gather_all`] on every rank,
    /// [`ShardedUnits::hold_on`] one rank), so that no rank's memory rises when it returns.
    pub fn sharded_units(mut self, units: Arc<ShardedUnits<B>>) -> Self {
        self.units = Some(units);
        self
    }

    /// Holds the units' parameters whole on rank 0 alone, which writes them (a collective;
    /// nothing without units).
    fn hold_units_on_rank0(&self) -> Result<()> {
        self.units.as_ref().map_or(Ok(()), |u| u.hold_on(0))
    }

    /// Releases the units' parameters to this rank's shares (nothing without units).
    fn release_units(&self) -> Result<()> {
        self.units.as_ref().map_or(Ok(()), |u| u.release_all())
    }

    /// Writes the run folder's checkpoints sharded ([`run::save_sharded_checkpoint`]): each
    /// rank its own part of an optimizer whose state is spread over the ranks (a
    /// [`crate::distributed::ShardedOptimizer`]), nothing gathered. Call it after
    /// [`Learner::run_dir`].
    pub fn sharded_checkpoints(mut self) -> Self {
        if let Some(run) = self.run.as_mut() {
            run.sharded = true;
        }
        self
    }

    /// Logs scalars to `dir` for TensorBoard and as `metrics.jsonl` ([`MetricsLog`]): every
    /// `log_every` steps of an epoch (default 25) the training loss, learning rate, gradient
    /// norm, loss scale and samples/s; after every epoch the test accuracy and loss.
    pub fn log_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.log_dir = Some(dir.into());
        self
    }

    /// Reads the training loss back (and logs it) every `steps` steps of an epoch.
    pub fn log_every(mut self, steps: usize) -> Self {
        self.log_every = steps.max(1);
        self
    }

    /// Adds a callback (called in the order added).
    pub fn callback(mut self, callback: Box<dyn Callback>) -> Self {
        self.callbacks.push(callback);
        self
    }

    /// The model.
    pub fn model(&self) -> &M {
        &self.model
    }

    /// The optimizer.
    pub fn optimizer(&self) -> &O {
        &self.optimizer
    }

    /// The model and optimizer, giving the learner up.
    pub fn into_parts(self) -> (M, O) {
        (self.model, self.optimizer)
    }

    /// Restores the newest whole checkpoint of the run folder (if resuming) and returns where
    /// the run stands.
    fn start(&mut self, backend: &B) -> Result<(Progress, Option<u64>)> {
        let rank = self.comm.rank();
        let Some(run) = &self.run else {
            return Ok((Progress::default(), None));
        };
        if !run.resume {
            run.dir.ensure_no_checkpoints()?;
            return Ok((Progress::default(), None));
        }
        let groups: &mut [(&str, &mut dyn Optimizer<B>)] =
            &mut [("optimizer", &mut self.optimizer)];
        // The model and optimizer state load into any number of ranks; so does the position in
        // an epoch, dealt anew in [`Learner::fit`] (each rank's share of the epoch depends on
        // the number of ranks).
        const WORLD: &str = "world_size";
        let resumed = match &self.units {
            // Level 3 reads the units one at a time, each rank keeping its shares (they end
            // released). Units released by an earlier `fit` are held whole first: restoring
            // into released parameters would leave their shares as they were.
            Some(units) => {
                if !units.is_held_everywhere() {
                    units.gather_all()?;
                }
                let (dir, config) = (&run.dir, &run.config);
                run::resume_sharded(dir, &self.model, units, groups, config, backend, &[WORLD])?
            }
            None => run::resume_allowing(
                &run.dir,
                &self.model,
                groups,
                &run.config,
                backend,
                &[WORLD],
            )?,
        };
        let Some(found) = resumed else {
            return Ok((Progress::default(), None));
        };
        let mut progress = Progress::from_json(&found.state)?;
        let saved_world = progress.saved_world_size();
        if saved_world == self.comm.world_size() {
            if let Some(&(loss_sum, samples)) = progress.ranks.get(rank) {
                (progress.loss_sum, progress.samples) = (loss_sum, samples);
            }
        } else {
            // Another number of ranks: rank 0 carries the epoch's partial sums of them all
            // (the epoch's figures are sums over the ranks), the others start from zero.
            let (loss_sum, samples) = match progress.ranks.is_empty() {
                true => (progress.loss_sum, progress.samples),
                false => progress
                    .ranks
                    .iter()
                    .fold((0.0, 0), |(l, n), &(rl, rn)| (l + rl, n + rn)),
            };
            (progress.loss_sum, progress.samples) = match rank {
                0 => (loss_sum, samples),
                _ => (0.0, 0),
            };
        }
        if let (Some(scaler), Some((scale, n))) = (self.scaler.as_mut(), progress.scaler) {
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
        Ok((progress, Some(found.step)))
    }

    /// Writes a whole-run checkpoint of `progress` (rank 0 writes; every rank holds the same
    /// model and optimizer state) and the newest model. At level 3 on several ranks no rank
    /// holds the whole model for it: the units' parameters are gathered to rank 0 a unit at a
    /// time as it writes them.
    fn save(&self, progress: &Progress) -> Result<()> {
        let Some(run) = &self.run else {
            return Ok(());
        };
        let groups: &[(&str, &dyn Optimizer<B>)] = &[("optimizer", &self.optimizer)];
        let state = progress.to_json();
        let step = progress.global_step as u64;
        let units = self.units.as_deref();
        if run.sharded {
            // Every rank writes its own part; nothing is gathered.
            run::save_sharded_checkpoint(
                &run.dir,
                step,
                &self.model,
                groups,
                &run.config,
                &state,
                &*self.comm,
            )?;
            return self.save_model_file(run);
        }
        if self.comm.world_size() > 1 {
            // A state spread over the ranks is gathered to rank 0 a bucket at a time, the
            // units a unit at a time (a collective).
            run::save_gathered_checkpoint(
                &run.dir,
                step,
                &self.model,
                units,
                groups,
                &run.config,
                &state,
                &*self.comm,
            )?;
            return self.save_model_file(run);
        }
        // One rank: a sharded optimizer's state is its whole state, gathered from itself, and
        // the units' parameters are held whole while they are written.
        self.hold_units_on_rank0()?;
        self.optimizer.prepare_checkpoint()?;
        let saved = run::save_checkpoint(&run.dir, step, &self.model, groups, &run.config, &state)
            .and_then(|_| run.dir.save_model(&self.model));
        self.optimizer.finish_checkpoint();
        self.release_units()?;
        saved
    }

    /// Writes the run folder's `model.safetensors` from rank 0 (a collective; level 3's units
    /// gathered to rank 0 a unit at a time).
    fn save_model_file(&self, run: &RunFolder) -> Result<()> {
        let units = self.units.as_deref();
        let path = run.dir.model_path();
        run::save_gathered_model(&path, &self.model, units, &Default::default(), &*self.comm)
    }

    /// Trains on `train` for the configured epochs (continuing a resumed run), evaluating on
    /// `test` after every epoch; returns every epoch's figures. A level-3 model's units are
    /// released on return ([`Learner::sharded_units`]).
    pub fn fit<D, E>(
        &mut self,
        train: &DataLoader<D>,
        test: &DataLoader<E>,
        backend: &B,
    ) -> Result<FitReport>
    where
        D: Dataset + 'static,
        E: Dataset + 'static,
    {
        if self.epochs == 0 {
            return Err(Error::InvalidArgument {
                op: "Learner::fit",
                msg: "epochs must be at least 1".into(),
            });
        }
        let (rank, world_size) = (self.comm.rank(), self.comm.world_size());
        let params: Vec<Var<B>> = self
            .model
            .parameters()
            .into_iter()
            .map(|(_, p)| p)
            .collect();
        let (mut progress, resumed_from_step) = self.start(backend)?;
        let batch_size = train.config().batch_size;
        let saved_world = progress.saved_world_size();
        if resumed_from_step.is_some() && saved_world != world_size && progress.batch_in_epoch > 0 {
            // Inside an epoch, on another number of ranks: the items the earlier ranks trained
            // on (each `batch_in_epoch` full batches of its round-robin share) are the first of
            // what was left of the epoch; the rest is dealt to these ranks.
            let len = match &self.sampler {
                Some(sampler) => sampler.dataset_len(),
                None => train.dataset().len(),
            };
            let left = len.saturating_sub(progress.epoch_offset);
            let done = (saved_world * progress.batch_in_epoch * batch_size).min(left);
            if rank == 0 {
                eprintln!(
                    "resuming inside epoch {} on {world_size} ranks (the checkpoint's run had \
                     {saved_world}): the {} items of the epoch left are dealt anew",
                    progress.epoch + 1,
                    left - done
                );
            }
            progress.epoch_offset += done;
            progress.batch_in_epoch = 0;
        }
        // Level 3: shares of the parameters (restored or not) from here on.
        self.release_units()?;
        // Rank 0 logs the scalars (after a resume, without what the killed process logged
        // after its checkpoint).
        let mut metrics = match &self.log_dir {
            Some(dir) if rank == 0 => Some(MetricsLog::open_resumed(dir, resumed_from_step)?),
            _ => None,
        };
        // This rank's items of an epoch, after its first `offset` items over all ranks.
        let order = |epoch: usize, offset: usize| match &self.sampler {
            Some(s) => s.indices_from(epoch as u64, offset),
            None => {
                let mut all = train.epoch_order(epoch as u64);
                all.drain(..offset.min(all.len()));
                all
            }
        };
        let checkpoint_every = self.run.as_ref().and_then(|r| r.checkpoint_every);

        while progress.epoch < self.epochs && !progress.stopped {
            let epoch = progress.epoch;
            self.model.train();
            // A resumed epoch skips the batches it had done (the order is fixed by the seed).
            let done = progress.batch_in_epoch;
            let all = order(epoch, progress.epoch_offset);
            let steps_per_epoch = train.batches_for(all.len());
            let start = EpochStart {
                epoch,
                epochs: self.epochs,
                steps: steps_per_epoch,
                done,
            };
            for c in &mut self.callbacks {
                c.on_epoch_start(&start)?;
            }
            let rest = all[(done * batch_size).min(all.len())..].to_vec();
            let epoch_start = Instant::now();
            let mut pending = Vec::new();
            let mut stop = false;
            for (i, batch) in train.batches_of(rest)?.enumerate() {
                let step = done + i;
                let batch = batch?;
                let n = batch.len();
                let (x, y) = batch.into_tensors(backend)?;
                if let Some(schedule) = &self.schedule {
                    self.optimizer
                        .set_learning_rate(schedule.lr_at(progress.global_step));
                }
                progress.global_step += 1;
                let (model, optimizer) = (&self.model, &mut self.optimizer);
                let loss = match self.scaler.as_mut() {
                    // The ranks agree on skipping a step (one flag all-reduced per step).
                    Some(scaler) if world_size > 1 => {
                        let comm = &*self.comm;
                        train_step_scaled_across(model, optimizer, x, &y, scaler, &params, comm)?.0
                    }
                    Some(scaler) => train_step_scaled(model, optimizer, x, &y, scaler, &params)?.0,
                    None => train_step(model, optimizer, x, &y)?,
                };
                pending.push((loss, n));
                progress.samples += n;
                progress.batch_in_epoch = step + 1;
                let checkpoint_now = checkpoint_every
                    .is_some_and(|every| every > 0 && progress.global_step % every == 0)
                    // The epoch's last step is saved after its evaluation.
                    && step + 1 < steps_per_epoch;
                let read_now = (step + 1) % self.log_every == 0;
                let mut epoch_loss = None;
                let seconds = progress.train_seconds + epoch_start.elapsed().as_secs_f64();
                if read_now || checkpoint_now {
                    // The sums are the same whenever they are read: added in step order.
                    for (l, k) in pending.drain(..) {
                        let weighted = l.to_scalar_f64()? * k as f64;
                        progress.loss_sum += weighted;
                        progress.log_loss += weighted;
                        progress.log_samples += k;
                    }
                    epoch_loss = Some(progress.loss_sum / progress.samples.max(1) as f64);
                }
                // Every rank takes part (a sharded optimizer's norm is a collective).
                let norm = if read_now && self.log_dir.is_some() {
                    Some(self.optimizer.gradient_norm(&params)?)
                } else {
                    None
                };
                if let (Some(log), Some(norm)) = (metrics.as_mut(), norm) {
                    let mut values = vec![
                        (
                            "train/loss",
                            progress.log_loss / progress.log_samples.max(1) as f64,
                        ),
                        ("train/lr", self.optimizer.learning_rate()),
                        ("train/grad_norm", norm),
                        (
                            "train/samples_per_s",
                            (progress.samples * world_size) as f64 / seconds.max(1e-9),
                        ),
                    ];
                    if let Some(scaler) = &self.scaler {
                        values.push(("train/loss_scale", scaler.scale()));
                    }
                    log.log(progress.global_step as u64, &values)?;
                    (progress.log_loss, progress.log_samples) = (0.0, 0);
                }
                if checkpoint_now {
                    backend.synchronize()?;
                    let mut snapshot = progress.clone();
                    if world_size > 1 {
                        // Each rank's partial sums, exactly (a rank adds its values to zeros).
                        let mut parts = vec![0.0; 2 * world_size];
                        parts[2 * rank] = progress.loss_sum;
                        parts[2 * rank + 1] = progress.samples as f64;
                        sum_over_ranks(&*self.comm, &mut parts)?;
                        snapshot.ranks = parts.chunks(2).map(|p| (p[0], p[1] as usize)).collect();
                    }
                    snapshot.train_seconds += epoch_start.elapsed().as_secs_f64();
                    snapshot.scaler = self.scaler.as_ref().map(DynamicLossScaler::position);
                    self.save(&snapshot)?;
                }
                let info = StepEnd {
                    global_step: progress.global_step,
                    epoch,
                    step_in_epoch: step + 1,
                    epoch_loss,
                    samples_per_s: progress.samples as f64 / seconds.max(1e-9),
                    checkpointed: checkpoint_now,
                };
                for c in &mut self.callbacks {
                    stop |= c.on_step_end(&info)? == Control::Stop;
                }
                if stop {
                    break;
                }
            }
            for (l, k) in pending.drain(..) {
                let weighted = l.to_scalar_f64()? * k as f64;
                progress.loss_sum += weighted;
                progress.log_loss += weighted;
                progress.log_samples += k;
            }
            backend.synchronize()?;
            let train_seconds = progress.train_seconds + epoch_start.elapsed().as_secs_f64();
            // Level 3: a unit's pass is a collective and the ranks' test shares may differ
            // in length, so the ranks evaluate in lockstep, each unit gathered as it runs.
            let eval = match self.units {
                Some(_) => evaluate_in_lockstep(&self.model, test, backend, &*self.comm)?,
                None => evaluate(&self.model, test, backend)?,
            };
            let (mut accuracy, mut test_loss, mut train_loss, mut samples) = (
                eval.accuracy,
                eval.mean_loss,
                progress.loss_sum / progress.samples.max(1) as f64,
                progress.samples as f64,
            );
            if world_size > 1 {
                // Totals over the ranks; they ran in lockstep, rank 0's clock times them all.
                let tested = eval.samples as f64;
                let mut totals = [
                    eval.accuracy * tested,
                    progress.loss_sum,
                    samples,
                    tested,
                    eval.mean_loss * tested,
                ];
                sum_over_ranks(&*self.comm, &mut totals)?;
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
                test_loss,
            };
            if let Some(log) = metrics.as_mut() {
                let values = [
                    ("test/accuracy", report.test_accuracy),
                    ("test/loss", report.test_loss),
                    ("train/epoch_loss", report.train_loss),
                    ("train/epoch_samples_per_s", report.samples_per_s),
                ];
                log.log(progress.global_step as u64, &values)?;
            }
            for c in &mut self.callbacks {
                stop |= c.on_epoch_end(&report)? == Control::Stop;
            }
            progress.epochs.push(report);
            progress = Progress {
                global_step: progress.global_step,
                epoch: epoch + 1,
                scaler: self.scaler.as_ref().map(DynamicLossScaler::position),
                log_loss: progress.log_loss,
                log_samples: progress.log_samples,
                epochs: std::mem::take(&mut progress.epochs),
                stopped: stop,
                ..Progress::default()
            };
            self.save(&progress)?;
        }
        Ok(FitReport {
            stopped_early: progress.stopped && progress.epoch < self.epochs,
            epochs: progress.epochs,
            global_step: progress.global_step,
            resumed_from_step,
        })
    }
}
