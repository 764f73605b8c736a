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
    all_ranks_ok(comm, outcome, "write the checkpoint")
}

/// Makes every rank learn whether `outcome` failed on any rank (a collective): a rank's own
/// error is returned as it is; a rank that succeeded while another failed returns an
/// [`Error::Checkpoint`] saying which work (`what`, e.g. "write the checkpoint") failed
/// elsewhere, so that every rank stops together.
pub(crate) fn all_ranks_ok<B: Backend, T>(
    comm: &dyn Communicator<B>,
    outcome: Result<T>,
    what: &str,
) -> Result<T> {
    // The maximum over the ranks of `world_size - rank` where it failed, 0 where not: the
    // lowest rank that failed, if any.
    let world = comm.world_size();
    let mut failed = [f64::from(u8::from(outcome.is_err())) * (world - comm.rank()) as f64];
    comm.all_reduce_host(&mut failed, Reduction::Max)?;
    match outcome {
        Err(e) => Err(e),
        Ok(_) if failed[0] != 0.0 => Err(Error::Checkpoint {
            msg: format!(
                "rank {} could not {what} (its error is in its own output); rank {} stops too",
                world - failed[0] as usize,
                comm.rank()
            ),
        }),
        Ok(value) => Ok(value),
    }
}
