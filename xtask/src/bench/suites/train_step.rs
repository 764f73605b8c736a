//! Measuring one full training step of a reference model (forward, cross-entropy, backward,
//! Adam update): the shared core of the `mlp` and `cnn` suites.

use clap::Args;
use tessera_core::{Backend, DType};
use tessera_nn::optim::{Adam, AdamConfig};
use tessera_nn::precision::Precision;
use tessera_nn::training::train_step;
use tessera_nn::Module;

use crate::bench::record::Record;
use crate::bench::suites::models::ModelName;
use crate::bench::timing::Protocol;
use crate::TaskResult;

/// Arguments of a training-step suite.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct TrainArgs {
    /// Samples per training step [default: 128 for the MLP, 64 for the CNN, as `train` uses].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: Option<u64>,
    /// Timed steps [default: enough for about 1.5 s, at least 5].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: Option<u64>,
}

impl TrainArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(batch) = self.batch {
            args.extend(["--batch".to_string(), batch.to_string()]);
        }
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        args
    }

    /// The batch size for `model`: the one given, else the `train` command's default.
    pub fn batch_for(&self, model: ModelName) -> usize {
        match (self.batch, model) {
            (Some(b), _) => b as usize,
            (None, ModelName::Mlp) => 128,
            (None, ModelName::Cnn) => 64,
        }
    }
}

/// Times `tessera_nn::training::train_step` of `model` (f32 parameters, linear layers computing
/// under `precision`) with Adam (PyTorch's defaults) on one fixed random batch, and emits one
/// `phase = "train"` record with samples/s and GFLOP/s. f16 steps need a loss scaler, which
/// this plain step has not: f16 is refused. The model,
/// optimizer and batch are made before the clock starts; each timed repetition is one step plus
/// a `synchronize`.
pub fn measure<B: Backend>(
    suite: &str,
    model: ModelName,
    dev: &B,
    args: &TrainArgs,
    precision: Precision,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    if precision.needs_loss_scaling() {
        return Err(format!("{suite}: {precision:?} training needs a loss scaler").into());
    }
    let batch = args.batch_for(model);
    let net = model
        .kind()
        .build_with_precision(DType::F32, precision, 0, dev)?;
    net.train();
    let mut optimizer = Adam::new(net.parameters(), AdamConfig::default())?;
    let (x, y) = model.random_batch(batch, 7, dev)?;
    dev.synchronize()?;
    let timing = protocol.measure(args.reps.map(|r| r as usize), || {
        let loss = train_step(&net, &mut optimizer, x.clone(), &y)?;
        dev.synchronize()?;
        Ok::<_, tessera_core::Error>(loss)
    })?;
    emit(
        Record::new(suite, "tessera", dev.name(), batch, &timing)
            .with_samples()
            .with_flops(model.train_flops() * batch as f64)
            .with_model(model.name())
            .with_phase("train"),
    );
    Ok(())
}
