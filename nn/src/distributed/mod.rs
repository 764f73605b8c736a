//! Data-parallel training across processes and machines: one process ("rank") per device, each
//! on its own shard of every batch, gradients averaged every step.
//!
//! This module is the backend- and library-independent part:
//!
//! * [`Communicator`]: rank, world size, all-reduce (sum, mean, max, min) in place, broadcast,
//!   barrier, with typed [`tessera_core::Error::Communication`] errors. [`LocalCommunicator`]
//!   is the one-rank group; `tessera-distributed` implements it over **MPI** (host tensors of
//!   any backend) and **NCCL** (CUDA device buffers, no host round trip).
//! * [`DistributedDataParallel`]: broadcasts the model from rank 0, averages the gradients in
//!   [`buckets`](plan_buckets) of about 25 MiB after backward ([`GradientReducer`]), every rank
//!   then takes the same optimizer step ([`DistributedOptimizer`] does it inside `step`).
//! * [`ShardedOptimizer`] (with [`ShardedUnits`] at level 3): the optimizer state, gradients
//!   and parameters split over the ranks instead (ZeRO's stages, see [`ShardLevel`]).
//! * [`DistributedSampler`]: each rank's seeded, equal-sized shard of every epoch.
//! * [`save_on_rank0`]: checkpoints written by rank 0 only.
//!
//! A training loop:
//!
//! ```
//! use std::sync::Arc;
//! use tessera_core::{DType, Generator};
//! use tessera_nn::distributed::{Communicator, DistributedDataParallel, DistributedSampler, LocalCommunicator};
//! use tessera_nn::layers::LinearConfig;
//! use tessera_nn::optim::{Adam, AdamConfig};
//! use tessera_nn::Module;
//! # fn main() -> tessera_core::Result<()> {
//! let dev = tessera_cpu::Cpu::new();
//! // Under `mpirun`, `tessera_distributed::MpiCommunicator::init()?` instead.
//! let comm: Arc<dyn Communicator<tessera_cpu::Cpu>> = Arc::new(LocalCommunicator::new());
//! let model = LinearConfig::new(2, 2).init(&dev, &mut Generator::new(0))?;
//! let ddp = DistributedDataParallel::new(model, comm.clone())?;
//! let mut optimizer = Adam::new(ddp.parameters(), AdamConfig::new(1e-3))?;
//! let sampler = DistributedSampler::new(100, comm.rank(), comm.world_size())?.shuffled(7);
//! for epoch in 0..2 {
//!     for indices in sampler.indices(epoch).chunks(10) {
//!         let x = tessera_core::Tensor::randn([indices.len(), 2], DType::F32, indices[0] as u64, &dev)?;
//!         let y = tessera_core::Tensor::zeros([indices.len()], DType::I64, &dev)?;
//!         ddp.train_step(&mut optimizer, x, &y)?;
//!     }
//! }
//! # Ok(()) }
//! ```

mod buckets;
mod checkpoint;
mod communicator;
mod ddp;
mod local;
mod optimizer;
mod pending;
mod reducer;
mod sampler;
mod sharded;

pub use buckets::{plan_buckets, Bucket, DEFAULT_BUCKET_BYTES};
pub(crate) use checkpoint::all_ranks_ok;
pub use checkpoint::save_on_rank0;
pub use communicator::{
    check_gatherable, check_reducible, check_root, check_shardable, Communicator, Reduction,
};
pub use ddp::{DdpConfig, DistributedDataParallel};
pub use local::LocalCommunicator;
pub use optimizer::DistributedOptimizer;
pub use pending::PendingCollective;
pub use reducer::{CommStats, GradientReducer};
pub use sampler::DistributedSampler;
pub(crate) use sharded::{cached_step, install_units};
pub use sharded::{
    DeferredUnits, ShardLevel, ShardedOptimizer, ShardedUnits, UnitSlot, WholeVisitor,
};
