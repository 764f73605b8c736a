//! `train --distributed`: one rank of a data-parallel run started by `mpirun -np N train
//! --distributed ...` (see `docs/DISTRIBUTED.md`). This module finds out which rank this
//! process is, which device it uses (`--device-per-rank`) and which communicator carries its
//! gradients; the training itself is [`crate::mnist_job::run_training_with`].
//!
//! * Built with `--features mpi`: MPI's processes (`tessera_distributed::MpiCommunicator`),
//!   host transfers on every backend.
//! * Built with `--features nccl` (implies `cuda`): `--backend cuda` exchanges gradients with
//!   NCCL on the GPUs, bootstrapped over MPI when `mpi` is on too, alone otherwise.
//! * Without either, `--distributed` fails saying how to build it.

use std::sync::Arc;
use tessera_core::{Backend, CommFailure, Error, Result};
use tessera_nn::distributed::{Communicator, LocalCommunicator};

/// Which library carries the gradients (`--comm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommChoice {
    /// NCCL for CUDA tensors when built with it, MPI otherwise.
    Auto,
    /// MPI, whatever the backend (tensors go through the host).
    Mpi,
    /// NCCL (CUDA only).
    Nccl,
}

/// This process's place in the run.
pub struct Launch {
    /// This process's rank.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// The rank among the processes of this host.
    pub local_rank: usize,
    /// Whether `--distributed` was given.
    pub distributed: bool,
    #[cfg(feature = "mpi")]
    mpi: Option<Arc<tessera_distributed::MpiCommunicator>>,
}

/// The error of a `--distributed` that cannot work.
fn unavailable(msg: impl Into<String>) -> Error {
    Error::Communication {
        library: "mpi",
        op: "init",
        rank: 0,
        world_size: 0,
        kind: CommFailure::Unavailable,
        msg: msg.into(),
    }
}

#[cfg(not(feature = "mpi"))]
/// The number of processes the launcher says it started, from the variables Open MPI, MPICH
/// and Slurm set (for a build without MPI to refuse a multi-process launch).
fn launcher_world_size() -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS"]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
}

impl Launch {
    /// A process on its own (no `--distributed`).
    pub fn single() -> Self {
        Launch {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            distributed: false,
            #[cfg(feature = "mpi")]
            mpi: None,
        }
    }

    /// Joins the run `mpirun` started (initialising MPI). Without the `mpi` feature, only a
    /// one-process run is possible (NCCL alone), anything else is an error naming the build.
    pub fn init() -> Result<Self> {
        #[cfg(feature = "mpi")]
        {
            let mpi = Arc::new(tessera_distributed::MpiCommunicator::init()?);
            Ok(Launch {
                rank: Communicator::<tessera_cpu::Cpu>::rank(&*mpi),
                world_size: Communicator::<tessera_cpu::Cpu>::world_size(&*mpi),
                local_rank: mpi.local_rank(),
                distributed: true,
                mpi: Some(mpi),
            })
        }
        #[cfg(not(feature = "mpi"))]
        {
            let launched = launcher_world_size().unwrap_or(1);
            if !cfg!(feature = "nccl") || launched > 1 {
                return Err(unavailable(format!(
                    "this train was built without MPI ({launched} processes were launched): \
                     build it with `cargo build --release -p tessera-cli --features mpi`"
                )));
            }
            Ok(Launch {
                distributed: true,
                ..Launch::single()
            })
        }
    }

    /// The device ordinal this rank uses: its local rank with `--device-per-rank`, else 0.
    pub fn device_ordinal(&self, device_per_rank: bool) -> usize {
        if device_per_rank {
            self.local_rank
        } else {
            0
        }
    }

    /// The communicator that carries host copies of `B`'s tensors: MPI's processes, or this
    /// process alone.
    pub fn host_communicator<B: Backend>(&self) -> Arc<dyn Communicator<B>> {
        #[cfg(feature = "mpi")]
        if let Some(mpi) = &self.mpi {
            return mpi.clone();
        }
        Arc::new(LocalCommunicator::new())
    }

    /// The communicator for a non-CUDA backend: `--comm nccl` is refused.
    pub fn communicator<B: Backend>(&self, choice: CommChoice) -> Result<Arc<dyn Communicator<B>>> {
        if choice == CommChoice::Nccl {
            return Err(unavailable("--comm nccl needs --backend cuda"));
        }
        Ok(self.host_communicator())
    }

    /// The communicator for a rank computing on `device`, whichever backend the registry opened:
    /// [`Launch::cuda_communicator`] for a CUDA device (built with `cuda`), else
    /// [`Launch::communicator`] (a checked CUDA device included: its tensors are checked on the
    /// host too).
    pub fn communicator_for<B: Backend>(
        &self,
        device: &B,
        choice: CommChoice,
    ) -> Result<Arc<dyn Communicator<B>>> {
        #[cfg(feature = "cuda")]
        if let Some(cuda) = (device as &dyn std::any::Any).downcast_ref::<tessera_cuda::Cuda>() {
            // `B` is `Cuda` here, so this communicator is one of `B`: the downcast only names it.
            let comm: Box<dyn std::any::Any> = Box::new(self.cuda_communicator(cuda, choice)?);
            return comm
                .downcast::<Arc<dyn Communicator<B>>>()
                .map(|comm| *comm)
                .map_err(|_| unavailable("the CUDA communicator has another device type"));
        }
        let _ = device;
        self.communicator(choice)
    }

    /// The communicator for the CUDA backend on `device`: NCCL when built with it and not
    /// `--comm mpi`; with `--comm auto`, MPI (or this process alone) when `libnccl.so.2` cannot
    /// be loaded on some rank.
    #[cfg(feature = "cuda")]
    pub fn cuda_communicator(
        &self,
        device: &tessera_cuda::Cuda,
        choice: CommChoice,
    ) -> Result<Arc<dyn Communicator<tessera_cuda::Cuda>>> {
        let _ = device;
        #[cfg(feature = "nccl")]
        if self.distributed && choice != CommChoice::Mpi {
            #[cfg(feature = "mpi")]
            let bootstrap: Arc<dyn tessera_distributed::Bootstrap> = match &self.mpi {
                Some(mpi) => mpi.clone(),
                None => Arc::new(tessera_distributed::SingleProcess),
            };
            #[cfg(not(feature = "mpi"))]
            let bootstrap: Arc<dyn tessera_distributed::Bootstrap> =
                Arc::new(tessera_distributed::SingleProcess);
            match tessera_distributed::NcclCommunicator::new(device, bootstrap) {
                Ok(nccl) => return Ok(Arc::new(nccl)),
                // Every rank learns together that NCCL is missing somewhere (the communicator
                // agrees on it before anyone waits), so all of them fall back alike.
                Err(Error::Communication {
                    kind: CommFailure::Unavailable,
                    msg,
                    ..
                }) if choice == CommChoice::Auto => {
                    if self.rank == 0 {
                        eprintln!("NCCL unavailable ({msg}); gradients go through the host");
                    }
                }
                Err(e) => return Err(e),
            }
        }
        if choice == CommChoice::Nccl {
            return Err(unavailable(
                "--comm nccl: this train was built without NCCL (--features nccl)",
            ));
        }
        Ok(self.host_communicator())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_single_process_is_rank_zero_of_one_on_device_zero() {
        let launch = Launch::single();
        assert_eq!(
            (launch.rank, launch.world_size, launch.distributed),
            (0, 1, false)
        );
        assert_eq!(launch.device_ordinal(true), 0);
        let comm = launch
            .communicator::<tessera_cpu::Cpu>(CommChoice::Auto)
            .unwrap();
        assert_eq!((comm.world_size(), comm.library()), (1, "local"));
        assert!(launch
            .communicator::<tessera_cpu::Cpu>(CommChoice::Nccl)
            .is_err());
        // The same through the device the registry hands out.
        let cpu = tessera_cpu::Cpu::new();
        let comm = launch.communicator_for(&cpu, CommChoice::Auto).unwrap();
        assert_eq!((comm.world_size(), comm.library()), (1, "local"));
        assert!(launch.communicator_for(&cpu, CommChoice::Nccl).is_err());
    }

    #[test]
    fn the_local_rank_picks_the_device() {
        let launch = Launch {
            rank: 5,
            world_size: 8,
            local_rank: 1,
            ..Launch::single()
        };
        assert_eq!(launch.device_ordinal(true), 1);
        assert_eq!(launch.device_ordinal(false), 0);
    }
}
