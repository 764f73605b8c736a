//! [`MpiCommunicator`]'s `start_all_gather`: an all-gather that runs while the caller computes.
//!
//! Open MPI moves a non-blocking collective forward only inside MPI calls, so a request that
//! nobody tests makes little progress while the rank computes. The gather therefore runs on a
//! thread of its own, which takes the communicator's lock, checks the ranks' arguments, posts
//! `MPI_Iallgather`, tells the caller, and polls the request to completion (with the deadline
//! and failure handling of every collective here; sleeping 50 µs between tests, so that the
//! thread takes little of the cores the rank computes on). Holding the lock throughout keeps this
//! rank's later collectives behind the gather, in the order the caller issued them, and keeps
//! MPI's calls from overlapping (`MPI_THREAD_SERIALIZED`).

use super::ordered::{gather_description, Element};
use super::raw::Idle;
use super::MpiCommunicator;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use std::thread::JoinHandle;
use tessera_core::{Backend, CommFailure, DType, Error, HostData, Result, Tensor};
use tessera_nn::distributed::{check_gatherable, PendingGather};

const OP: &str = "all_gather";

impl MpiCommunicator {
    /// [`tessera_nn::distributed::Communicator::start_all_gather`]: returns once the exchange
    /// is posted on a thread of its own (see the [module docs](self)).
    pub(super) fn start_all_gather_ordered<B: Backend>(
        self: Arc<Self>,
        shard: &Tensor<B>,
    ) -> Result<PendingGather<B>> {
        check_gatherable(OP, shard)?;
        if self.world_size == 1 || shard.numel() == 0 {
            // Nothing to wait for beyond the argument check.
            return Ok(PendingGather::ready(self.all_gather_ordered(shard)?));
        }
        let total = shard.numel() * self.world_size;
        let backend = shard.backend().clone();
        let dtype = shard.dtype();
        // The waiter's own handle: dropped after the thread has ended, so the last handle
        // (which finalises MPI, on the thread that initialised it) is never the thread's.
        let comm = self.clone();
        let (started, posted) = sync_channel(1);
        let spawned = match shard.to_host()? {
            HostData::F32(v) => spawn(self, v, dtype, started, HostData::F32),
            HostData::F64(v) => spawn(self, v, dtype, started, HostData::F64),
            HostData::I64(v) => spawn(self, v, dtype, started, HostData::I64),
            HostData::F16(v) => spawn(self, v, dtype, started, HostData::F16),
            HostData::BF16(v) => spawn(self, v, dtype, started, HostData::BF16),
            other => {
                return Err(Error::UnsupportedDType {
                    op: OP,
                    dtype: other.dtype(),
                })
            }
        };
        let worker = spawned.map_err(|e| {
            comm.error(
                OP,
                CommFailure::Library,
                format!("could not start the gather's thread: {e}"),
            )
        })?;
        // Once the thread answers it holds the lock and has posted the exchange, or failed.
        let failed = match posted.recv() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some(comm.error(
                OP,
                CommFailure::Library,
                "the gather's thread ended before posting",
            )),
        };
        let join = move || -> Result<HostData> {
            let joined = worker.join();
            let panicked = || comm.error(OP, CommFailure::Library, "the gather's thread panicked");
            joined.unwrap_or_else(|_| Err(panicked()))
        };
        if let Some(e) = failed {
            // The thread returns at once after a failed start.
            let _ = join();
            return Err(e);
        }
        Ok(PendingGather::new(move || {
            Tensor::from_host(join()?, [total], &backend)
        }))
    }

    /// The gather thread's work: lock, check, post, report to `started`, wait.
    fn gather_posting<T: Element>(
        &self,
        block: Vec<T>,
        dtype: DType,
        started: SyncSender<Result<()>>,
    ) -> Result<Vec<T>> {
        let what = gather_description(block.len());
        let mut state = match self.healthy(OP) {
            Ok(state) => state,
            Err(e) => {
                let _ = started.send(Err(e.clone()));
                return Err(e);
            }
        };
        let posted = self
            .agree_all_gather(&mut state, dtype, block.len())
            .and_then(|()| self.post_all_gather_vec(&mut state, OP, block));
        match posted {
            Err(e) => {
                let _ = started.send(Err(e.clone()));
                Err(e)
            }
            Ok(posted) => {
                let _ = started.send(Ok(()));
                let (_, recv) = self.complete(&mut state, OP, &what, posted, Idle::Sleep)?;
                Ok(recv)
            }
        }
    }
}

/// Starts the gather thread of `block`, whose result `wrap` turns into host data.
fn spawn<T: Element>(
    comm: Arc<MpiCommunicator>,
    block: Vec<T>,
    dtype: DType,
    started: SyncSender<Result<()>>,
    wrap: fn(Vec<T>) -> HostData,
) -> std::io::Result<JoinHandle<Result<HostData>>> {
    std::thread::Builder::new()
        .name("tessera-mpi-gather".into())
        .spawn(move || comm.gather_posting(block, dtype, started).map(wrap))
}
