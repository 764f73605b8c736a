//! The `mem` suite: the resident memory training takes, beside PyTorch's
//! (`xtask/peers/mem_torch.py` does the same steps).
//!
//! In a fresh process, with the model, its Adam optimizer and one random batch in place, the
//! resident set is read (`before`), its peak reset (see [`resident`]), and then:
//!
//! * `train-step`: one training step; its record holds the peak resident set during the step;
//! * `train-epoch`: the rest of an epoch (`--epoch-samples` / batch steps on the same batch);
//!   its record holds the peak over the whole epoch, first step included.
//!
//! Both records carry `before`, `peak` and `after` ([`MemoryUse`]); what a unit costs is its
//! peak above `before`. With `--epochs N` the suite runs N epochs and prints the resident set
//! at the end of each (a `{"mem_epochs": ...}` line): flat after the first epoch means no
//! growth across epochs, which `xtask/tests/memory_flat.rs` asserts.

use clap::Args;
use serde_json::json;
use tessera_core::{Backend, DType, Tensor};
use tessera_nn::optim::{Adam, AdamConfig};
use tessera_nn::training::train_step;
use tessera_nn::Module;

use crate::bench::record::{MemoryUse, Record};
use crate::bench::resident::{self, Resident};
use crate::bench::suites::models::{model_list_words, ModelName};
use crate::bench::timing::Timing;
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "mem";

/// How much the resident set may grow from the end of the first epoch to the end of the last
/// before it counts as growth across epochs. Allocator bookkeeping moves it a little (about
/// 1 MiB over 16 MLP epochs of 40 steps, levelling off); a leak of 20 KiB per step exceeds it
/// within 200 steps.
pub const FLAT_TOLERANCE_BYTES: u64 = 4 << 20;

/// Arguments of the `mem` suite.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct MemArgs {
    /// Models to train (comma-separated).
    #[arg(long, value_enum, value_delimiter = ',', num_args = 1.., default_values_t = ModelName::ALL)]
    pub models: Vec<ModelName>,
    /// Samples per step [default: 128 for the MLP, 64 for the CNN, as `train` uses].
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch: Option<u64>,
    /// Samples of one epoch (steps: this over the batch, rounded up) [default: Fashion-MNIST's
    /// 60 000 training images].
    #[arg(long, default_value_t = 60_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub epoch_samples: u64,
    /// Epochs to train; the resident set at the end of each is printed.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    pub epochs: u64,
    /// Planted leak for the tests: keep a tensor of this many bytes alive per step.
    #[arg(long, hide = true, default_value_t = 0)]
    pub leak_bytes_per_step: u64,
}

impl MemArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        let mut args = vec!["--models".to_string(), model_list_words(&self.models)];
        if let Some(batch) = self.batch {
            args.extend(["--batch".to_string(), batch.to_string()]);
        }
        args.extend([
            "--epoch-samples".to_string(),
            self.epoch_samples.to_string(),
            "--epochs".to_string(),
            self.epochs.to_string(),
        ]);
        if self.leak_bytes_per_step > 0 {
            args.extend([
                "--leak-bytes-per-step".to_string(),
                self.leak_bytes_per_step.to_string(),
            ]);
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

    /// Why the suite cannot run here: it reads Linux's `/proc/self/status`.
    pub fn unavailable_reason(&self) -> Option<String> {
        resident::read()
            .is_none()
            .then(|| "resident memory is read from /proc/self/status (Linux only)".to_string())
    }
}

/// The growth of the resident set from the end of the first epoch to the end of the last:
/// what [`FLAT_TOLERANCE_BYTES`] bounds.
pub fn growth_after_first_epoch(rss_at_epoch_end: &[u64]) -> u64 {
    match (rss_at_epoch_end.first(), rss_at_epoch_end.last()) {
        (Some(first), Some(last)) => last.saturating_sub(*first),
        _ => 0,
    }
}

/// Trains each model of `args` on `dev` as the module docs describe, emitting a `train-step`
/// and a `train-epoch` record per model and printing each model's per-epoch resident sets.
pub fn measure<B: Backend>(
    dev: &B,
    args: &MemArgs,
    emit: &mut dyn FnMut(Record),
    info: &mut dyn FnMut(serde_json::Value),
) -> TaskResult<()> {
    for &model in &args.models {
        measure_model(dev, model, args, emit, info)?;
    }
    Ok(())
}

fn read_resident() -> TaskResult<Resident> {
    resident::read().ok_or_else(|| "could not read /proc/self/status".into())
}

fn measure_model<B: Backend>(
    dev: &B,
    model: ModelName,
    args: &MemArgs,
    emit: &mut dyn FnMut(Record),
    info: &mut dyn FnMut(serde_json::Value),
) -> TaskResult<()> {
    let batch = args.batch_for(model);
    let steps = (args.epoch_samples as usize).div_ceil(batch).max(1);
    let net = model.kind().build(DType::F32, 0, dev)?;
    net.train();
    let mut optimizer = Adam::new(net.parameters(), AdamConfig::default())?;
    let (x, y) = model.random_batch(batch, 7, dev)?;
    let leak_len = (args.leak_bytes_per_step as usize) / 4;
    let mut leaked: Vec<Tensor<B>> = Vec::new();
    let mut step = || -> TaskResult<()> {
        train_step(&net, &mut optimizer, x.clone(), &y)?;
        if leak_len > 0 {
            leaked.push(Tensor::<B>::zeros([leak_len], DType::F32, dev)?);
        }
        dev.synchronize()?;
        Ok(())
    };
    dev.synchronize()?;
    let before = read_resident()?;
    let peak_resets = resident::reset_peak();
    let start = std::time::Instant::now();
    step()?;
    let step_s = start.elapsed().as_secs_f64();
    let after_step = read_resident()?;
    for _ in 1..steps {
        step()?;
    }
    let epoch_s = start.elapsed().as_secs_f64();
    let after_epoch = read_resident()?;
    let record = |phase: &str, seconds: f64, after: Resident| {
        let timing = Timing::from_samples(&[seconds]).expect("one sample");
        let mut r = Record::new(NAME, "tessera", dev.name(), batch, &timing)
            .with_model(model.name())
            .with_phase(phase);
        r.memory = Some(MemoryUse {
            rss_before_bytes: before.current,
            peak_rss_bytes: after.peak,
            rss_after_bytes: after.current,
        });
        r
    };
    emit(record("train-step", step_s, after_step));
    emit(record("train-epoch", epoch_s, after_epoch));
    let mut rss_at_epoch_end = vec![after_epoch.current];
    for _ in 1..args.epochs {
        for _ in 0..steps {
            step()?;
        }
        rss_at_epoch_end.push(read_resident()?.current);
    }
    info(json!({ "mem_epochs": {
        "framework": "tessera",
        "model": model.name(),
        "batch": batch,
        "steps_per_epoch": steps,
        "peak_reset": peak_resets,
        "rss_at_epoch_end_bytes": rss_at_epoch_end,
    }}));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_is_measured_from_the_first_epoch_end() {
        assert_eq!(growth_after_first_epoch(&[100, 90, 130]), 30);
        assert_eq!(growth_after_first_epoch(&[100, 80]), 0);
        assert_eq!(growth_after_first_epoch(&[]), 0);
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_short_run_emits_a_step_and_an_epoch_record_per_model() {
        let args = MemArgs {
            models: vec![ModelName::Mlp],
            batch: Some(4),
            epoch_samples: 12,
            epochs: 2,
            leak_bytes_per_step: 0,
        };
        let (mut records, mut infos) = (Vec::new(), Vec::new());
        measure(
            &tessera_cpu::Cpu::new(),
            &args,
            &mut |r| records.push(r),
            &mut |v| infos.push(v),
        )
        .unwrap();
        let phases: Vec<&str> = records
            .iter()
            .map(|r| r.phase.as_deref().unwrap())
            .collect();
        assert_eq!(phases, ["train-step", "train-epoch"]);
        let m = records[1].memory.unwrap();
        assert!(m.peak_rss_bytes >= m.rss_before_bytes.min(m.rss_after_bytes));
        let epochs = infos[0]["mem_epochs"]["rss_at_epoch_end_bytes"]
            .as_array()
            .unwrap();
        assert_eq!(epochs.len(), 2);
        assert_eq!(infos[0]["mem_epochs"]["steps_per_epoch"], 3);
    }
}
