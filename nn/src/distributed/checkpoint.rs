//! Writing files from one rank: checkpoints saved by rank 0 only, with every rank told whether
//! it worked.

use crate::distributed::communicator::{Communicator, Reduction};
use tessera_core::{Backend, Error, Result};

/// Runs `write` (e.g. a [`crate::training::save_training_state`] call) on rank 0 only, then
/// makes every rank wait for it (a collective): after it returns `Ok` on any rank, the file is
/// complete. When rank 0's `write` fails, rank 0 returns its error and the other ranks an
/// [`Error::Checkpoint`] saying that rank 0 failed, so that every rank stops together.
///
/// Every rank holds the same parameters (see [`crate::distributed::DistributedDataParallel`]),
/// so one copy is the whole state; writing it once avoids `world_size` processes racing on one
/// path.
pub fn save_on_rank0<B: Backend>(
    comm: &dyn Communicator<B>,
    write: impl FnOnce() -> Result<()>,
) -> Result<()> {
    let outcome = if comm.rank() == 0 { write() } else { Ok(()) };
    let mut failed = [f64::from(u8::from(outcome.is_err()))];
    comm.all_reduce_host(&mut failed, Reduction::Max)?;
    match outcome {
        Err(e) => Err(e),
        Ok(()) if failed[0] != 0.0 => Err(Error::Checkpoint {
            msg: format!(
                "rank 0 could not write the checkpoint (its error is in its own output); \
                 rank {} stops too",
                comm.rank()
            ),
        }),
        Ok(()) => Ok(()),
    }
}
