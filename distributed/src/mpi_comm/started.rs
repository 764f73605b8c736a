//! [`MpiCommunicator`]'s started collectives, `start_all_gather` and `start_reduce_scatter`:
//! an exchange that runs while the caller computes.
//!
//! Open MPI moves a non-blocking collective forward only inside MPI calls, so a request that
//! nobody tests makes little progress while the rank computes. A started collective therefore
//! runs on a thread of its own, which takes the communicator's lock, checks the ranks'
//! arguments, posts the exchange (`MPI_Iallgather`, or the `MPI_Ialltoall` of the ordered
//! reduce-scatter), tells the caller, and polls the request to completion (with the deadline and
//! failure handling of every collective here; sleeping 50 µs between tests, so that the thread
//! takes little of the cores the rank computes on), then combines a reduce-scatter's blocks in
//! rank order. Holding the lock throughout keeps this rank's later collectives behind it, in the
//! order the caller issued them, and keeps MPI's calls from overlapping
//! (`MPI_THREAD_SERIALIZED`).

use super::ordered::{combine_blocks, exchange_description, gather_description, Element};
use super::raw::Idle;
use super::MpiCommunicator;
use std::sync::mpsc::{sync_channel, SyncSender};
use std::sync::Arc;
use tessera_core::{Backend, CommFailure, DType, Error, HostData, Result, Tensor};
use tessera_nn::distributed::{
    check_gatherable, check_reducible, check_shardable, PendingCollective, Reduction,
};

/// Which collective a started thread runs.
#[derive(Clone, Copy)]
enum Started {
    AllGather,
    ReduceScatter(Reduction),
}

impl Started {
    /// The collective's name in errors.
    fn op(self) -> &'static str {
        match self {
            Started::AllGather => "all_gather",
            Started::ReduceScatter(_) => "reduce_scatter",
        }
    }
}

impl MpiCommunicator {
    /// [`tessera_nn::distributed::Communicator::start_all_gather`]: returns once the exchange
    /// is posted on a thread of its own (see the [module docs](self)).
    pub(super) fn start_all_gather_ordered<B: Backend>(
        self: Arc<Self>,
        shard: &Tensor<B>,
    ) -> Result<PendingCollective<B>> {
        check_gatherable(Started::AllGather.op(), shard)?;
        if self.world_size == 1 || shard.numel() == 0 {
            // Nothing to wait for beyond the argument check.
            return Ok(PendingCollective::ready(self.all_gather_ordered(shard)?));
        }
        let total = shard.numel() * self.world_size;
        self.start_on_thread(shard, Started::AllGather, total)
    }

    /// [`tessera_nn::distributed::Communicator::start_reduce_scatter`]: returns once the
    /// exchange is posted on a thread of its own (see the [module docs](self)); the result is
    /// [`MpiCommunicator`]'s `reduce_scatter`'s, bit for bit.
    pub(super) fn start_reduce_scatter_ordered<B: Backend>(
        self: Arc<Self>,
        tensor: &Tensor<B>,
        reduction: Reduction,
    ) -> Result<PendingCollective<B>> {
        let kind = Started::ReduceScatter(reduction);
        check_reducible(tensor.dtype(), reduction)?;
        let block = check_shardable(kind.op(), tensor, self.world_size)?;
        if self.world_size == 1 || block == 0 {
            return Ok(PendingCollective::ready(
                self.reduce_scatter_ordered(tensor, reduction)?,
            ));
        }
        self.start_on_thread(tensor, kind, block)
    }

    /// Runs `kind` on `tensor`'s values on a thread of its own and returns its handle once
    /// the exchange is posted; the result is a tensor of `out_len` elements.
    fn start_on_thread<B: Backend>(
        self: Arc<Self>,
        tensor: &Tensor<B>,
        kind: Started,
        out_len: usize,
    ) -> Result<PendingCollective<B>> {
        let op = kind.op();
        let backend = tensor.backend().clone();
        let dtype = tensor.dtype();
        let data = tensor.to_host()?;
        // The waiter's own handle: dropped after the thread has ended, so the last handle
        // (which finalises MPI, on the thread that initialised it) is never the thread's.
        let comm = self.clone();
        let (started, posted) = sync_channel(1);
        let worker = std::thread::Builder::new()
            .name(format!("tessera-mpi-{op}"))
            .spawn(move || self.posting(kind, data, dtype, started))
            .map_err(|e| {
                comm.error(
                    op,
                    CommFailure::Library,
                    format!("could not start the {op}'s thread: {e}"),
                )
            })?;
        // Once the thread answers it holds the lock and has posted the exchange, or failed.
        let failed = match posted.recv() {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(e),
            Err(_) => Some(comm.error(
                op,
                CommFailure::Library,
                format!("the {op}'s thread ended before posting"),
            )),
        };
        let join = move || -> Result<HostData> {
            let joined = worker.join();
            let panicked = || {
                let msg = format!("the {op}'s thread panicked");
                comm.error(op, CommFailure::Library, msg)
            };
            joined.unwrap_or_else(|_| Err(panicked()))
        };
        if let Some(e) = failed {
            // The thread returns at once after a failed start.
            let _ = join();
            return Err(e);
        }
        Ok(PendingCollective::new(move || {
            Tensor::from_host(join()?, [out_len], &backend)
        }))
    }

    /// The thread's work on host `data` of any dtype the collectives carry. A failure before
    /// the exchange is posted is also the answer on `started`.
    fn posting(
        &self,
        kind: Started,
        data: HostData,
        dtype: DType,
        started: SyncSender<Result<()>>,
    ) -> Result<HostData> {
        let op = kind.op();
        let outcome = (|| -> Result<HostData> {
            Ok(each_numeric!(data, op, |v| self
                .posting_typed(kind, v, dtype, &started)?))
        })();
        if let Err(e) = &outcome {
            // A failure after the exchange was posted comes after the answer: the waiter reads
            // only the first message, so this one is then dropped or never read.
            let _ = started.try_send(Err(e.clone()));
        }
        outcome
    }

    /// Locks, checks, posts, answers `started` once posted, waits, and (for a
    /// reduce-scatter) combines.
    fn posting_typed<T: Element>(
        &self,
        kind: Started,
        values: Vec<T>,
        dtype: DType,
        started: &SyncSender<Result<()>>,
    ) -> Result<Vec<T>> {
        let op = kind.op();
        let mut state = self.healthy(op)?;
        let (len, n) = (values.len(), self.world_size);
        let (what, posted) = match kind {
            Started::AllGather => (
                gather_description(len),
                self.agree_all_gather(&mut state, dtype, len)
                    .and_then(|()| self.post_all_gather_vec(&mut state, op, values)),
            ),
            Started::ReduceScatter(reduction) => (
                exchange_description(len, n),
                self.agree_reduce_scatter(&mut state, dtype, len, reduction)
                    .and_then(|()| self.post_reduce_scatter_vec(&mut state, op, values)),
            ),
        };
        let posted = posted?;
        let _ = started.send(Ok(()));
        let (_, recv) = self.complete(&mut state, op, &what, posted, Idle::Sleep)?;
        drop(state);
        match kind {
            Started::AllGather => Ok(recv),
            Started::ReduceScatter(reduction) => combine_blocks(&recv, n, reduction),
        }
    }
}
