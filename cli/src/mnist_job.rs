//! The training job behind `train --model mlp|cnn`: data, model, optimizer, epochs,
//! evaluation, whole-run checkpoints (resumable bit for bit, see [`tessera_nn::run`]) and a
//! summary.

use crate::memory::{max_over_ranks, peak_rss_bytes, peak_virtual_bytes, tensor_bytes};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result};
use tessera_nn::data::{
    DataLoader, Dataset, LoaderConfig, MnistDataset, MnistLike, Normalization, Split, Subset,
};
use tessera_nn::distributed::{
    Communicator, DdpConfig, DistributedDataParallel, DistributedOptimizer, DistributedSampler,
    LocalCommunicator, ShardLevel, ShardedOptimizer, ShardedUnits,
};
use tessera_nn::models::ModelKind;
use tessera_nn::optim::{Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};
use tessera_nn::precision::{DynamicLossScaler, Precision};
use tessera_nn::run::RunDir;
use tessera_nn::schedule::CosineAnnealing;
/// The figures of one epoch (the [`Learner`]'s).
pub use tessera_nn::training::EpochReport;
use tessera_nn::training::{Callback, Control, EpochStart, Learner, StepEnd};
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
    /// How much of the training state each rank keeps (levels 1 and 2 shard the optimizer
    /// state and the gradients; see [`ShardLevel`]).
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
    /// ([`tessera_nn::run::save_sharded_checkpoint`]) instead of gathering the whole state.
    pub sharded_checkpoints: bool,
    /// With several ranks: most bytes of gradients in one collective (buckets of the
    /// all-reduce at level 0, of the sharded optimizer at levels 1-3; default
    /// [`tessera_nn::distributed::DEFAULT_BUCKET_BYTES`]). Smaller buckets at level 2 hold fewer whole gradients at once.
    pub bucket_bytes: usize,
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
    /// The sharding level the run used.
    pub shard: ShardLevel,
    /// The most bytes of parameters, gradients and optimizer state any rank held at once.
    pub state_bytes_per_rank: usize,
    /// The largest rank's peak resident set size (0 where the system does not report it).
    pub peak_rss_bytes: u64,
    /// The largest rank's peak address space, what `ulimit -v` limits (0 where not reported).
    pub peak_virtual_bytes: u64,
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

fn make_optimizer<B: Backend>(
    config: &TrainConfig,
    params: Vec<(String, Var<B>)>,
) -> Result<Box<dyn Optimizer<B>>> {
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
    let (kind, precision, seed) = (config.model, config.precision, config.seed);
    if config.shard != ShardLevel::Parameters {
        let model = kind.build_with_precision(DType::F32, precision, seed, backend)?;
        return train_model(config, model, backend, comm, None);
    }
    // Level 3: every layer with parameters is a unit, gathered for its passes only. The model
    // is built without values; each layer gets them in turn once the units are made
    // (`ShardedUnits::initialize` in `train_model`), so no rank holds the whole model.
    let model = kind.build_deferred(DType::F32, precision, seed, backend)?;
    let units = ShardedUnits::new(comm.clone(), model.unit_prefixes())?;
    units.set_prefetch(config.shard_prefetch);
    let model = model.shard_layers(units.clone())?;
    train_model(config, model, backend, comm, Some(units))
}

/// [`run_training_with`] of a built model (at level 3, with its `units`).
fn train_model<B: Backend, M: Forward<B>>(
    config: &TrainConfig,
    model: M,
    backend: &B,
    comm: Arc<dyn Communicator<B>>,
    units: Option<Arc<ShardedUnits<B>>>,
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
    let ddp_config = DdpConfig {
        bucket_bytes: config.bucket_bytes,
        ..DdpConfig::default()
    };
    let model = DistributedDataParallel::with_config(model, comm.clone(), ddp_config)?;
    let params = model.parameters();
    let param_bytes: usize = params
        .iter()
        .map(|(_, v)| v.numel() * v.dtype().size_in_bytes())
        .sum();
    let data = PreparedData {
        train_loader,
        test_loader,
        sampler,
    };
    match config.shard {
        ShardLevel::Replicated => {
            let optimizer = model.wrap_optimizer(make_optimizer(config, params)?);
            // Parameters and gradients whole, and the whole optimizer state.
            let state_bytes = move |o: &DistributedOptimizer<B, Box<dyn Optimizer<B>>>| {
                2 * param_bytes + tensor_bytes(o.state().iter().map(|(_, t)| t))
            };
            fit(
                config,
                model,
                optimizer,
                state_bytes,
                data,
                backend,
                comm,
                start,
                None,
            )
        }
        ShardLevel::Parameters => {
            let units = units.ok_or_else(|| Error::InvalidArgument {
                op: "train",
                msg: "--shard 3 needs the model's layers run as sharded units".into(),
            })?;
            let mut optimizer =
                ShardedOptimizer::with_units(params, &units, config.bucket_bytes, |shares| {
                    make_optimizer(config, shares)
                })?;
            optimizer.set_overlap_reductions(config.overlap_reductions);
            // Each layer drawn (rank 0's values broadcast), sharded and released in turn.
            let (kind, precision, seed) = (config.model, config.precision, config.seed);
            units.initialize(&mut |unit| {
                kind.init_unit(&model, DType::F32, precision, seed, unit)
            })?;
            let unit_bytes = units.peak_unit_bytes();
            let state_bytes = move |o: &ShardedOptimizer<B, Box<dyn Optimizer<B>>>| {
                o.peak_state_bytes() + unit_bytes
            };
            fit(
                config,
                model,
                optimizer,
                state_bytes,
                data,
                backend,
                comm,
                start,
                Some(units),
            )
        }
        level => {
            let mut optimizer = ShardedOptimizer::new(
                params,
                comm.clone(),
                level,
                config.bucket_bytes,
                |shares| make_optimizer(config, shares),
            )?;
            optimizer.set_overlap_reductions(config.overlap_reductions);
            let state_bytes = |o: &ShardedOptimizer<B, Box<dyn Optimizer<B>>>| o.peak_state_bytes();
            fit(
                config,
                model,
                optimizer,
                state_bytes,
                data,
                backend,
                comm,
                start,
                None,
            )
        }
    }
}

/// The data of a run: the loaders and this rank's sampler.
struct PreparedData<D: Dataset + 'static, E: Dataset + 'static> {
    train_loader: DataLoader<D>,
    test_loader: DataLoader<E>,
    sampler: DistributedSampler,
}

/// The [`Learner`] of `model` and `optimizer` over `data`, with the run's options; the report
/// measures the training state with `state_bytes` (on every rank, the largest reported).
#[allow(clippy::too_many_arguments)]
fn fit<B, M, O, D, E>(
    config: &TrainConfig,
    model: DistributedDataParallel<B, M>,
    optimizer: O,
    state_bytes: impl Fn(&O) -> usize,
    data: PreparedData<D, E>,
    backend: &B,
    comm: Arc<dyn Communicator<B>>,
    start: Instant,
    units: Option<Arc<ShardedUnits<B>>>,
) -> Result<TrainReport>
where
    B: Backend,
    M: Forward<B>,
    O: Optimizer<B>,
    D: Dataset + 'static,
    E: Dataset + 'static,
{
    let (rank, world_size) = (comm.rank(), comm.world_size());
    let PreparedData {
        train_loader,
        test_loader,
        sampler,
    } = data;
    let steps_per_epoch = train_loader.batches_for(sampler.num_samples());
    let total_steps = config.epochs * steps_per_epoch;
    let mut learner = Learner::new(model, optimizer)
        .epochs(config.epochs)
        .communicator(comm.clone())
        .sampler(sampler)
        .log_every(LOSS_READ_INTERVAL)
        .callback(Box::new(EpochLines {
            epochs: config.epochs,
            shown: rank == 0,
        }))
        .callback(Box::new(ProgressBars {
            bar: None,
            epochs: config.epochs,
            shown: config.progress && rank == 0,
        }));
    if let Some(units) = units {
        learner = learner.sharded_units(units);
    }
    if config.schedule == ScheduleKind::Cosine {
        let schedule = CosineAnnealing::new(config.lr, total_steps.max(1), 0.0)?;
        learner = learner.schedule(Box::new(schedule));
    }
    if config.precision.needs_loss_scaling() {
        learner = learner.loss_scaler(DynamicLossScaler::new());
    }
    if let Some(dir) = &config.save {
        let run_dir = RunDir::open(dir)?.keep_last(config.keep_last);
        let run_config = config.run_config(world_size);
        learner = learner.run_dir(run_dir, run_config, config.checkpoint_every, config.resume);
        if config.sharded_checkpoints {
            learner = learner.sharded_checkpoints();
        }
    }
    if let Some(dir) = &config.log_dir {
        learner = learner.log_dir(dir);
    }
    if let Some(step) = config.halt_after_step {
        learner = learner.callback(Box::new(HaltAfter(step)));
    }
    let fit = learner.fit(&train_loader, &test_loader, backend)?;
    let mut memory = [
        state_bytes(learner.optimizer()) as f64,
        peak_rss_bytes() as f64,
        peak_virtual_bytes() as f64,
    ];
    max_over_ranks(&*comm, &mut memory)?;
    Ok(TrainReport {
        epochs: fit.epochs,
        seconds: start.elapsed().as_secs_f64(),
        world_size,
        resumed_from_step: fit.resumed_from_step,
        checkpoint: config.save.clone(),
        shard: config.shard,
        state_bytes_per_rank: memory[0] as usize,
        peak_rss_bytes: memory[1] as u64,
        peak_virtual_bytes: memory[2] as u64,
    })
}

/// The line per epoch on stderr (rank 0).
struct EpochLines {
    epochs: usize,
    shown: bool,
}

impl Callback for EpochLines {
    fn on_epoch_end(&mut self, r: &EpochReport) -> Result<Control> {
        if self.shown {
            eprintln!(
                "epoch {}/{}: train loss {:.4}, {:.0} samples/s, test accuracy {:.2}%",
                r.epoch,
                self.epochs,
                r.train_loss,
                r.samples_per_s,
                100.0 * r.test_accuracy
            );
        }
        Ok(Control::Continue)
    }
}

/// A progress bar per epoch (loss, samples/s), on a terminal.
struct ProgressBars {
    bar: Option<ProgressBar>,
    epochs: usize,
    shown: bool,
}

impl Callback for ProgressBars {
    fn on_epoch_start(&mut self, e: &EpochStart) -> Result<()> {
        let bar = ProgressBar::new(e.steps as u64);
        if !self.shown {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        bar.set_style(
            ProgressStyle::with_template("epoch {prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
                .expect("static template is valid")
                .progress_chars("=> "),
        );
        bar.set_prefix(format!("{}/{}", e.epoch + 1, self.epochs));
        bar.set_position(e.done as u64);
        self.bar = Some(bar);
        Ok(())
    }

    fn on_step_end(&mut self, s: &StepEnd) -> Result<Control> {
        if let Some(bar) = &self.bar {
            if let Some(loss) = s.epoch_loss {
                bar.set_message(format!("loss {loss:.4} | {:.0} samples/s", s.samples_per_s));
            }
            bar.inc(1);
        }
        Ok(Control::Continue)
    }

    fn on_epoch_end(&mut self, _: &EpochReport) -> Result<Control> {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
        Ok(Control::Continue)
    }
}

/// [`TrainConfig::halt_after_step`]: exits after that step and its checkpoint.
struct HaltAfter(usize);

impl Callback for HaltAfter {
    fn on_step_end(&mut self, s: &StepEnd) -> Result<Control> {
        if s.global_step == self.0 {
            std::process::exit(HALT_EXIT_CODE);
        }
        Ok(Control::Continue)
    }
}
