//! The `eval` suite: one pass of `tessera_nn::training::evaluate` over the Fashion-MNIST test set.

use std::sync::Arc;

use clap::Args;
use tessera_core::{Backend, DType};
use tessera_nn::data::{DataLoader, LoaderConfig, MnistDataset, MnistLike, Normalization, Split};
use tessera_nn::precision::Precision;
use tessera_nn::training::evaluate;

use crate::bench::record::Record;
use crate::bench::suites::data_source::DataArgs;
use crate::bench::suites::models::{model_list_words, ModelName};
use crate::bench::timing::Protocol;
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "eval";

/// Test samples per evaluation batch, as the `train` command uses.
pub const BATCH: usize = 1000;

/// Arguments of the `eval` suite.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct EvalArgs {
    /// Models to evaluate (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1.., default_values_t = ModelName::ALL)]
    pub models: Vec<ModelName>,
    /// The data set and repetitions.
    #[command(flatten)]
    pub data: DataArgs,
}

impl EvalArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = vec!["--models".to_string(), model_list_words(&self.models)];
        args.extend(self.data.to_cli_args());
        args
    }
}

/// Times one `evaluate` pass (batches of [`BATCH`], accuracy and loss read back at the end)
/// of each (untrained, seed 0) model, its linear layers computing under `precision`; the test
/// set is decoded before the clock starts.
pub fn measure<B: Backend>(
    dev: &B,
    args: &EvalArgs,
    precision: Precision,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    if let Some(reason) = args.data.missing_reason() {
        return Err(reason.into());
    }
    let raw = Arc::new(MnistLike::load(&args.data.data, Split::Test)?);
    for &model in &args.models {
        let mut dataset = MnistDataset::new(raw.clone(), Normalization::FASHION_MNIST);
        if model == ModelName::Mlp {
            dataset = dataset.flattened();
        }
        let loader = DataLoader::new(dataset, LoaderConfig::new(BATCH).sequential().prefetch(2))?;
        let net = model
            .kind()
            .build_with_precision(DType::F32, precision, 0, dev)?;
        let mut samples = 0;
        let timing = protocol.measure(args.data.reps.map(|r| r as usize), || {
            let result = evaluate(&net, &loader, dev)?;
            samples = result.samples;
            Ok::<_, tessera_nn::Error>(result)
        })?;
        emit(
            Record::new(NAME, "tessera", dev.name(), samples, &timing)
                .with_samples()
                .with_flops(model.forward_flops() * samples as f64)
                .with_model(model.name())
                .with_phase("eval"),
        );
    }
    Ok(())
}
