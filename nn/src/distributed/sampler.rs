//! [`DistributedSampler`]: which items of a data set each rank visits in each epoch.

use crate::data::shuffle::epoch_permutation;
use tessera_core::{Error, Result};

/// Gives each of `world_size` ranks its shard of every epoch of a data set of `len` items,
/// like PyTorch's `DistributedSampler`:
///
/// 1. the epoch's order is the permutation of [`crate::data::DataLoader`] with the same seed
///    (`epoch_permutation(len, seed, epoch)`, identical on every rank), or `0..len` unshuffled;
/// 2. its length is made a multiple of `world_size`: with `drop_last` the last
///    `len % world_size` items of the order are **dropped**; without it (the default) the order
///    is **padded** by repeating its first items, so a few items are seen twice in that epoch;
/// 3. rank `r` takes every `world_size`-th item starting at `r`.
///
/// Every rank gets exactly [`DistributedSampler::num_samples`] items, so all ranks run the
/// same number of steps (a rank with one step more would wait forever in a collective). Step 3
/// has a useful consequence: when each rank cuts its shard into batches of `b`, the union of
/// the ranks' `k`-th batches is the `k`-th batch of size `world_size·b` of one process (same
/// seed), which is why `W` ranks at batch `b` train like one process at batch `W·b`.
///
/// ```
/// use tessera_nn::distributed::DistributedSampler;
/// # fn main() -> tessera_core::Result<()> {
/// let rank1 = DistributedSampler::new(10, 1, 4)?.sequential();
/// assert_eq!(rank1.indices(0), vec![1, 5, 9]); // padded to 12 items: 0..10, then 0, 1
/// let rank3 = DistributedSampler::new(10, 3, 4)?.sequential();
/// assert_eq!(rank3.indices(0), vec![3, 7, 1]);
/// assert_eq!(rank3.drop_last(true).indices(0), vec![3, 7]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributedSampler {
    len: usize,
    rank: usize,
    world_size: usize,
    shuffle: bool,
    seed: u64,
    drop_last: bool,
}

impl DistributedSampler {
    /// Rank `rank`'s shard of `len` items over `world_size` ranks, shuffled with seed 0,
    /// padded.
    pub fn new(len: usize, rank: usize, world_size: usize) -> Result<Self> {
        if world_size == 0 || rank >= world_size {
            return Err(Error::InvalidArgument {
                op: "DistributedSampler::new",
                msg: format!("rank {rank} is not a rank of a group of {world_size}"),
            });
        }
        Ok(DistributedSampler {
            len,
            rank,
            world_size,
            shuffle: true,
            seed: 0,
            drop_last: false,
        })
    }

    /// Shuffles every epoch with `seed` (the same on every rank).
    pub fn shuffled(mut self, seed: u64) -> Self {
        self.shuffle = true;
        self.seed = seed;
        self
    }

    /// Keeps the items in index order.
    pub fn sequential(mut self) -> Self {
        self.shuffle = false;
        self
    }

    /// Drops the tail of each epoch's order (`true`) instead of padding it (`false`).
    pub fn drop_last(mut self, drop_last: bool) -> Self {
        self.drop_last = drop_last;
        self
    }

    /// Items per rank and epoch: `len / world_size` rounded down with `drop_last`, up without.
    pub fn num_samples(&self) -> usize {
        if self.drop_last {
            self.len / self.world_size
        } else {
            self.len.div_ceil(self.world_size)
        }
    }

    /// Items of the data set it deals.
    pub fn dataset_len(&self) -> usize {
        self.len
    }

    /// Items of an epoch over all ranks: `num_samples() * world_size`.
    pub fn total_size(&self) -> usize {
        self.num_samples() * self.world_size
    }

    /// This rank's items of epoch `epoch`, in the order to visit them.
    pub fn indices(&self, epoch: u64) -> Vec<usize> {
        self.indices_from(epoch, 0)
    }

    /// This rank's items of what is left of epoch `epoch` after its first `offset` items (in
    /// the epoch's order over all ranks, before padding): those items are dealt round-robin to
    /// the ranks, padded (repeating the first of them) to a multiple of the world size, or cut
    /// to one with `drop_last`. With `offset` 0, [`DistributedSampler::indices`]. A run resumed
    /// inside an epoch on another number of ranks continues with the items the earlier ranks
    /// had not reached.
    pub fn indices_from(&self, epoch: u64, offset: usize) -> Vec<usize> {
        let mut order = if self.shuffle {
            epoch_permutation(self.len, self.seed, epoch)
        } else {
            (0..self.len).collect()
        };
        order.drain(..offset.min(order.len()));
        let left = order.len();
        let total = match self.drop_last {
            true => left / self.world_size * self.world_size,
            false => left.div_ceil(self.world_size) * self.world_size,
        };
        if order.is_empty() {
            return Vec::new();
        }
        while order.len() < total {
            let missing = (total - order.len()).min(order.len());
            order.extend_from_within(..missing);
        }
        order.truncate(total);
        order
            .into_iter()
            .skip(self.rank)
            .step_by(self.world_size)
            .collect()
    }
}
