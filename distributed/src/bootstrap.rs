//! [`Bootstrap`]: the host-side exchanges a device communicator (NCCL) needs from a process
//! launcher's communicator (MPI): its rank and size, the broadcast of its unique id, and small
//! host collectives for argument checks and metrics.

use tessera_core::{Error, Result};
use tessera_nn::distributed::Reduction;

/// Host-side collectives over the processes of a job. Implemented by
/// `MpiCommunicator` (feature `mpi`) and by [`SingleProcess`] (one rank, no library).
pub trait Bootstrap: Send + Sync {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// The number of ranks.
    fn world_size(&self) -> usize;
    /// Replaces `bytes` on every rank by rank `root`'s (same length everywhere).
    fn broadcast_bytes(&self, bytes: &mut [u8], root: usize) -> Result<()>;
    /// Reduces a few host values over the ranks, in place.
    fn all_reduce_values(&self, values: &mut [f64], op: Reduction) -> Result<()>;
    /// Returns once every rank has called it.
    fn barrier_all(&self) -> Result<()>;
}

/// The bootstrap of a job of one process: nothing to exchange.
#[derive(Clone, Copy, Debug, Default)]
pub struct SingleProcess;

impl Bootstrap for SingleProcess {
    fn rank(&self) -> usize {
        0
    }

    fn world_size(&self) -> usize {
        1
    }

    fn broadcast_bytes(&self, _bytes: &mut [u8], root: usize) -> Result<()> {
        if root == 0 {
            Ok(())
        } else {
            Err(Error::InvalidArgument {
                op: "broadcast_bytes",
                msg: format!("root {root} is not a rank of a group of 1"),
            })
        }
    }

    fn all_reduce_values(&self, _values: &mut [f64], _op: Reduction) -> Result<()> {
        Ok(())
    }

    fn barrier_all(&self) -> Result<()> {
        Ok(())
    }
}
