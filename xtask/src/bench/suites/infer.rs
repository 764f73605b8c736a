//! The `infer` suite: forward passes of the reference models in eval mode without a graph,
//! batch-1 latency and batch-256 throughput.

use clap::Args;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType};
use tessera_nn::precision::Precision;
use tessera_nn::{Forward, Module};

use crate::bench::record::Record;
use crate::bench::suites::models::{model_list_words, ModelName};
use crate::bench::timing::Protocol;
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "infer";

/// Arguments of the `infer` suite.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct InferArgs {
    /// Models to run (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1.., default_values_t = ModelName::ALL)]
    pub models: Vec<ModelName>,
    /// Batch sizes (comma-separated): 1 is the latency case, larger ones the throughput case.
    #[arg(long, value_delimiter = ',', num_args = 1.., default_values_t = [1, 256])]
    pub batches: Vec<usize>,
    /// Timed forward passes per case [default: enough for about 1.5 s, at least 5].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub reps: Option<u64>,
}

impl InferArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let batches: Vec<String> = self.batches.iter().map(usize::to_string).collect();
        let mut args = vec![
            "--models".to_string(),
            model_list_words(&self.models),
            "--batches".to_string(),
            batches.join(","),
        ];
        if let Some(reps) = self.reps {
            args.extend(["--reps".to_string(), reps.to_string()]);
        }
        args
    }
}

/// The lifecycle phase of an inference batch size: `"infer-1"` or `"infer-batch"`.
pub fn phase_of(batch: usize) -> &'static str {
    if batch == 1 {
        "infer-1"
    } else {
        "infer-batch"
    }
}

/// Times one forward pass (eval mode, `no_grad`, plus a `synchronize`) of every model at every
/// batch size on a fixed random input made before the clock starts, the linear layers
/// computing under `precision`.
pub fn measure<B: Backend>(
    dev: &B,
    args: &InferArgs,
    precision: Precision,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    for &model in &args.models {
        let net = model
            .kind()
            .build_with_precision(DType::F32, precision, 0, dev)?;
        net.eval();
        for &batch in &args.batches {
            let (x, _) = model.random_batch(batch, 11, dev)?;
            let x = Var::constant(x);
            dev.synchronize()?;
            let timing = protocol.measure(args.reps.map(|r| r as usize), || {
                let logits = no_grad(|| net.forward(&x))?;
                dev.synchronize()?;
                Ok::<_, tessera_core::Error>(logits)
            })?;
            emit(
                Record::new(NAME, "tessera", dev.name(), batch, &timing)
                    .with_samples()
                    .with_flops(model.forward_flops() * batch as f64)
                    .with_model(model.name())
                    .with_phase(phase_of(batch)),
            );
        }
    }
    Ok(())
}
