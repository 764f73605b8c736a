//! [`MpiCommunicator`]: the [`Communicator`] of the processes `mpirun` started, through MPI
//! (the `mpi` crate, rsmpi). It carries host copies of tensors of any backend.
//!
//! # Failure handling
//! * The communicator is a duplicate of `MPI_COMM_WORLD` with the error handler
//!   `MPI_ERRORS_RETURN` (MPI's default, `MPI_ERRORS_ARE_FATAL`, aborts the whole job on the
//!   first error); `MPI_COMM_WORLD` gets it too. Every MPI return code is checked.
//! * Tensors are reduced in a fixed order of ranks (see `ordered.rs`: an all-to-all and a local
//!   sum in rank order, then an all-gather), so that `all_reduce` and `reduce_scatter` give the
//!   same bits whatever algorithm the MPI library would pick.
//! * Every collective is **non-blocking** (`MPI_Ialltoall`, `MPI_Iallgather`, `MPI_Ibcast`,
//!   `MPI_Iallreduce` for host values) and waited for by
//!   polling `MPI_Test` against a deadline ([`crate::timeout_from_env`], 5 minutes by
//!   default): a blocking MPI call on a dead peer waits forever, this returns
//!   [`CommFailure::Timeout`] once the time limit has passed. MPI errors reported meanwhile
//!   give [`CommFailure::PeerFailed`].
//! * Before its payload, every collective all-reduces a fixed-size [`Signature`] (which
//!   collective, dtype, element count, shape, root): ranks that disagree get
//!   [`CommFailure::Mismatch`] on every rank, instead of the undefined behaviour of mismatched
//!   MPI calls.
//! * After a timeout or an MPI error the communicator is **broken**: later calls fail at once
//!   with [`CommFailure::Broken`], and dropping it does not call `MPI_Finalize` (which could
//!   wait for the dead peer); the buffers of the abandoned request are leaked, so MPI can never
//!   write into freed memory. The process should report the error and exit.
//!
//! What is guaranteed: a rank whose peer died returns a typed error within the time limit
//! (plus one `MPI_Test`) from any collective, never hangs in one. What is not: creating the
//! communicator (`MPI_Init_thread`, `MPI_Comm_dup`, `MPI_Comm_split_type` are blocking;
//! `mpirun` handles a process that dies during start-up), and what the launcher does: by
//! default `mpirun` kills the whole job within about a second of one process dying, before any
//! time limit; `mpirun --enable-recovery` lets the survivors run on and report the typed error.

/// Runs `$body` with `$v` bound to the values of a numeric `HostData` (the floats, 16-bit
/// ones included, and i64), rewrapping its result in the same variant; other dtypes return
/// `Error::UnsupportedDType` from the function.
/// (Defined before the modules below, which use it: the tensor collectives.)
macro_rules! each_numeric {
    ($data:expr, $op:expr, |$v:ident| $body:expr) => {
        match $data {
            HostData::F32($v) => HostData::F32($body),
            HostData::F64($v) => HostData::F64($body),
            HostData::I64($v) => HostData::I64($body),
            HostData::F16($v) => HostData::F16($body),
            HostData::BF16($v) => HostData::BF16($body),
            other => {
                return Err(Error::UnsupportedDType {
                    op: $op,
                    dtype: other.dtype(),
                })
            }
        }
    };
}

mod gather_root;
mod host_buffer;
mod ordered;
mod raw;
mod started;

use crate::bootstrap::Bootstrap;
use crate::signature::{
    dtype_code, shape_hash, Signature, BARRIER_CODE, BROADCAST_CODE, BYTES_BROADCAST_CODE,
    ENCODED_LEN, HOST_ALL_REDUCE_CODE,
};
use crate::timeout::timeout_from_env;
use mpi::environment::Universe;
use mpi::ffi;
use mpi::Threading;
use raw::{error_string, Idle, WaitFailure, SUCCESS};
use std::any::Any;
use std::ffi::{c_int, c_void};
use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tessera_core::{Backend, CommFailure, Error, HostData, Result, Tensor};
use tessera_nn::distributed::{check_root, Communicator, PendingCollective, Reduction};

const LIBRARY: &str = "mpi";

/// A raw MPI communicator handle (a pointer in Open MPI, an integer in MPICH).
struct RawComm(ffi::MPI_Comm);

// SAFETY: MPI handles are process-wide; every call on this one is made under
// `MpiCommunicator::state`'s lock, with MPI initialised at `MPI_THREAD_SERIALIZED` or above,
// which allows calls from any thread as long as they never overlap.
unsafe impl Send for RawComm {}
// SAFETY: as above.
unsafe impl Sync for RawComm {}

/// A non-blocking collective that [`MpiCommunicator::post`] started: the buffers MPI reads and
/// writes until it completes, and its request.
struct Posted<T> {
    buffers: T,
    request: ffi::MPI_Request,
}

/// What changes during the communicator's life.
struct State {
    /// Why the communicator is broken, once it is.
    broken: Option<String>,
    /// Buffers of requests abandoned at a timeout: MPI may still write into them, so they are
    /// never freed.
    abandoned: Vec<Box<dyn Any + Send>>,
}

/// The group of processes started by `mpirun`, as a [`Communicator`] of any backend: tensors
/// are read back to the host, exchanged by MPI, and uploaded again (use
/// `tessera_distributed::NcclCommunicator` to keep CUDA tensors on their GPUs). The failure
/// handling (typed errors within a time limit, a broken communicator after one) is described
/// at the top of `distributed/src/mpi_comm/mod.rs`.
///
/// ```no_run
/// use std::sync::Arc;
/// use tessera_distributed::MpiCommunicator;
/// use tessera_nn::distributed::{Communicator, Reduction};
/// # fn main() -> tessera_core::Result<()> {
/// let comm = Arc::new(MpiCommunicator::init()?); // under `mpirun -np N`
/// let dev = tessera_cpu::Cpu::new();
/// let rank = Communicator::<tessera_cpu::Cpu>::rank(&*comm);
/// let mut t = tessera_core::Tensor::full([3], rank as f64, tessera_core::DType::F32, &dev)?;
/// Communicator::<tessera_cpu::Cpu>::all_reduce(&*comm, &mut t, Reduction::Sum)?;
/// # Ok(()) }
/// ```
pub struct MpiCommunicator {
    comm: RawComm,
    rank: usize,
    world_size: usize,
    local_rank: usize,
    local_size: usize,
    timeout: Duration,
    state: Mutex<State>,
    /// Present when this communicator initialised MPI: dropping it finalises MPI.
    universe: ManuallyDrop<Option<Universe>>,
}

impl std::fmt::Debug for MpiCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiCommunicator")
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("local_rank", &self.local_rank)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// An [`Error::Communication`] of MPI outside a communicator (initialisation).
fn init_error(kind: CommFailure, msg: impl Into<String>) -> Error {
    Error::Communication {
        library: LIBRARY,
        op: "init",
        rank: 0,
        world_size: 0,
        kind,
        msg: msg.into(),
    }
}

/// Checks the return code of an initialisation call.
fn init_check(call: &str, rc: c_int) -> Result<()> {
    if rc == SUCCESS {
        Ok(())
    } else {
        Err(init_error(
            CommFailure::Library,
            format!("{call} failed: {}", error_string(rc)),
        ))
    }
}

impl MpiCommunicator {
    /// Initialises MPI (unless the application already has) and returns the group of all its
    /// processes, with the time limit of [`crate::timeout_from_env`].
    pub fn init() -> Result<Self> {
        Self::init_with_timeout(timeout_from_env()?)
    }

    /// [`MpiCommunicator::init`] with an explicit time limit per collective.
    pub fn init_with_timeout(timeout: Duration) -> Result<Self> {
        let universe = if mpi::environment::is_initialized() {
            None
        } else {
            let (universe, threading) = mpi::initialize_with_threading(Threading::Serialized)
                .ok_or_else(|| {
                    init_error(CommFailure::Unavailable, "MPI could not be initialised")
                })?;
            if threading < Threading::Serialized {
                return Err(init_error(
                    CommFailure::Unavailable,
                    format!("the MPI library offers only {threading:?} threading"),
                ));
            }
            Some(universe)
        };
        // SAFETY (every block below): MPI is initialised; the out-pointers are valid locals;
        // the handles passed are MPI's predefined ones or the communicators created here.
        unsafe {
            init_check(
                "MPI_Comm_set_errhandler",
                ffi::MPI_Comm_set_errhandler(ffi::RSMPI_COMM_WORLD, ffi::RSMPI_ERRORS_RETURN),
            )?;
        }
        let mut comm: ffi::MPI_Comm = unsafe { ffi::RSMPI_COMM_NULL };
        unsafe {
            init_check(
                "MPI_Comm_dup",
                ffi::MPI_Comm_dup(ffi::RSMPI_COMM_WORLD, &mut comm),
            )?;
            init_check(
                "MPI_Comm_set_errhandler",
                ffi::MPI_Comm_set_errhandler(comm, ffi::RSMPI_ERRORS_RETURN),
            )?;
        }
        let (mut rank, mut size): (c_int, c_int) = (0, 0);
        unsafe {
            init_check("MPI_Comm_rank", ffi::MPI_Comm_rank(comm, &mut rank))?;
            init_check("MPI_Comm_size", ffi::MPI_Comm_size(comm, &mut size))?;
        }
        let mut local: ffi::MPI_Comm = unsafe { ffi::RSMPI_COMM_NULL };
        let (mut local_rank, mut local_size): (c_int, c_int) = (0, 0);
        unsafe {
            init_check(
                "MPI_Comm_split_type",
                ffi::MPI_Comm_split_type(
                    comm,
                    ffi::RSMPI_COMM_TYPE_SHARED,
                    rank,
                    ffi::RSMPI_INFO_NULL,
                    &mut local,
                ),
            )?;
            init_check("MPI_Comm_rank", ffi::MPI_Comm_rank(local, &mut local_rank))?;
            init_check("MPI_Comm_size", ffi::MPI_Comm_size(local, &mut local_size))?;
            init_check("MPI_Comm_free", ffi::MPI_Comm_free(&mut local))?;
        }
        Ok(MpiCommunicator {
            comm: RawComm(comm),
            rank: rank as usize,
            world_size: size as usize,
            local_rank: local_rank as usize,
            local_size: local_size as usize,
            timeout,
            state: Mutex::new(State {
                broken: None,
                abandoned: Vec::new(),
            }),
            universe: ManuallyDrop::new(universe),
        })
    }

    /// This process's rank among the processes of its host (what picks its GPU).
    pub fn local_rank(&self) -> usize {
        self.local_rank
    }

    /// The number of processes on this host.
    pub fn local_size(&self) -> usize {
        self.local_size
    }

    /// The time limit of each collective.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Whether an earlier failure broke the communicator.
    pub fn is_broken(&self) -> bool {
        self.lock().broken.is_some()
    }

    /// The MPI library's version string (`MPI_Get_library_version`).
    pub fn library_version() -> String {
        let mut buffer = vec![0 as std::ffi::c_char; 8192];
        let mut len: c_int = 0;
        // SAFETY: the buffer is larger than MPI_MAX_LIBRARY_VERSION_STRING; may be called
        // before MPI_Init.
        let rc = unsafe { ffi::MPI_Get_library_version(buffer.as_mut_ptr(), &mut len) };
        if rc != SUCCESS {
            return "unknown MPI".into();
        }
        let bytes: Vec<u8> = buffer[..len.clamp(0, 8192) as usize]
            .iter()
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes)
            .trim_matches(|c: char| c == '\0' || c.is_whitespace())
            .to_string()
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

    /// The lock, or [`CommFailure::Broken`] when an earlier failure broke the communicator.
    fn healthy(&self, op: &'static str) -> Result<MutexGuard<'_, State>> {
        let state = self.lock();
        if let Some(reason) = &state.broken {
            return Err(self.error(op, CommFailure::Broken, reason.clone()));
        }
        Ok(state)
    }

    /// Starts a non-blocking collective over `buffers` with `start` and waits for it. On
    /// failure the communicator is marked broken and the buffers are kept forever.
    fn run<T: Send + 'static>(
        &self,
        state: &mut State,
        op: &'static str,
        what: &str,
        buffers: T,
        start: impl FnOnce(&mut T, ffi::MPI_Comm, *mut ffi::MPI_Request) -> c_int,
    ) -> Result<T> {
        let posted = self.post(state, op, what, buffers, start)?;
        self.complete(state, op, what, posted, Idle::Yield)
    }

    /// Starts a non-blocking collective over `buffers` with `start`; [`MpiCommunicator::complete`]
    /// waits for it. On failure the communicator is marked broken.
    fn post<T: Send + 'static>(
        &self,
        state: &mut State,
        op: &'static str,
        what: &str,
        mut buffers: T,
        start: impl FnOnce(&mut T, ffi::MPI_Comm, *mut ffi::MPI_Request) -> c_int,
    ) -> Result<Posted<T>> {
        // SAFETY: RSMPI_REQUEST_NULL is MPI's predefined null request.
        let mut request: ffi::MPI_Request = unsafe { ffi::RSMPI_REQUEST_NULL };
        let rc = start(&mut buffers, self.comm.0, &mut request);
        if rc != SUCCESS {
            // Nothing was started: the buffers are not referenced by MPI.
            let msg = format!("starting {what} failed: {}", error_string(rc));
            state.broken = Some(msg.clone());
            return Err(self.error(op, CommFailure::Library, msg));
        }
        Ok(Posted { buffers, request })
    }

    /// Waits for a collective [`MpiCommunicator::post`] started (idling between tests as
    /// `idle` says) and returns its buffers. On
    /// failure the communicator is marked broken and the buffers are kept forever.
    fn complete<T: Send + 'static>(
        &self,
        state: &mut State,
        op: &'static str,
        what: &str,
        posted: Posted<T>,
        idle: Idle,
    ) -> Result<T> {
        let Posted {
            buffers,
            mut request,
        } = posted;
        // SAFETY: the request was started by `post`; its buffers live in `buffers`, whose heap
        // allocations do not move when `buffers` does, and are kept alive below until it
        // completes, or forever if it does not.
        match unsafe { raw::wait(&mut request, self.timeout, idle) } {
            Ok(()) => Ok(buffers),
            Err(failure) => {
                state.abandoned.push(Box::new(buffers));
                let (kind, msg) = match failure {
                    WaitFailure::Error(rc) => (
                        CommFailure::PeerFailed,
                        format!("MPI reported an error during {what}: {}", error_string(rc)),
                    ),
                    WaitFailure::Timeout(waited) => (
                        CommFailure::Timeout,
                        format!(
                            "{what} did not complete within {:.1} s (limit {:.1} s, set by \
                             {}): a peer died, hangs, or is stuck in other work",
                            waited.as_secs_f64(),
                            self.timeout.as_secs_f64(),
                            crate::TIMEOUT_ENV_VAR
                        ),
                    ),
                };
                state.broken = Some(msg.clone());
                Err(self.error(op, kind, msg))
            }
        }
    }

    /// All-reduces `signature` (max of its encoding) and fails with
    /// [`CommFailure::Mismatch`] on every rank when the ranks' signatures differ.
    fn agree(&self, state: &mut State, op: &'static str, signature: Signature) -> Result<()> {
        let encoded = signature.encode().to_vec();
        let what = format!("the argument check of {}", signature.describe());
        let (_, reduced) = self.run(
            state,
            op,
            &what,
            (encoded, vec![0.0f64; ENCODED_LEN]),
            |(send, recv), comm, request| {
                // SAFETY: both buffers hold ENCODED_LEN doubles; the handles are predefined
                // or ours; `request` is a valid out-pointer.
                unsafe {
                    ffi::MPI_Iallreduce(
                        send.as_ptr().cast(),
                        recv.as_mut_ptr().cast(),
                        ENCODED_LEN as c_int,
                        ffi::RSMPI_DOUBLE,
                        ffi::RSMPI_MAX,
                        comm,
                        request,
                    )
                }
            },
        )?;
        let reduced: [f64; ENCODED_LEN] = reduced.try_into().expect("ENCODED_LEN values");
        match signature.disagreement(&reduced) {
            None => Ok(()),
            Some(msg) => Err(self.error(op, CommFailure::Mismatch, msg)),
        }
    }

    /// `MPI_Iallreduce` of host values of one type.
    fn all_reduce_vec<T: Copy + Default + Send + 'static>(
        &self,
        state: &mut State,
        op: &'static str,
        values: Vec<T>,
        datatype: ffi::MPI_Datatype,
        reduction: Reduction,
    ) -> Result<Vec<T>> {
        let count = self.count(op, values.len())?;
        let mpi_op = mpi_op(reduction);
        let recv = host_buffer::zeroed::<T>(values.len())?;
        let what = format!("the all-reduce of {count} elements");
        let (_, recv) = self.run(
            state,
            op,
            &what,
            (values, recv),
            |(send, recv), comm, request| {
                // SAFETY: both buffers hold `count` elements of `datatype`.
                unsafe {
                    ffi::MPI_Iallreduce(
                        send.as_ptr().cast(),
                        recv.as_mut_ptr().cast(),
                        count,
                        datatype,
                        mpi_op,
                        comm,
                        request,
                    )
                }
            },
        )?;
        Ok(recv)
    }

    /// `MPI_Ibcast` of host values of one type (every rank passes a buffer of the same length;
    /// the root's is sent).
    fn broadcast_vec<T: Send + 'static>(
        &self,
        state: &mut State,
        op: &'static str,
        values: Vec<T>,
        datatype: ffi::MPI_Datatype,
        root: usize,
    ) -> Result<Vec<T>> {
        let count = self.count(op, values.len())?;
        let what = format!("the broadcast of {count} elements from rank {root}");
        self.run(state, op, &what, values, |buffer, comm, request| {
            // SAFETY: the buffer holds `count` elements of `datatype`; `root` is a rank
            // of `comm` (checked by the caller).
            unsafe {
                ffi::MPI_Ibcast(
                    buffer.as_mut_ptr().cast::<c_void>(),
                    count,
                    datatype,
                    root as c_int,
                    comm,
                    request,
                )
            }
        })
    }

    /// The element count as MPI's `int`.
    fn count(&self, op: &'static str, len: usize) -> Result<c_int> {
        c_int::try_from(len).map_err(|_| Error::InvalidArgument {
            op,
            msg: format!("{len} elements exceed MPI's int count in one call: use smaller buckets"),
        })
    }

    /// Host values all-reduced (after the argument check).
    fn reduce_host(
        &self,
        op: &'static str,
        data: HostData,
        shape_code: u64,
        reduction: Reduction,
        collective: u64,
    ) -> Result<HostData> {
        let mut state = self.healthy(op)?;
        self.agree(
            &mut state,
            op,
            Signature {
                collective,
                reduction: reduction as u64 + 1,
                dtype: dtype_code(data.dtype()),
                count: data.len() as u64,
                root: 0,
                shape: shape_code,
            },
        )?;
        if self.world_size == 1 || data.is_empty() {
            return Ok(data);
        }
        let n = self.world_size;
        // SAFETY (the datatype reads): MPI's predefined datatypes, read after initialisation.
        Ok(match data {
            HostData::F32(v) => {
                let mut out =
                    self.all_reduce_vec(&mut state, op, v, unsafe { ffi::RSMPI_FLOAT }, reduction)?;
                if reduction == Reduction::Mean {
                    out.iter_mut().for_each(|x| *x /= n as f32);
                }
                HostData::F32(out)
            }
            HostData::F64(v) => {
                let mut out = self.all_reduce_vec(
                    &mut state,
                    op,
                    v,
                    unsafe { ffi::RSMPI_DOUBLE },
                    reduction,
                )?;
                if reduction == Reduction::Mean {
                    out.iter_mut().for_each(|x| *x /= n as f64);
                }
                HostData::F64(out)
            }
            HostData::I64(v) => HostData::I64(self.all_reduce_vec(
                &mut state,
                op,
                v,
                unsafe { ffi::RSMPI_INT64_T },
                reduction,
            )?),
            // Only `all_reduce_host` comes here, with f64 values.
            other => {
                return Err(Error::UnsupportedDType {
                    op,
                    dtype: other.dtype(),
                })
            }
        })
    }
}

impl MpiCommunicator {
    /// [`Communicator::all_reduce_host`], whatever the backend.
    fn reduce_host_values(&self, values: &mut [f64], op: Reduction) -> Result<()> {
        let data = HostData::F64(values.to_vec());
        if let HostData::F64(out) =
            self.reduce_host("all_reduce_host", data, 0, op, HOST_ALL_REDUCE_CODE)?
        {
            values.copy_from_slice(&out);
        }
        Ok(())
    }
}

/// The MPI operation of a reduction (a mean is a sum, divided afterwards).
fn mpi_op(reduction: Reduction) -> ffi::MPI_Op {
    // SAFETY: MPI's predefined operations, read after initialisation.
    unsafe {
        match reduction {
            Reduction::Sum | Reduction::Mean => ffi::RSMPI_SUM,
            Reduction::Max => ffi::RSMPI_MAX,
            Reduction::Min => ffi::RSMPI_MIN,
        }
    }
}

impl<B: Backend> Communicator<B> for MpiCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn library(&self) -> &'static str {
        LIBRARY
    }

    fn all_reduce(&self, tensor: &mut Tensor<B>, op: Reduction) -> Result<()> {
        self.all_reduce_ordered(tensor, op)
    }

    fn reduce_scatter(&self, tensor: &Tensor<B>, op: Reduction) -> Result<Tensor<B>> {
        self.reduce_scatter_ordered(tensor, op)
    }

    fn all_gather(&self, shard: &Tensor<B>) -> Result<Tensor<B>> {
        self.all_gather_ordered(shard)
    }

    fn start_all_gather(self: Arc<Self>, shard: &Tensor<B>) -> Result<PendingCollective<B>> {
        self.start_all_gather_ordered(shard)
    }

    fn start_reduce_scatter(
        self: Arc<Self>,
        tensor: &Tensor<B>,
        op: Reduction,
    ) -> Result<PendingCollective<B>> {
        self.start_reduce_scatter_ordered(tensor, op)
    }

    fn gather(&self, shard: &Tensor<B>, root: usize) -> Result<Option<Tensor<B>>> {
        self.gather_to_root(shard, root)
    }

    fn broadcast(&self, tensor: &mut Tensor<B>, root: usize) -> Result<()> {
        const OP: &str = "broadcast";
        check_root(OP, root, self.world_size)?;
        let mut state = self.healthy(OP)?;
        self.agree(
            &mut state,
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
        if self.world_size == 1 || tensor.numel() == 0 {
            return Ok(());
        }
        // SAFETY (the datatype reads): MPI's predefined datatypes, read after initialisation.
        let data = match tensor.to_host()? {
            HostData::Bool(v) => HostData::Bool(self.broadcast_vec(
                &mut state,
                OP,
                v,
                unsafe { ffi::RSMPI_UINT8_T },
                root,
            )?),
            // The numbers in their datatypes (the 16-bit floats as their bits).
            numbers => each_numeric!(numbers, OP, |v| {
                let datatype = ordered::datatype_of(&v);
                self.broadcast_vec(&mut state, OP, v, datatype, root)?
            }),
        };
        drop(state);
        if self.rank != root {
            *tensor = Tensor::from_host(data, tensor.shape().clone(), tensor.backend())?;
        }
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        self.barrier_all()
    }

    fn all_reduce_host(&self, values: &mut [f64], op: Reduction) -> Result<()> {
        self.reduce_host_values(values, op)
    }
}

impl Bootstrap for MpiCommunicator {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.world_size
    }

    fn broadcast_bytes(&self, bytes: &mut [u8], root: usize) -> Result<()> {
        const OP: &str = "broadcast_bytes";
        check_root(OP, root, self.world_size)?;
        let mut state = self.healthy(OP)?;
        self.agree(
            &mut state,
            OP,
            Signature {
                collective: BYTES_BROADCAST_CODE,
                reduction: 0,
                dtype: 0,
                count: bytes.len() as u64,
                root: root as u64,
                shape: 0,
            },
        )?;
        if self.world_size == 1 || bytes.is_empty() {
            return Ok(());
        }
        // SAFETY: MPI's predefined datatype, read after initialisation.
        let datatype = unsafe { ffi::RSMPI_UINT8_T };
        let received =
            self.broadcast_vec(&mut state, OP, host_buffer::copied(bytes)?, datatype, root)?;
        bytes.copy_from_slice(&received);
        Ok(())
    }

    fn all_reduce_values(&self, values: &mut [f64], op: Reduction) -> Result<()> {
        self.reduce_host_values(values, op)
    }

    fn barrier_all(&self) -> Result<()> {
        const OP: &str = "barrier";
        let mut state = self.healthy(OP)?;
        // The argument check is an all-reduce over every rank: it is the barrier.
        self.agree(
            &mut state,
            OP,
            Signature {
                collective: BARRIER_CODE,
                reduction: 0,
                dtype: 0,
                count: 0,
                root: 0,
                shape: 0,
            },
        )
    }
}

impl Drop for MpiCommunicator {
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(|p| p.into_inner());
        if state.broken.is_some() {
            // A request may still reference the abandoned buffers and MPI_Finalize may wait for
            // the dead peer: leak both, and let the process exit.
            std::mem::forget(std::mem::take(&mut state.abandoned));
            return;
        }
        // SAFETY: the communicator was created by MPI_Comm_dup and is freed once; no request on
        // it is pending (every collective waits for its own).
        unsafe {
            ffi::MPI_Comm_free(&mut self.comm.0);
        }
        // SAFETY: taken once, here; the universe finalises MPI when dropped.
        drop(unsafe { ManuallyDrop::take(&mut self.universe) });
    }
}
