//! Where a [`super::Learner`]'s run stands: what its checkpoints save besides the model and
//! optimizer state, as exact JSON.

use crate::run::{f64_from_json, f64_to_json, scaler_from_json, scaler_to_json, u64_from_json};
use crate::{Error, Result};
use serde_json::{json, Value};

/// The figures of one epoch.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochReport {
    /// 1-based epoch number.
    pub epoch: usize,
    /// Mean training loss over the epoch (over all ranks).
    pub train_loss: f64,
    /// Training throughput (samples per second of the training steps; over all ranks).
    pub samples_per_s: f64,
    /// Test-set accuracy after the epoch.
    pub test_accuracy: f64,
    /// Mean test-set loss after the epoch.
    pub test_loss: f64,
}

impl EpochReport {
    fn to_json(&self) -> Value {
        json!({
            "epoch": self.epoch,
            "train_loss": f64_to_json(self.train_loss),
            "samples_per_s": f64_to_json(self.samples_per_s),
            "test_accuracy": f64_to_json(self.test_accuracy),
            "test_loss": f64_to_json(self.test_loss),
        })
    }

    fn from_json(v: &Value) -> Result<Self> {
        Ok(EpochReport {
            epoch: u64_from_json(&v["epoch"], "epochs[].epoch")? as usize,
            train_loss: f64_from_json(&v["train_loss"], "epochs[].train_loss")?,
            samples_per_s: f64_from_json(&v["samples_per_s"], "epochs[].samples_per_s")?,
            test_accuracy: f64_from_json(&v["test_accuracy"], "epochs[].test_accuracy")?,
            test_loss: f64_from_json(&v["test_loss"], "epochs[].test_loss")?,
        })
    }
}

/// The host state of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Progress {
    /// Optimisation steps done.
    pub global_step: usize,
    /// The epoch under way (0-based; `epochs` when done).
    pub epoch: usize,
    /// Items of that epoch (in its order over all ranks) done before the current number of
    /// ranks took over: a run resumed inside an epoch on another number of ranks deals the
    /// rest of the epoch anew ([`crate::distributed::DistributedSampler::indices_from`]).
    pub epoch_offset: usize,
    /// Batches of that epoch done (after `epoch_offset`).
    pub batch_in_epoch: usize,
    /// Sum of `loss * batch size` over this rank's batches of that epoch, and their samples.
    pub loss_sum: f64,
    pub samples: usize,
    /// Every rank's `(loss_sum, samples)` when the checkpoint was taken (each rank restores
    /// its own); empty on one rank.
    pub ranks: Vec<(f64, usize)>,
    /// Seconds spent in that epoch's training steps so far.
    pub train_seconds: f64,
    /// The loss scaler's position (f16).
    pub scaler: Option<(f64, usize)>,
    /// Sum of `loss * batch size` and samples since the last logged `train/loss`.
    pub log_loss: f64,
    pub log_samples: usize,
    /// The finished epochs.
    pub epochs: Vec<EpochReport>,
    /// Whether a callback stopped the run.
    pub stopped: bool,
}

impl Progress {
    /// The number of ranks of the run that wrote it (one when it kept no per-rank sums).
    pub fn saved_world_size(&self) -> usize {
        self.ranks.len().max(1)
    }

    pub fn to_json(&self) -> Value {
        json!({
            "global_step": self.global_step,
            "epoch": self.epoch,
            "batch_in_epoch": self.batch_in_epoch,
            "epoch_offset": self.epoch_offset,
            "loss_sum": f64_to_json(self.loss_sum),
            "samples": self.samples,
            "ranks": self.ranks.iter().map(|(l, n)| json!([f64_to_json(*l), n])).collect::<Vec<_>>(),
            "train_seconds": f64_to_json(self.train_seconds),
            "scaler": scaler_to_json(self.scaler),
            "log_loss": f64_to_json(self.log_loss),
            "log_samples": self.log_samples,
            "epochs": self.epochs.iter().map(EpochReport::to_json).collect::<Vec<_>>(),
            "stopped": self.stopped,
        })
    }

    pub fn from_json(v: &Value) -> Result<Self> {
        let count = |key: &str| u64_from_json(&v[key], key).map(|n| n as usize);
        let list = |key: &str| {
            v[key]
                .as_array()
                .ok_or_else(|| Error::checkpoint(format!("checkpoint state `{key}` is not a list")))
        };
        let scaler = scaler_from_json(&v["scaler"])?;
        let ranks = list("ranks")?
            .iter()
            .map(|r| {
                Ok((
                    f64_from_json(&r[0], "ranks[].loss_sum")?,
                    u64_from_json(&r[1], "ranks[].samples")? as usize,
                ))
            })
            .collect::<Result<_>>()?;
        let epochs = list("epochs")?
            .iter()
            .map(EpochReport::from_json)
            .collect::<Result<_>>()?;
        Ok(Progress {
            global_step: count("global_step")?,
            epoch: count("epoch")?,
            batch_in_epoch: count("batch_in_epoch")?,
            // Absent from checkpoints written before it existed: no offset.
            epoch_offset: match v.get("epoch_offset") {
                None => 0,
                Some(_) => count("epoch_offset")?,
            },
            loss_sum: f64_from_json(&v["loss_sum"], "loss_sum")?,
            samples: count("samples")?,
            ranks,
            train_seconds: f64_from_json(&v["train_seconds"], "train_seconds")?,
            scaler,
            log_loss: f64_from_json(&v["log_loss"], "log_loss")?,
            log_samples: count("log_samples")?,
            epochs,
            stopped: v["stopped"].as_bool().unwrap_or(false),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_survives_its_json_exactly() {
        let p = Progress {
            global_step: 12,
            epoch: 1,
            batch_in_epoch: 2,
            epoch_offset: 40,
            loss_sum: 0.1 + 0.2,
            samples: 128,
            ranks: vec![(0.3, 64), (f64::MIN_POSITIVE, 64)],
            train_seconds: 1.25,
            scaler: Some((32768.0, 7)),
            log_loss: 1.0 / 3.0,
            log_samples: 3,
            epochs: vec![EpochReport {
                epoch: 1,
                train_loss: 0.7,
                samples_per_s: 1e4,
                test_accuracy: 0.875,
                test_loss: 0.4,
            }],
            stopped: true,
        };
        assert_eq!(Progress::from_json(&p.to_json()).unwrap(), p);
        let mut broken = p.to_json();
        broken["epochs"] = Value::from(3);
        let e = Progress::from_json(&broken).unwrap_err().to_string();
        assert!(e.contains("epochs"), "{e}");
        let mut older = p.to_json();
        older.as_object_mut().unwrap().remove("epoch_offset");
        assert_eq!(Progress::from_json(&older).unwrap().epoch_offset, 0);
    }
}
