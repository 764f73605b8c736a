//! Durable training runs: whole-run checkpoints that a killed run resumes from, bit for bit.
//!
//! A run folder ([`RunDir`]) holds the newest model (`model.safetensors`,
//! [`RunDir::save_model`]), the run's configuration (`run.json`) and, under `checkpoints/`, one
//! checkpoint per saved step (a job may add its own files, e.g. a tokenizer):
//!
//! ```text
//! DIR/model.safetensors
//! DIR/run.json
//! DIR/checkpoints/step-000000000120.safetensors   model, optimizer state, random streams, counters
//! DIR/checkpoints/step-000000000120.json          manifest: step, size and CRC-32 of the file
//! DIR/checkpoints/latest                          "step-000000000120", written last
//! ```
//!
//! [`save_checkpoint`] writes the tensors of the model and of every optimizer, each random
//! stream of the model ([`crate::module::RandomStream`]: dropout masks), the configuration and
//! the job's own host state (step and epoch counters, the position in the data, host random
//! generators, the loss scaler, partial sums) into one safetensors file, atomically, then its
//! manifest, then the `latest` pointer; older checkpoints beyond [`RunDir::keep_last`] are
//! removed. A process killed at any moment leaves the previous checkpoints intact.
//!
//! [`resume`] restores the newest checkpoint whose manifest, size and checksum agree with its
//! file, falling back (and saying so) to older ones when the newest is torn or corrupt. A
//! checkpoint written by a run of another configuration is an error naming the first field
//! that differs; nothing is restored unless everything fits.
//!
//! [`save_sharded_checkpoint`] is the collective alternative for a state spread over ranks
//! (a [`crate::distributed::ShardedOptimizer`]'s): every rank writes its own file
//! (`step-N.rank-R-of-W.safetensors`) and rank 0 the manifest naming them all; [`resume`] reads
//! either kind, into any number of ranks ([`resume_allowing`] lets `world_size` differ), and
//! [`consolidate_checkpoint`] rewrites a sharded one as one file. [`save_gathered_checkpoint`]
//! writes the one-file checkpoint of such a state directly, gathering it a bucket at a time,
//! and [`save_gathered_model`] a model file, both with a level-3 model's units gathered to rank
//! 0 a unit at a time.
//!
//! [`MetricsLog`] writes a run's scalars for TensorBoard (event files, see [`tfevents`]) and as
//! `metrics.jsonl`.
//!
//! Floating-point host values go through [`f64_to_json`] and [`f64_from_json`], which keep
//! their bits exactly (JSON numbers do not, for NaN and infinities).

mod gathered_model;
mod gathered_save;
mod host_value;
mod manifest;
mod metrics_log;
mod run_dir;
mod sharded;
mod snapshot;
pub mod tfevents;

pub use gathered_model::save_gathered_model;
pub(crate) use gathered_model::visit_model_on_rank0;
pub use gathered_save::save_gathered_checkpoint;
pub use host_value::{f64_from_json, f64_to_json, scaler_from_json, scaler_to_json, u64_from_json};
pub use manifest::{Manifest, ShardFile};
pub use metrics_log::MetricsLog;
pub use run_dir::RunDir;
pub use sharded::{consolidate_checkpoint, save_sharded_checkpoint};
pub use snapshot::{
    resume, resume_allowing, resume_sharded, save_checkpoint, Resumed, CHECKPOINT_FORMAT,
};
