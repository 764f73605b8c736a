//! [`NcclCommunicator`]: NCCL's collectives on the CUDA backend's device buffers, queued on the
//! device's own stream (ordered with every Tessera op, no host round trip).
//!
//! * **Loading**: `libnccl.so.2` is opened at run time ([`NcclLibrary`]); the crate builds and
//!   starts without it or a GPU.
//! * **Joining**: rank 0 makes the `ncclUniqueId` and broadcasts it through a [`Bootstrap`]
//!   (`MpiCommunicator` under `mpirun`, [`crate::SingleProcess`] for one rank); every rank
//!   then calls `ncclCommInitRank` on its device. One GPU per rank: one H200 cannot host two
//!   NCCL ranks (NCCL refuses two ranks of one communicator on one device).
//! * **Argument checks**: before each collective the ranks all-reduce its [`Signature`] through
//!   the bootstrap (a few host values), so mismatched calls give
//!   [`CommFailure::Mismatch`] instead of undefined behaviour.
//! * **Output**: each collective writes into a fresh device buffer that replaces the tensor
//!   handle (tensors are immutable); a mean is NCCL's sum divided by the world size on the
//!   device.
//! * **Failures**: NCCL collectives are asynchronous; a dead peer leaves its kernels spinning
//!   on the GPU. [`Communicator::synchronize`] (which `DistributedDataParallel` calls after
//!   each step's all-reduces) polls the stream (`cuStreamQuery`) and `ncclCommGetAsyncError`
//!   against the time limit; on an error or at the limit it calls `ncclCommAbort` (which makes
//!   the pending kernels return) and fails with [`CommFailure::PeerFailed`] or
//!   [`CommFailure::Timeout`]; the communicator is then broken. `ncclCommInitRank` itself is
//!   blocking: a bootstrap barrier (with the bootstrap's time limit) just before it makes sure
//!   every rank is there, but a peer dying during the init itself is not covered.

mod cuda_interop;
pub mod library;

use crate::bootstrap::Bootstrap;
use crate::signature::{
    dtype_code, shape_hash, Signature, ALL_GATHER_CODE, ALL_REDUCE_CODE, BROADCAST_CODE,
    ENCODED_LEN, REDUCE_SCATTER_CODE,
};
use crate::timeout::timeout_from_env;
use cuda_interop::Cuda;
pub use library::NcclLibrary;
use library::{data_type, red_op, RawComm, UniqueId, IN_PROGRESS, SUCCESS};
use std::ffi::c_int;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tessera_core::{CommFailure, DType, Error, Result, Tensor};
use tessera_nn::distributed::{
    check_gatherable, check_reducible, check_root, check_shardable, Communicator, Reduction,
};

const LIBRARY: &str = "nccl";

/// A live `ncclComm_t`.
struct Comm(RawComm);

// SAFETY: an NCCL communicator may be used from any thread; every call on this one is made
// under `NcclCommunicator::state`'s lock, so no two calls overlap.
unsafe impl Send for Comm {}
// SAFETY: as above.
unsafe impl Sync for Comm {}

struct State {
    /// The communicator; `None` once aborted.
    comm: Option<Comm>,
    /// Why the communicator is broken, once it is.
    broken: Option<String>,
}

/// A group of processes, one CUDA device each, exchanging device tensors through NCCL. See
/// the [module documentation](self).
///
/// ```no_run
/// use std::sync::Arc;
/// use tessera_distributed::{MpiCommunicator, NcclCommunicator};
/// # fn main() -> tessera_core::Result<()> {
/// let mpi = Arc::new(MpiCommunicator::init()?);
/// let device = tessera_cuda::Cuda::from_ordinal(mpi.local_rank())?;
/// let nccl = NcclCommunicator::new(&device, mpi)?;
/// # Ok(()) }
/// ```
pub struct NcclCommunicator {
    library: Arc<NcclLibrary>,
    device: Cuda,
    bootstrap: Arc<dyn Bootstrap>,
    rank: usize,
    world_size: usize,
    timeout: Duration,
    version: i32,
    state: Mutex<State>,
}

impl std::fmt::Debug for NcclCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NcclCommunicator")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("version", &self.version)
            .field("library", &self.library.path())
            .finish()
    }
}

impl NcclCommunicator {
    /// Joins the NCCL communicator of the bootstrap's ranks on `device` (a collective), with
    /// the time limit of [`crate::timeout_from_env`].
    pub fn new(device: &Cuda, bootstrap: Arc<dyn Bootstrap>) -> Result<Self> {
        Self::with_timeout(device, bootstrap, timeout_from_env()?)
    }

    /// [`NcclCommunicator::new`] with an explicit time limit for [`Communicator::synchronize`].
    pub fn with_timeout(
        device: &Cuda,
        bootstrap: Arc<dyn Bootstrap>,
        timeout: Duration,
    ) -> Result<Self> {
        let (rank, world_size) = (bootstrap.rank(), bootstrap.world_size());
        let fail = |kind, msg: String| Error::Communication {
            library: LIBRARY,
            op: "init",
            rank,
            world_size,
            kind,
            msg,
        };
        // Every rank learns whether every rank could load NCCL before anyone waits for it.
        let loaded = NcclLibrary::load();
        let mut missing = [f64::from(u8::from(loaded.is_err()))];
        bootstrap.all_reduce_values(&mut missing, Reduction::Max)?;
        let library = match loaded {
            Err(reason) => return Err(fail(CommFailure::Unavailable, reason)),
            Ok(_) if missing[0] != 0.0 => {
                return Err(fail(
                    CommFailure::Unavailable,
                    "another rank could not load NCCL (see its error)".into(),
                ))
            }
            Ok(library) => Arc::new(library),
        };
        let version = library
            .version()
            .map_err(|e| fail(CommFailure::Library, e))?;
        let mut id = UniqueId { internal: [0; 128] };
        let made = if rank == 0 {
            // SAFETY: `id` is a valid out-pointer.
            unsafe { (library.get_unique_id)(&mut id) }
        } else {
            SUCCESS
        };
        let mut failed = [f64::from(u8::from(made != SUCCESS))];
        bootstrap.all_reduce_values(&mut failed, Reduction::Max)?;
        if failed[0] != 0.0 {
            let msg = if made != SUCCESS {
                format!("ncclGetUniqueId failed: {}", library.error_string(made))
            } else {
                "rank 0 could not make the NCCL unique id".into()
            };
            return Err(fail(CommFailure::Library, msg));
        }
        bootstrap.broadcast_bytes(&mut id.internal, 0)?;
        // Everyone is alive right before the blocking init.
        bootstrap.barrier_all()?;
        cuda_interop::stream(device)?; // makes the device current for NCCL
        let mut comm: RawComm = std::ptr::null_mut();
        // SAFETY: `comm` is a valid out-pointer; `id` is the unique id of rank 0, and every
        // rank passes the same world size and its own rank.
        let rc =
            unsafe { (library.comm_init_rank)(&mut comm, world_size as c_int, id, rank as c_int) };
        let mut failed = [f64::from(u8::from(rc != SUCCESS))];
        bootstrap.all_reduce_values(&mut failed, Reduction::Max)?;
        if rc != SUCCESS || failed[0] != 0.0 {
            if rc == SUCCESS {
                // SAFETY: created above, aborted once.
                unsafe { (library.comm_abort)(comm) };
            }
            let msg = if rc != SUCCESS {
                format!("ncclCommInitRank failed: {}", library.error_string(rc))
            } else {
                "another rank could not join the NCCL communicator".into()
            };
            return Err(fail(CommFailure::Library, msg));
        }
        let communicator = NcclCommunicator {
            library,
            device: device.clone(),
            bootstrap,
            rank,
            world_size,
            timeout,
            version,
            state: Mutex::new(State {
                comm: Some(Comm(comm)),
                broken: None,
            }),
        };
        communicator.check_membership()?;
        Ok(communicator)
    }

    /// NCCL's version (`major * 10000 + minor * 100 + patch`).
    pub fn version(&self) -> i32 {
        self.version
    }

    /// The library file that was loaded.
    pub fn library_path(&self) -> &std::path::Path {
        self.library.path()
    }

    /// The device this rank's buffers live on.
    pub fn device(&self) -> &Cuda {
        &self.device
    }

    /// Checks that NCCL sees the communicator the bootstrap described.
    fn check_membership(&self) -> Result<()> {
        let state = self.lock();
        let comm = state.comm.as_ref().expect("just created").0;
        let read = |f: library::CommIntFn| -> Result<c_int> {
            let mut value: c_int = -1;
            // SAFETY: `comm` is live; `value` is a valid out-pointer.
            let rc = unsafe { f(comm, &mut value) };
            if rc != SUCCESS {
                return Err(self.error(
                    "init",
                    CommFailure::Library,
                    self.library.error_string(rc),
                ));
            }
            Ok(value)
        };
        let (count, rank, device) = (
            read(self.library.comm_count)?,
            read(self.library.comm_user_rank)?,
            read(self.library.comm_cu_device)?,
        );
        let expected = (
            self.world_size as c_int,
            self.rank as c_int,
            cuda_interop::ordinal(&self.device) as c_int,
        );
        if (count, rank, device) != expected {
            return Err(self.error(
                "init",
                CommFailure::Library,
                format!(
                    "NCCL reports rank {rank} of {count} on device {device}, expected rank {} \
                     of {} on device {}",
                    expected.1, expected.0, expected.2
                ),
            ));
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn error(&self, op: &'static str, kind: CommFailure, msg: impl Into<String>) -> Error {
        Error::Communication {
            library: LIBRARY,
            op,
            rank: self.rank,
            world_size: self.world_size,
            kind,
            msg: msg.into(),
        }
    }

    /// The live communicator, or [`CommFailure::Broken`].
    fn healthy<'a>(&self, state: &'a State, op: &'static str) -> Result<&'a Comm> {
        match (&state.broken, &state.comm) {
            (None, Some(comm)) => Ok(comm),
            (reason, _) => Err(self.error(
                op,
                CommFailure::Broken,
                reason.clone().unwrap_or_else(|| "aborted".into()),
            )),
        }
    }

    /// Aborts the communicator after a failure (making pending kernels return) and records
    /// why; returns the error.
    fn break_with(
        &self,
        state: &mut State,
        op: &'static str,
        kind: CommFailure,
        msg: String,
    ) -> Error {
        if let Some(comm) = state.comm.take() {
            // SAFETY: the communicator is live and aborted exactly once (taken out above).
            unsafe { (self.library.comm_abort)(comm.0) };
        }
        state.broken = Some(msg.clone());
        self.error(op, kind, msg)
    }

    /// Checks with the other ranks (through the bootstrap) that they are about to make the
    /// same call.
    fn agree(&self, op: &'static str, signature: Signature) -> Result<()> {
        let mut encoded: [f64; ENCODED_LEN] = signature.encode();
        self.bootstrap
            .all_reduce_values(&mut encoded, Reduction::Max)?;
        match signature.disagreement(&encoded) {
            None => Ok(()),
            Some(msg) => Err(self.error(op, CommFailure::Mismatch, msg)),
        }
    }

    /// Queues `launch(send, recv, count, datatype, comm, stream)` writing into a fresh tensor
    /// shaped like `tensor`, and replaces `tensor` with it.
    fn queue(
        &self,
        op: &'static str,
        tensor: &mut Tensor<Cuda>,
        launch: impl FnOnce(
            &NcclLibrary,
            u64,
            u64,
            usize,
            c_int,
            RawComm,
            *mut std::ffi::c_void,
        ) -> c_int,
    ) -> Result<()> {
        let count = tensor.numel();
        let output = cuda_interop::output_like(tensor)?;
        *tensor = self.queue_into(
            op,
            tensor,
            output,
            |lib, send, recv, datatype, comm, stream| {
                launch(lib, send, recv, count, datatype, comm, stream)
            },
        )?;
        Ok(())
    }

    /// Queues a collective that reads `input` and writes `output` (a fresh contiguous device
    /// tensor of the size the collective fills); returns `output`. `launch` gets the library,
    /// the two device addresses, NCCL's datatype, the communicator and the stream.
    fn queue_into(
        &self,
        op: &'static str,
        input: &Tensor<Cuda>,
        output: Tensor<Cuda>,
        launch: impl FnOnce(&NcclLibrary, u64, u64, c_int, RawComm, *mut std::ffi::c_void) -> c_int,
    ) -> Result<Tensor<Cuda>> {
        let datatype = match input.dtype() {
            DType::F32 => data_type::FLOAT32,
            DType::F64 => data_type::FLOAT64,
            DType::I64 => data_type::INT64,
            DType::Bool => data_type::UINT8,
            // NCCL reduces 16-bit floats in its own order, rounding after each step (MPI's
            // communicator combines them in f32 and rounds once): sums over many ranks may
            // differ from MPI's in the last bits.
            DType::F16 => data_type::FLOAT16,
            DType::BF16 if self.version >= data_type::BFLOAT16_SINCE => data_type::BFLOAT16,
            other => return Err(tessera_core::Error::UnsupportedDType { op, dtype: other }),
        };
        let (input, send) = cuda_interop::device_address(input)?;
        let (output, recv) = cuda_interop::device_address(&output)?;
        let (Some(send), Some(recv)) = (send, recv) else {
            return Ok(output); // nothing to exchange
        };
        let mut state = self.lock();
        let comm = self.healthy(&state, op)?.0;
        let stream = cuda_interop::stream(&self.device)?;
        let rc = launch(&self.library, send, recv, datatype, comm, stream);
        if rc != SUCCESS {
            // SAFETY: `comm` is live.
            let detail = unsafe { self.library.last_error(comm) };
            let msg = format!("{}: {detail}", self.library.error_string(rc));
            return Err(self.break_with(&mut state, op, CommFailure::Library, msg));
        }
        // `input` may be dropped now: its buffer is only reused by work queued later on the
        // same stream, after the collective.
        drop(input);
        Ok(output)
    }
}

impl Communicator<Cuda> for NcclCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn library(&self) -> &'static str {
        LIBRARY
    }

    fn all_reduce(&self, tensor: &mut Tensor<Cuda>, op: Reduction) -> Result<()> {
        const OP: &str = "all_reduce";
        check_reducible(tensor.dtype(), op)?;
        self.agree(
            OP,
            Signature {
                collective: ALL_REDUCE_CODE,
                reduction: op as u64 + 1,
                dtype: dtype_code(tensor.dtype()),
                count: tensor.numel() as u64,
                root: 0,
                shape: shape_hash(tensor.shape()),
            },
        )?;
        let nccl_op = match op {
            Reduction::Sum | Reduction::Mean => red_op::SUM,
            Reduction::Max => red_op::MAX,
            Reduction::Min => red_op::MIN,
        };
        self.queue(
            OP,
            tensor,
            |lib, send, recv, count, datatype, comm, stream| {
                // SAFETY: `send` and `recv` address `count` elements of `datatype` on this
                // communicator's device, kept allocated until the stream has run the call;
                // `stream` is the device's stream, with its context current.
                unsafe {
                    (lib.all_reduce)(
                        send as *const std::ffi::c_void,
                        recv as *mut std::ffi::c_void,
                        count,
                        datatype,
                        nccl_op,
                        comm,
                        stream,
                    )
                }
            },
        )?;
        if op == Reduction::Mean && self.world_size > 1 {
            *tensor = tensor.div_scalar(self.world_size as f64)?;
        }
        Ok(())
    }

    fn broadcast(&self, tensor: &mut Tensor<Cuda>, root: usize) -> Result<()> {
        const OP: &str = "broadcast";
        check_root(OP, root, self.world_size)?;
        self.agree(
            OP,
            Signature {
                collective: BROADCAST_CODE,
                reduction: 0,
                dtype: dtype_code(tensor.dtype()),
                count: tensor.numel() as u64,
                root: root as u64,
                shape: shape_hash(tensor.shape()),
            },
        )?;
        self.queue(
            OP,
            tensor,
            |lib, send, recv, count, datatype, comm, stream| {
                // SAFETY: as in `all_reduce`; `root` is a rank of the communicator (checked).
                unsafe {
                    (lib.broadcast)(
                        send as *const std::ffi::c_void,
                        recv as *mut std::ffi::c_void,
                        count,
                        datatype,
                        root as c_int,
                        comm,
                        stream,
                    )
                }
            },
        )
    }

    /// NCCL's own `ncclReduceScatter` (each rank receives its block of the reduction), not the
    /// trait's all-reduce-then-cut: `1/N` of the traffic.
    fn reduce_scatter(&self, tensor: &Tensor<Cuda>, op: Reduction) -> Result<Tensor<Cuda>> {
        const OP: &str = "reduce_scatter";
        check_reducible(tensor.dtype(), op)?;
        let block = check_shardable(OP, tensor, self.world_size)?;
        self.agree(
            OP,
            Signature {
                collective: REDUCE_SCATTER_CODE,
                reduction: op as u64 + 1,
                dtype: dtype_code(tensor.dtype()),
                count: tensor.numel() as u64,
                root: 0,
                shape: 0,
            },
        )?;
        let nccl_op = match op {
            Reduction::Sum | Reduction::Mean => red_op::SUM,
            Reduction::Max => red_op::MAX,
            Reduction::Min => red_op::MIN,
        };
        let output = Tensor::zeros([block], tensor.dtype(), tensor.backend())?;
        let output = self.queue_into(OP, tensor, output, |lib, send, recv, dt, comm, stream| {
            // SAFETY: `send` addresses `N * block` elements and `recv` `block` elements of
            // `dt` on this communicator's device, kept allocated until the stream has run the
            // call; `stream` is the device's stream, with its context current.
            unsafe {
                (lib.reduce_scatter)(
                    send as *const std::ffi::c_void,
                    recv as *mut std::ffi::c_void,
                    block,
                    dt,
                    nccl_op,
                    comm,
                    stream,
                )
            }
        })?;
        if op == Reduction::Mean && self.world_size > 1 {
            return output.div_scalar(self.world_size as f64);
        }
        Ok(output)
    }

    /// NCCL's own `ncclAllGather` (every rank's shard, in rank order).
    fn all_gather(&self, shard: &Tensor<Cuda>) -> Result<Tensor<Cuda>> {
        const OP: &str = "all_gather";
        check_gatherable(OP, shard)?;
        self.agree(
            OP,
            Signature {
                collective: ALL_GATHER_CODE,
                reduction: 0,
                dtype: dtype_code(shard.dtype()),
                count: shard.numel() as u64,
                root: 0,
                shape: 0,
            },
        )?;
        let count = shard.numel();
        let output = Tensor::zeros([count * self.world_size], shard.dtype(), shard.backend())?;
        self.queue_into(OP, shard, output, |lib, send, recv, dt, comm, stream| {
            // SAFETY: `send` addresses `count` elements and `recv` `N * count` elements of
            // `dt` on this communicator's device, kept allocated until the stream has run the
            // call; `stream` is the device's stream, with its context current.
            unsafe {
                (lib.all_gather)(
                    send as *const std::ffi::c_void,
                    recv as *mut std::ffi::c_void,
                    count,
                    dt,
                    comm,
                    stream,
                )
            }
        })
    }

    fn barrier(&self) -> Result<()> {
        Communicator::<Cuda>::synchronize(self)?;
        self.bootstrap.barrier_all()
    }

    fn all_reduce_host(&self, values: &mut [f64], op: Reduction) -> Result<()> {
        self.bootstrap.all_reduce_values(values, op)
    }

    fn synchronize(&self) -> Result<()> {
        const OP: &str = "synchronize";
        let started = Instant::now();
        loop {
            {
                let mut state = self.lock();
                let comm = self.healthy(&state, OP)?.0;
                let mut async_error: c_int = SUCCESS;
                // SAFETY: `comm` is live; `async_error` is a valid out-pointer.
                let rc = unsafe { (self.library.comm_get_async_error)(comm, &mut async_error) };
                let failure = if rc != SUCCESS { rc } else { async_error };
                if failure != SUCCESS && failure != IN_PROGRESS {
                    // SAFETY: `comm` is live.
                    let detail = unsafe { self.library.last_error(comm) };
                    let msg = format!(
                        "NCCL reported {} {detail}",
                        self.library.error_string(failure)
                    );
                    return Err(self.break_with(&mut state, OP, CommFailure::PeerFailed, msg));
                }
                if cuda_interop::stream_is_idle(&self.device)? {
                    return Ok(());
                }
                let waited = started.elapsed();
                if waited >= self.timeout {
                    let msg = format!(
                        "the device's collectives did not complete within {:.1} s (limit, set \
                         by {}): a peer died, hangs, or is stuck in other work; the NCCL \
                         communicator was aborted",
                        waited.as_secs_f64(),
                        crate::TIMEOUT_ENV_VAR
                    );
                    return Err(self.break_with(&mut state, OP, CommFailure::Timeout, msg));
                }
            }
            // The GPU progresses on its own: no need to spin the host.
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

impl Drop for NcclCommunicator {
    fn drop(&mut self) {
        let healthy = Communicator::<Cuda>::synchronize(self).is_ok();
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(comm) = state.comm.take() {
            // SAFETY: the communicator is live and released exactly once; destroyed only once
            // its work has completed, aborted otherwise.
            unsafe {
                if healthy {
                    (self.library.comm_destroy)(comm.0);
                } else {
                    (self.library.comm_abort)(comm.0);
                }
            }
        }
    }
}
