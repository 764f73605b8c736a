//! The training job behind `train --model mlp|cnn`: data, model, optimizer, epochs,
//! evaluation, checkpoints and a summary.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tessera_core::{Backend, DType, Error, Result};
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
use tessera_nn::schedule::{CosineAnnealing, LrSchedule};
use tessera_nn::training::{
    evaluate, save_training_state, train_step, train_step_scaled, train_step_scaled_across,
};
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
    /// Where to save the training state after every epoch, if anywhere.
    pub save: Option<PathBuf>,
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
    let mut global_step = 0;
    let mut epochs = Vec::new();
    for epoch in 0..config.epochs {
        model.train();
        let bar = progress_bar(config, steps_per_epoch, epoch, rank == 0);
        let epoch_start = Instant::now();
        let (mut loss_sum, mut samples) = (0.0, 0usize);
        let mut pending = Vec::new();
        for (step, batch) in train_loader
            .batches_of(sampler.indices(epoch as u64))?
            .enumerate()
        {
            let batch = batch?;
            let n = batch.len();
            let (x, y) = batch.into_tensors(backend)?;
            if config.schedule == ScheduleKind::Cosine {
                optimizer.set_learning_rate(schedule.lr_at(global_step));
            }
            global_step += 1;
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
            samples += n;
            if (step + 1) % LOSS_READ_INTERVAL == 0 {
                for (l, k) in pending.drain(..) {
                    loss_sum += l.to_scalar_f64()? * k as f64;
                }
                let rate = samples as f64 / epoch_start.elapsed().as_secs_f64();
                bar.set_message(format!(
                    "loss {:.4} | {:.0} samples/s",
                    loss_sum / samples as f64,
                    rate
                ));
            }
            bar.inc(1);
        }
        for (l, k) in pending.drain(..) {
            loss_sum += l.to_scalar_f64()? * k as f64;
        }
        backend.synchronize()?;
        let train_seconds = epoch_start.elapsed().as_secs_f64();
        bar.finish_and_clear();
        let eval = evaluate(&model, &test_loader, backend)?;
        let (mut accuracy, mut train_loss, mut samples) = (
            eval.accuracy,
            loss_sum / samples.max(1) as f64,
            samples as f64,
        );
        if world_size > 1 {
            // Totals over the ranks; the ranks ran in lockstep, rank 0's clock times them all.
            let tested = eval.samples as f64;
            let mut totals = [eval.accuracy * tested, loss_sum, samples, tested];
            sum_over_ranks(&*comm, &mut totals)?;
            accuracy = totals[0].round() / totals[3].max(1.0);
            train_loss = totals[1] / totals[2].max(1.0);
            samples = totals[2];
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
        epochs.push(report);
        if let Some(path) = &config.save {
            let mut meta = BTreeMap::new();
            meta.insert("model".into(), format!("{:?}", config.model).to_lowercase());
            meta.insert("epoch".into(), (epoch + 1).to_string());
            meta.insert("world_size".into(), world_size.to_string());
            // Every rank holds the same model and optimizer state: rank 0 writes it once.
            save_on_rank0(&*comm, || {
                save_training_state(path, &model, &optimizer, &meta)
            })?;
        }
    }
    Ok(TrainReport {
        epochs,
        seconds: start.elapsed().as_secs_f64(),
        world_size,
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
