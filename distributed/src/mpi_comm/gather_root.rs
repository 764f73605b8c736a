//! [`tessera_nn::distributed::Communicator::gather`] over MPI: every rank's block to one rank
//! (`MPI_Igather`), which is all a consolidated checkpoint's writer needs.

use super::ordered::Element;
use super::{host_buffer, MpiCommunicator, State};
use crate::signature::{dtype_code, Signature, GATHER_CODE};
use mpi::ffi;
use std::ffi::c_int;
use tessera_core::{Backend, Error, HostData, Result, Tensor};
use tessera_nn::distributed::{check_gatherable, check_root};

impl MpiCommunicator {
    /// Every rank's `shard` concatenated in rank order on `root`; `None` elsewhere.
    pub(super) fn gather_to_root<B: Backend>(
        &self,
        shard: &Tensor<B>,
        root: usize,
    ) -> Result<Option<Tensor<B>>> {
        const OP: &str = "gather";
        check_gatherable(OP, shard)?;
        check_root(OP, root, self.world_size)?;
        let mut state = self.healthy(OP)?;
        self.agree(
            &mut state,
            OP,
            Signature {
                collective: GATHER_CODE,
                reduction: 0,
                dtype: dtype_code(shard.dtype()),
                count: shard.numel() as u64,
                root: root as u64,
                shape: 0,
            },
        )?;
        let is_root = self.rank == root;
        if self.world_size == 1 {
            return Ok(Some(shard.contiguous()?));
        }
        let total = shard.numel() * self.world_size;
        if total == 0 {
            return is_root
                .then(|| Tensor::zeros([0], shard.dtype(), shard.backend()))
                .transpose();
        }
        let data = each_numeric!(shard.to_host()?, OP, |v| self
            .gather_vec(&mut state, OP, v, root)?);
        drop(state);
        if !is_root {
            return Ok(None);
        }
        Tensor::from_host(data, [total], shard.backend()).map(Some)
    }

    /// `MPI_Igather` of `block` (same length on every rank) to `root`: the blocks in rank
    /// order there, nothing elsewhere (an empty vector: no buffer is allocated to receive).
    fn gather_vec<T: Element>(
        &self,
        state: &mut State,
        op: &'static str,
        block: Vec<T>,
        root: usize,
    ) -> Result<Vec<T>> {
        let count = self.count(op, block.len())?;
        let datatype = T::datatype();
        let is_root = self.rank == root;
        let recv_len = if is_root {
            block.len() * self.world_size
        } else {
            0
        };
        let recv = host_buffer::zeroed::<T>(recv_len)?;
        let what = format!("the gather of {count} elements per rank to rank {root}");
        let (_, recv) = self.run(
            state,
            op,
            &what,
            (block, recv),
            |(send, recv), comm, request| {
                // SAFETY: `send` holds `count` elements of `datatype`; on `root`, `recv` holds
                // `world_size * count` (MPI reads the receive arguments on the root only);
                // `root` is a rank of `comm` (checked above).
                unsafe {
                    ffi::MPI_Igather(
                        send.as_ptr().cast(),
                        count,
                        datatype,
                        recv.as_mut_ptr().cast(),
                        count,
                        datatype,
                        root as c_int,
                        comm,
                        request,
                    )
                }
            },
        )?;
        Ok(recv)
    }
}
