//! [`Communicator`]: what data-parallel training needs from a communication library, and
//! [`Reduction`], the element-wise reductions it offers.

use super::PendingCollective;
use std::sync::Arc;
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// How [`Communicator::all_reduce`] combines the ranks' values, element by element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// The sum over the ranks.
    Sum,
    /// The sum divided by the number of ranks (floating-point tensors only). Every
    /// implementation computes it as the sum, then one division by the world size, so that the
    /// same inputs give the same bits whichever library carries them.
    Mean,
    /// The largest value.
    Max,
    /// The smallest value.
    Min,
}

impl Reduction {
    /// Lower-case name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Mean => "mean",
            Reduction::Max => "max",
            Reduction::Min => "min",
        }
    }
}

/// A group of processes ("ranks", numbered `0..world_size`) that exchange tensors: the
/// collective operations data-parallel training is built on.
///
/// Every method is a **collective**: every rank of the group must call it, in the same order,
/// with tensors of the same shape and dtype (and the same `root`). Implementations check that
/// they do and return [`Error::Communication`] with [`tessera_core::CommFailure::Mismatch`]
/// instead of corrupting memory or hanging when they do not; a peer that dies or stops
/// answering gives [`tessera_core::CommFailure::Timeout`] (or `PeerFailed`) within the
/// implementation's time limit, never an endless wait, and leaves the communicator broken
/// (later calls fail at once with [`tessera_core::CommFailure::Broken`]).
///
/// "In place" means that the tensor handle passed in is replaced by the result: tensors are
/// immutable and may share storage with other tensors, which keep their values.
///
/// Implementations: [`crate::distributed::LocalCommunicator`] (one rank, for tests and single
/// process runs), and `tessera-distributed`'s `MpiCommunicator` (host transfers, any backend)
/// and `NcclCommunicator` (CUDA device buffers).
pub trait Communicator<B: Backend>: Send + Sync {
    /// This process's rank, in `0..world_size()`.
    fn rank(&self) -> usize;

    /// The number of ranks.
    fn world_size(&self) -> usize;

    /// The communication library, for messages and reports: `"local"`, `"mpi"`, `"nccl"`.
    fn library(&self) -> &'static str;

    /// Replaces `tensor` by the element-wise `op` of every rank's `tensor` (same shape and
    /// dtype on every rank; f32, f64 or i64, and floating point for [`Reduction::Mean`]).
    /// Every rank receives the same values.
    fn all_reduce(&self, tensor: &mut Tensor<B>, op: Reduction) -> Result<()>;

    /// Replaces `tensor` on every rank by rank `root`'s `tensor` (same shape and dtype on every
    /// rank; any dtype).
    fn broadcast(&self, tensor: &mut Tensor<B>, root: usize) -> Result<()>;

    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<()>;

    /// [`Communicator::all_reduce`] of a few host values (metrics, counts, flags), without
    /// going through a device: every rank passes the same number of values.
    fn all_reduce_host(&self, values: &mut [f64], op: Reduction) -> Result<()>;

    /// Reduces every rank's rank-1 `tensor` (same length on every rank, a multiple of the
    /// world size `N`; the dtypes of [`Communicator::all_reduce`]) element by element with `op`
    /// and returns this rank's share: elements `[rank * len / N, (rank + 1) * len / N)` of the
    /// result. Every implementation returns exactly the bits its
    /// [`Communicator::all_reduce`] gives for those elements, so that sharded and plain data
    /// parallel training agree bit for bit.
    ///
    /// The provided implementation is that all-reduce followed by a slice (correct for any
    /// library, but it moves `N` times the data a native reduce-scatter does).
    fn reduce_scatter(&self, tensor: &Tensor<B>, op: Reduction) -> Result<Tensor<B>> {
        let shard = check_shardable("reduce_scatter", tensor, self.world_size())?;
        let mut full = tensor.clone();
        self.all_reduce(&mut full, op)?;
        // Compact: the share must not keep the whole reduced tensor alive.
        full.narrow(0, self.rank() * shard, shard)?.compact()
    }

    /// Concatenates every rank's rank-1 `shard` (same length and dtype on every rank; f32, f64
    /// or i64) in rank order: every rank receives the same `N * len` elements.
    ///
    /// The provided implementation places the shard in zeros and all-reduces a sum (exact:
    /// adding zeros changes no value but the sign of a zero).
    fn all_gather(&self, shard: &Tensor<B>) -> Result<Tensor<B>> {
        check_gatherable("all_gather", shard)?;
        let n = shard.numel();
        let world = self.world_size();
        let mut pieces: Vec<Tensor<B>> = Vec::with_capacity(world);
        for rank in 0..world {
            pieces.push(if rank == self.rank() {
                shard.clone()
            } else {
                shard.zeros_like()?
            });
        }
        let refs: Vec<&Tensor<B>> = pieces.iter().collect();
        let mut full = if world == 1 {
            shard.clone()
        } else {
            Tensor::cat(&refs, 0)?
        };
        debug_assert_eq!(full.numel(), n * world);
        self.all_reduce(&mut full, Reduction::Sum)?;
        Ok(full)
    }

    /// [`Communicator::all_gather`] to one rank: `root` receives every rank's rank-1 `shard`
    /// (same length and dtype on every rank; f32, f64 or i64) concatenated in rank order, the
    /// other ranks `None`. A consolidated checkpoint gathers its state this way, since only
    /// the rank that writes it needs the whole (1/N of an all-gather's traffic into each other
    /// rank, and no whole copy there).
    ///
    /// The provided implementation all-gathers and keeps the result on `root` (right for a
    /// library with no gather of its own: NCCL's is a group of sends and receives).
    /// `MpiCommunicator` calls `MPI_Igather`.
    fn gather(&self, shard: &Tensor<B>, root: usize) -> Result<Option<Tensor<B>>> {
        check_root("gather", root, self.world_size())?;
        let full = self.all_gather(shard)?;
        Ok((self.rank() == root).then_some(full))
    }

    /// Starts [`Communicator::all_gather`] of `shard` and returns its handle, so that the rank
    /// can compute while the exchange runs (the prefetch of sharded units,
    /// [`crate::distributed::ShardedUnits::set_prefetch`]). The same collective as
    /// `all_gather` for the ordering rule: every rank starts it at the same point of its
    /// sequence of collectives, and a rank's later collectives run after it.
    ///
    /// The provided implementation gathers at once and returns a completed handle (right for a
    /// library whose calls only queue work, as NCCL's do on a stream). `MpiCommunicator`
    /// runs the exchange on a thread of its own.
    fn start_all_gather(self: Arc<Self>, shard: &Tensor<B>) -> Result<PendingCollective<B>> {
        Ok(PendingCollective::ready(self.all_gather(shard)?))
    }

    /// Starts [`Communicator::reduce_scatter`] of `tensor` and returns its handle, so that the
    /// rank can compute while the exchange runs (what
    /// [`crate::distributed::ShardedOptimizer`]'s levels 2 and 3 do with each bucket of
    /// gradients during the backward pass). The same ordering rule as
    /// [`Communicator::start_all_gather`]; the result is `reduce_scatter`'s.
    ///
    /// The provided implementation reduces at once and returns a completed handle.
    /// `MpiCommunicator` runs the exchange on a thread of its own.
    fn start_reduce_scatter(
        self: Arc<Self>,
        tensor: &Tensor<B>,
        op: Reduction,
    ) -> Result<PendingCollective<B>> {
        Ok(PendingCollective::ready(self.reduce_scatter(tensor, op)?))
    }

    /// Waits until every collective this rank queued has completed, or fails within the time
    /// limit. Libraries whose calls return only once the exchange is done (MPI here) have
    /// nothing to wait for; a library that queues work on a device stream (NCCL) reports a dead
    /// peer here.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}

/// Checks that `tensor` may be all-reduced with `op`: f32, f64 or i64, and a float for
/// [`Reduction::Mean`]. For implementations of [`Communicator`].
pub fn check_reducible(dtype: DType, op: Reduction) -> Result<()> {
    let ok = match dtype {
        // A communicator that cannot carry the 16-bit floats (NCCL's, for now) refuses them
        // itself; MPI's combines them in f32 and rounds once.
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 => true,
        DType::I64 => op != Reduction::Mean,
        // Bool has no sum.
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(Error::UnsupportedDType {
            op: "all_reduce",
            dtype,
        })
    }
}

/// Checks that `tensor` may be reduce-scattered over `world_size` ranks (rank 1, a length that
/// divides by `world_size`) and returns the length of one rank's share. For implementations of
/// [`Communicator::reduce_scatter`].
pub fn check_shardable<B: Backend>(
    op: &'static str,
    tensor: &Tensor<B>,
    world_size: usize,
) -> Result<usize> {
    if tensor.rank() != 1 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("takes a rank-1 tensor, got shape {:?}", tensor.dims()),
        });
    }
    let len = tensor.numel();
    if world_size == 0 || len % world_size != 0 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("{len} elements do not split evenly over {world_size} ranks"),
        });
    }
    Ok(len / world_size)
}

/// Checks that `shard` may be gathered by `op` (`"all_gather"`, `"gather"`): rank 1, a float
/// (the 16-bit ones included) or i64. For implementations of [`Communicator::all_gather`] and [`Communicator::gather`].
pub fn check_gatherable<B: Backend>(op: &'static str, shard: &Tensor<B>) -> Result<()> {
    if shard.rank() != 1 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("takes a rank-1 tensor, got shape {:?}", shard.dims()),
        });
    }
    match shard.dtype() {
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I64 => Ok(()),
        dtype => Err(Error::UnsupportedDType { op, dtype }),
    }
}

/// Checks that the `root` of `op` (`"broadcast"`, `"gather"`) names a rank of a group of
/// `world_size`. For implementations of [`Communicator`].
pub fn check_root(op: &'static str, root: usize, world_size: usize) -> Result<()> {
    if root < world_size {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            op,
            msg: format!("root {root} is not a rank of a group of {world_size}"),
        })
    }
}
