//! # tessera-distributed
//!
//! The communication libraries behind Tessera's data-parallel training
//! ([`tessera_nn::distributed`]): implementations of its
//! [`Communicator`](tessera_nn::distributed::Communicator) trait over the engines clusters
//! already run.
//!
//! * **`MpiCommunicator`** (feature `mpi`): the processes `mpirun` started, through MPI (the
//!   `mpi` crate, rsmpi; Open MPI or MPICH). Tensors of any backend travel as host copies.
//!   Needs the MPI headers and `libclang` to build (`libopenmpi-dev`, `libclang-dev`) and
//!   `libmpi` at run time.
//! * **`NcclCommunicator`** (feature `nccl`): NVIDIA's NCCL on the CUDA backend's device
//!   buffers and stream, no host round trip. `libnccl.so.2` is loaded at run time (like
//!   cuBLAS), so the crate builds and starts without NCCL or a GPU; the unique id is made by
//!   rank 0 and broadcast by a [`Bootstrap`] (the `MpiCommunicator`, or [`SingleProcess`]).
//!
//! Both check before every collective that all ranks call the same one with the same sizes
//! ([`signature`]), wait for their peers at most a time limit ([`timeout_from_env`], 5 minutes
//! by default, `TESSERA_DIST_TIMEOUT_S`), and report failures as
//! [`tessera_core::Error::Communication`]. See `docs/DISTRIBUTED.md` for launching jobs.

#![warn(missing_docs)]

pub mod bootstrap;
#[cfg(feature = "mpi")]
mod mpi_comm;
#[cfg(feature = "nccl")]
pub mod nccl;
pub mod signature;
mod timeout;

pub use bootstrap::{Bootstrap, SingleProcess};
#[cfg(feature = "mpi")]
pub use mpi_comm::MpiCommunicator;
#[cfg(feature = "nccl")]
pub use nccl::NcclCommunicator;
pub use timeout::{parse_timeout, timeout_from_env, DEFAULT_TIMEOUT, TIMEOUT_ENV_VAR};
