//! The tensor collectives of [`MpiCommunicator`], combined in a fixed order of ranks.
//!
//! `MPI_Iallreduce` and `MPI_Ireduce_scatter_block` may add the ranks' values in different
//! orders (the library picks an algorithm per size and world), and floating-point sums in
//! different orders differ in their last bits. Sharded training must agree bit for bit with
//! plain data parallelism, so every reduction of a tensor here is the same two steps:
//!
//! 1. **reduce-scatter**: `MPI_Ialltoall` gives each rank every rank's copy of its block, which
//!    it combines in rank order (`((x₀ + x₁) + x₂) + …`), then divides once for a mean;
//! 2. **all-gather** (`MPI_Iallgather`) of the blocks, for an all-reduce.
//!
//! That is the bandwidth-optimal shape of an all-reduce (each rank sends and receives about
//! twice its data), and a reduce-scatter is its first half, so both give the same bits.

use super::raw::Idle;
use super::{host_buffer, MpiCommunicator, Posted, State};
use crate::signature::{
    dtype_code, shape_hash, Signature, ALL_GATHER_CODE, ALL_REDUCE_CODE, REDUCE_SCATTER_CODE,
};
use mpi::ffi;
use tessera_core::{Backend, DType, Error, HostData, Result, Tensor};
use tessera_nn::distributed::{check_gatherable, check_reducible, check_shardable, Reduction};

/// A host element type the ordered collectives carry.
pub(super) trait Element: Copy + Default + Send + 'static {
    /// What the ranks' values are combined in: the type itself, or f32 for the 16-bit floats
    /// (combined in f32 and rounded once, so a sum over the ranks is not rounded at each rank).
    type Acc: Copy;
    /// MPI's datatype of it (the 16-bit floats travel as their bits, `MPI_UINT16_T`).
    fn datatype() -> ffi::MPI_Datatype;
    /// The value in the combining type.
    fn widen(self) -> Self::Acc;
    /// Combined values rounded back (the values themselves, not a copy, where the combining
    /// type is the type).
    fn narrow_all(acc: Vec<Self::Acc>) -> Result<Vec<Self>>;
    /// `a op b` (a mean adds; [`Element::mean`] divides afterwards).
    fn combine(a: Self::Acc, b: Self::Acc, op: Reduction) -> Self::Acc;
    /// `acc / n` for a mean (integers have none: [`check_reducible`] refuses them).
    fn mean(acc: Self::Acc, n: usize) -> Self::Acc;
}

/// MPI's datatype of the elements of `values`.
pub(super) fn datatype_of<T: Element>(_values: &[T]) -> ffi::MPI_Datatype {
    T::datatype()
}

/// `a op b` for floats, as MPI's operations do it (`MPI_MAX`: `(a > b) ? a : b`).
fn combine_float<F: Copy + PartialOrd + std::ops::Add<Output = F>>(a: F, b: F, op: Reduction) -> F {
    match op {
        Reduction::Sum | Reduction::Mean => a + b,
        Reduction::Max => {
            if b > a {
                b
            } else {
                a
            }
        }
        Reduction::Min => {
            if b < a {
                b
            } else {
                a
            }
        }
    }
}

macro_rules! float_element {
    ($t:ty, $datatype:ident) => {
        impl Element for $t {
            type Acc = $t;
            fn datatype() -> ffi::MPI_Datatype {
                // SAFETY: MPI's predefined datatype, read after initialisation.
                unsafe { ffi::$datatype }
            }
            fn widen(self) -> $t {
                self
            }
            fn narrow_all(acc: Vec<$t>) -> Result<Vec<$t>> {
                Ok(acc)
            }
            fn combine(a: $t, b: $t, op: Reduction) -> $t {
                combine_float(a, b, op)
            }
            fn mean(acc: $t, n: usize) -> $t {
                acc / n as $t
            }
        }
    };
}

float_element!(f32, RSMPI_FLOAT);
float_element!(f64, RSMPI_DOUBLE);

macro_rules! half_element {
    ($t:ty) => {
        impl Element for $t {
            type Acc = f32;
            fn datatype() -> ffi::MPI_Datatype {
                // SAFETY: MPI's predefined datatype, read after initialisation. The 16-bit
                // floats are two bytes with no padding (`#[repr(transparent)]` over `u16`).
                unsafe { ffi::RSMPI_UINT16_T }
            }
            fn widen(self) -> f32 {
                self.to_f32()
            }
            fn narrow_all(acc: Vec<f32>) -> Result<Vec<$t>> {
                host_buffer::mapped(&acc, <$t>::from_f32)
            }
            fn combine(a: f32, b: f32, op: Reduction) -> f32 {
                combine_float(a, b, op)
            }
            fn mean(acc: f32, n: usize) -> f32 {
                acc / n as f32
            }
        }
    };
}

half_element!(tessera_core::f16);
half_element!(tessera_core::bf16);

impl Element for i64 {
    type Acc = i64;
    fn datatype() -> ffi::MPI_Datatype {
        // SAFETY: MPI's predefined datatype, read after initialisation.
        unsafe { ffi::RSMPI_INT64_T }
    }
    fn widen(self) -> i64 {
        self
    }
    fn narrow_all(acc: Vec<i64>) -> Result<Vec<i64>> {
        Ok(acc)
    }
    fn combine(a: i64, b: i64, op: Reduction) -> i64 {
        match op {
            Reduction::Sum | Reduction::Mean => a.wrapping_add(b),
            Reduction::Max => a.max(b),
            Reduction::Min => a.min(b),
        }
    }
    fn mean(acc: i64, _n: usize) -> i64 {
        acc
    }
}

impl MpiCommunicator {
    /// This rank's block of the rank-ordered combination of every rank's `values` (whose
    /// length is a multiple of the world size).
    fn reduce_scatter_vec<T: Element>(
        &self,
        state: &mut State,
        op: &'static str,
        values: Vec<T>,
        reduction: Reduction,
    ) -> Result<Vec<T>> {
        let what = exchange_description(values.len(), self.world_size);
        let posted = self.post_reduce_scatter_vec(state, op, values)?;
        let (_, recv) = self.complete(state, op, &what, posted, Idle::Yield)?;
        combine_blocks(&recv, self.world_size, reduction)
    }

    /// Starts the exchange of a reduce-scatter of `values` (`MPI_Ialltoall`: rank `r` receives
    /// every rank's block `r`); its buffers are the values and the receiving vector, which
    /// [`combine_blocks`] turns into the result once complete.
    pub(super) fn post_reduce_scatter_vec<T: Element>(
        &self,
        state: &mut State,
        op: &'static str,
        values: Vec<T>,
    ) -> Result<Posted<(Vec<T>, Vec<T>)>> {
        let n = self.world_size;
        let count = self.count(op, values.len() / n)?;
        let datatype = T::datatype();
        let recv = host_buffer::zeroed::<T>(values.len())?;
        let what = exchange_description(values.len(), n);
        self.post(
            state,
            op,
            &what,
            (values, recv),
            |(send, recv), comm, request| {
                // SAFETY: both buffers hold `n * count` elements of `datatype`.
                unsafe {
                    ffi::MPI_Ialltoall(
                        send.as_ptr().cast(),
                        count,
                        datatype,
                        recv.as_mut_ptr().cast(),
                        count,
                        datatype,
                        comm,
                        request,
                    )
                }
            },
        )
    }

    /// Every rank's `block` (same length on every rank), concatenated in rank order.
    fn all_gather_vec<T: Element>(
        &self,
        state: &mut State,
        op: &'static str,
        block: Vec<T>,
    ) -> Result<Vec<T>> {
        let what = gather_description(block.len());
        let posted = self.post_all_gather_vec(state, op, block)?;
        let (_, recv) = self.complete(state, op, &what, posted, Idle::Yield)?;
        Ok(recv)
    }

    /// Starts the all-gather of `block` (`MPI_Iallgather`); its buffers are the block and
    /// the receiving vector.
    pub(super) fn post_all_gather_vec<T: Element>(
        &self,
        state: &mut State,
        op: &'static str,
        block: Vec<T>,
    ) -> Result<Posted<(Vec<T>, Vec<T>)>> {
        let count = self.count(op, block.len())?;
        let datatype = T::datatype();
        let recv = host_buffer::zeroed::<T>(block.len() * self.world_size)?;
        let what = gather_description(block.len());
        self.post(
            state,
            op,
            &what,
            (block, recv),
            |(send, recv), comm, request| {
                // SAFETY: `send` holds `count` elements, `recv` `world_size * count`.
                unsafe {
                    ffi::MPI_Iallgather(
                        send.as_ptr().cast(),
                        count,
                        datatype,
                        recv.as_mut_ptr().cast(),
                        count,
                        datatype,
                        comm,
                        request,
                    )
                }
            },
        )
    }

    /// Checks that every rank all-gathers a shard of `dtype` and `count` elements (a
    /// collective).
    pub(super) fn agree_all_gather(
        &self,
        state: &mut State,
        dtype: DType,
        count: usize,
    ) -> Result<()> {
        self.agree(
            state,
            "all_gather",
            Signature {
                collective: ALL_GATHER_CODE,
                reduction: 0,
                dtype: dtype_code(dtype),
                count: count as u64,
                root: 0,
                shape: 0,
            },
        )
    }

    /// Checks that every rank reduce-scatters `count` elements of `dtype` with `reduction`
    /// now (the signature exchange of every collective).
    pub(super) fn agree_reduce_scatter(
        &self,
        state: &mut State,
        dtype: DType,
        count: usize,
        reduction: Reduction,
    ) -> Result<()> {
        self.agree(
            state,
            "reduce_scatter",
            Signature {
                collective: REDUCE_SCATTER_CODE,
                reduction: reduction as u64 + 1,
                dtype: dtype_code(dtype),
                count: count as u64,
                root: 0,
                shape: 0,
            },
        )
    }

    /// [`tessera_nn::distributed::Communicator::all_reduce`]: padded to a multiple of the
    /// world size, reduce-scattered and all-gathered.
    pub(super) fn all_reduce_ordered<B: Backend>(
        &self,
        tensor: &mut Tensor<B>,
        reduction: Reduction,
    ) -> Result<()> {
        const OP: &str = "all_reduce";
        check_reducible(tensor.dtype(), reduction)?;
        let mut state = self.healthy(OP)?;
        let len = tensor.numel();
        self.agree(
            &mut state,
            OP,
            Signature {
                collective: ALL_REDUCE_CODE,
                reduction: reduction as u64 + 1,
                dtype: dtype_code(tensor.dtype()),
                count: len as u64,
                root: 0,
                shape: shape_hash(tensor.shape()),
            },
        )?;
        if self.world_size == 1 || len == 0 {
            return Ok(());
        }
        let padded = len.div_ceil(self.world_size) * self.world_size;
        let data = each_numeric!(tensor.to_host()?, OP, |v| {
            let v = host_buffer::grown(v, padded)?;
            let mine = self.reduce_scatter_vec(&mut state, OP, v, reduction)?;
            let mut all = self.all_gather_vec(&mut state, OP, mine)?;
            all.truncate(len);
            all
        });
        drop(state);
        *tensor = Tensor::from_host(data, tensor.shape().clone(), tensor.backend())?;
        Ok(())
    }

    /// [`tessera_nn::distributed::Communicator::reduce_scatter`].
    pub(super) fn reduce_scatter_ordered<B: Backend>(
        &self,
        tensor: &Tensor<B>,
        reduction: Reduction,
    ) -> Result<Tensor<B>> {
        const OP: &str = "reduce_scatter";
        check_reducible(tensor.dtype(), reduction)?;
        let block = check_shardable(OP, tensor, self.world_size)?;
        let mut state = self.healthy(OP)?;
        self.agree_reduce_scatter(&mut state, tensor.dtype(), tensor.numel(), reduction)?;
        if self.world_size == 1 || block == 0 {
            return tensor.contiguous();
        }
        let data = each_numeric!(tensor.to_host()?, OP, |v| self
            .reduce_scatter_vec(&mut state, OP, v, reduction)?);
        drop(state);
        Tensor::from_host(data, [block], tensor.backend())
    }

    /// [`tessera_nn::distributed::Communicator::all_gather`].
    pub(super) fn all_gather_ordered<B: Backend>(&self, shard: &Tensor<B>) -> Result<Tensor<B>> {
        const OP: &str = "all_gather";
        check_gatherable(OP, shard)?;
        let mut state = self.healthy(OP)?;
        self.agree_all_gather(&mut state, shard.dtype(), shard.numel())?;
        if self.world_size == 1 {
            return shard.contiguous();
        }
        let total = shard.numel() * self.world_size;
        if total == 0 {
            return Tensor::zeros([0], shard.dtype(), shard.backend());
        }
        let data = each_numeric!(shard.to_host()?, OP, |v| self
            .all_gather_vec(&mut state, OP, v)?);
        drop(state);
        Tensor::from_host(data, [total], shard.backend())
    }
}

/// What the exchange of a reduce-scatter of `len` elements over `n` ranks is called in errors.
pub(super) fn exchange_description(len: usize, n: usize) -> String {
    format!("the exchange of {n} blocks of {} elements", len / n.max(1))
}

/// This rank's block of a reduce-scatter from what the exchange received (`n` ranks' copies
/// of the block, in rank order): combined in rank order (`((x₀ + x₁) + x₂) + …`), divided once
/// for a mean, rounded once to `T`.
pub(super) fn combine_blocks<T: Element>(
    recv: &[T],
    n: usize,
    reduction: Reduction,
) -> Result<Vec<T>> {
    let block = recv.len() / n.max(1);
    let mut acc = host_buffer::mapped(&recv[..block], T::widen)?;
    for from in recv.chunks_exact(block.max(1)).skip(1) {
        for (a, &x) in acc.iter_mut().zip(from) {
            *a = T::combine(*a, x.widen(), reduction);
        }
    }
    if reduction == Reduction::Mean {
        acc.iter_mut().for_each(|a| *a = T::mean(*a, n));
    }
    T::narrow_all(acc)
}

/// What an all-gather of `count` elements per rank is called in errors.
pub(super) fn gather_description(count: usize) -> String {
    format!("the all-gather of {count} elements per rank")
}
