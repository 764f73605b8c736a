//! The `mlp` suite: one training step of the 784-512-512-10 MLP (batch 128), in samples/s.

use tessera_core::Backend;
use tessera_nn::precision::Precision;

use crate::bench::record::Record;
use crate::bench::suites::models::ModelName;
use crate::bench::suites::train_step::{self, TrainArgs};
use crate::bench::timing::Protocol;
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "mlp";

/// Measures the MLP's training step on `dev` under `precision` (see
/// [`train_step::measure`]).
pub fn measure<B: Backend>(
    dev: &B,
    args: &TrainArgs,
    precision: Precision,
    protocol: &Protocol,
    emit: &mut dyn FnMut(Record),
) -> TaskResult<()> {
    train_step::measure(NAME, ModelName::Mlp, dev, args, precision, protocol, emit)
}
