//! The one error type of Tessera: every fallible operation of every Tessera crate returns
//! [`Result`], so `?` works across tensors, layers, checkpoints and data loading alike.

use crate::{DType, Shape};
use std::path::PathBuf;
use std::sync::Arc;

/// Everything that can go wrong in Tessera: tensor operations, backends, files, checkpoints and
/// data sets.
///
/// Each message starts with the operation's name (or the file's path) and names the offending
/// shapes, dtypes, axes, devices or tensors, e.g.
/// `matmul: inner dimensions differ: lhs [2, 3] vs rhs [4, 5]`. The enum is `#[non_exhaustive]`:
/// match the variants you handle and keep a catch-all arm.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Two shapes that must be equal are not.
    #[error("{op}: shapes differ: lhs {lhs} vs rhs {rhs}")]
    ShapeMismatch {
        op: &'static str,
        lhs: Shape,
        rhs: Shape,
    },
    /// Two shapes cannot be broadcast together (NumPy rules).
    #[error("{op}: shapes cannot be broadcast together: lhs {lhs} vs rhs {rhs}")]
    BroadcastIncompatible {
        op: &'static str,
        lhs: Shape,
        rhs: Shape,
    },
    /// The contracted dimensions of a matrix product differ.
    #[error("matmul: inner dimensions differ: lhs {lhs} vs rhs {rhs}")]
    MatmulShape { lhs: Shape, rhs: Shape },
    /// A reshape or view changes the number of elements.
    #[error("{op}: cannot view {from} ({from_numel} elements) as {to} ({to_numel} elements)")]
    ElementCountMismatch {
        op: &'static str,
        from: Shape,
        from_numel: usize,
        to: Shape,
        to_numel: usize,
    },
    /// Host data does not have as many elements as the shape asks for.
    #[error("{op}: shape {shape} needs {expected} elements but {got} were given")]
    DataLength {
        op: &'static str,
        shape: Shape,
        expected: usize,
        got: usize,
    },
    /// Operands have different dtypes.
    #[error("{op}: dtypes differ: lhs {lhs} vs rhs {rhs}")]
    DTypeMismatch {
        op: &'static str,
        lhs: DType,
        rhs: DType,
    },
    /// The operation is not defined for this dtype (e.g. `exp` on `i64`).
    #[error("{op}: not supported for dtype {dtype}")]
    UnsupportedDType { op: &'static str, dtype: DType },
    /// Operands live on different devices.
    #[error("{op}: tensors are on different devices: {lhs} vs {rhs}")]
    DeviceMismatch {
        op: &'static str,
        lhs: String,
        rhs: String,
    },
    /// An axis argument is not smaller than the rank.
    #[error("{op}: axis {axis} is out of range for a tensor of rank {rank}")]
    AxisOutOfRange {
        op: &'static str,
        axis: isize,
        rank: usize,
    },
    /// An index (gather, index_select, scatter_add, embedding...) is outside its dimension.
    #[error("{op}: index {index} is out of range for a dimension of size {size}")]
    IndexOutOfRange {
        op: &'static str,
        index: i64,
        size: usize,
    },
    /// A slice/narrow range does not fit in its dimension.
    #[error("{op}: range {start}..{end} is out of bounds for axis {axis} of size {size}")]
    RangeOutOfBounds {
        op: &'static str,
        axis: usize,
        start: usize,
        end: usize,
        size: usize,
    },
    /// An argument is invalid for a reason not covered above; `msg` says which and why.
    #[error("{op}: {msg}")]
    InvalidArgument { op: &'static str, msg: String },
    /// A shape, or a size computed from one, is beyond what a tensor may have: the rank exceeds
    /// [`Shape::MAX_RANK`], the element count or the extent of its layout exceeds `isize::MAX`,
    /// or its storage would need more than `isize::MAX` bytes (see [`crate::limits`]). Nothing
    /// was allocated.
    #[error("{op}: size overflow: {msg}")]
    SizeOverflow { op: &'static str, msg: String },
    /// The device ran out of memory, even after freeing cached blocks.
    #[error("out of memory on {device}: could not allocate {requested_bytes} bytes")]
    OutOfMemory {
        device: String,
        requested_bytes: usize,
    },
    /// A driver or runtime the backend needs is not installed or finds no device.
    #[error("{backend}: no driver or device available: {reason}")]
    NoDevice {
        backend: &'static str,
        reason: String,
    },
    /// The backend does not implement this operation.
    #[error("{backend}: operation {op} is not implemented by this backend")]
    NotImplemented {
        backend: &'static str,
        op: &'static str,
    },
    /// A checking backend (`tessera_checked::Checked`) ran `op` on the backend under test and on
    /// a reference backend, and the two results differ beyond the op's tolerance. `max_error`
    /// is the largest absolute difference over the output (infinite for a NaN, infinity or
    /// shape mismatch); `detail` names the first element out of tolerance.
    #[error(
        "{op}: backend `{under_test}` diverges from `{reference}` on inputs {}: max error \
         {max_error:e}; {detail}",
        shape_list(.inputs)
    )]
    Divergence {
        op: &'static str,
        under_test: &'static str,
        reference: &'static str,
        inputs: Vec<Shape>,
        max_error: f64,
        detail: String,
    },
    /// Any other failure reported by a backend (driver error, kernel build log, ...).
    #[error("{backend}: {op}: {msg}")]
    Backend {
        backend: &'static str,
        op: &'static str,
        msg: String,
    },
    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder being accessed.
        path: PathBuf,
        /// The underlying I/O error (shared, so that the error stays `Clone`).
        #[source]
        source: Arc<std::io::Error>,
    },
    /// A file exists but its content is not what its format requires (truncated, corrupt,
    /// unsupported variant).
    #[error("{}: {msg}", path.display())]
    Format {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// A checkpoint or state dict does not match what was expected (a missing, extra,
    /// mis-shaped or mis-typed tensor, an invalid name); `msg` names the tensor.
    #[error("checkpoint: {msg}")]
    Checkpoint {
        /// What is wrong, naming the tensor.
        msg: String,
    },
    /// A data set is not where it was looked for; `hint` says how to get it.
    #[error("data not found at {}: {hint}", path.display())]
    MissingData {
        /// The folder or file that was looked for.
        path: PathBuf,
        /// How to install the data or where to point the program instead.
        hint: String,
    },
    /// A background worker (e.g. the data loader's prefetch thread) stopped unexpectedly.
    #[error("worker thread: {msg}")]
    Worker {
        /// What happened to the worker.
        msg: String,
    },
    /// A collective operation across processes (an all-reduce, a broadcast, a barrier) failed
    /// on this rank: a peer died or did not answer within the time limit, the ranks disagreed on
    /// what to exchange, or the communication library is missing or failed. `kind` says which;
    /// `library` is `"mpi"`, `"nccl"`, ...
    #[error("{library} {op} on rank {rank} of {world_size}: {kind}: {msg}")]
    Communication {
        /// The communication library.
        library: &'static str,
        /// The collective that failed (`all_reduce`, `broadcast`, `barrier`, `init`, ...).
        op: &'static str,
        /// This process's rank.
        rank: usize,
        /// The number of ranks.
        world_size: usize,
        /// What went wrong.
        kind: CommFailure,
        /// Details: the library's message, the sizes that differ, the time waited.
        msg: String,
    },
    /// An error from outside Tessera (a user's code, a communication library, ...), carried
    /// with its context.
    #[error("{context}: {source}")]
    Wrapped {
        /// What was being done.
        context: String,
        /// The original error.
        #[source]
        source: Arc<dyn std::error::Error + Send + Sync>,
    },
}

/// How a collective operation failed (see [`Error::Communication`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CommFailure {
    /// Not every peer took part within the time limit: one died, hangs or is far behind.
    Timeout,
    /// The library reported a failed peer or a broken connection.
    PeerFailed,
    /// The ranks called different collectives, or the same one with different sizes, dtypes,
    /// shapes or roots.
    Mismatch,
    /// The library is not installed, could not be loaded or could not start.
    Unavailable,
    /// An earlier failure left the communicator unusable; every later call fails at once.
    Broken,
    /// Any other error the library reported.
    Library,
}

impl std::fmt::Display for CommFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CommFailure::Timeout => "timed out waiting for the other ranks",
            CommFailure::PeerFailed => "a peer failed",
            CommFailure::Mismatch => "the ranks disagree",
            CommFailure::Unavailable => "communication library unavailable",
            CommFailure::Broken => "communicator broken by an earlier failure",
            CommFailure::Library => "communication library error",
        })
    }
}

/// Two errors are equal when they are the same variant with the same message (an I/O or a
/// wrapped source error compares by its message), so tests can `assert_eq!` on errors.
impl PartialEq for Error {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.to_string() == other.to_string()
    }
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source: Arc::new(source),
        }
    }

    /// An [`Error::Format`] for `path`.
    pub fn format(path: impl Into<PathBuf>, msg: impl Into<String>) -> Self {
        Error::Format {
            path: path.into(),
            msg: msg.into(),
        }
    }

    /// An [`Error::Checkpoint`] with `msg`.
    pub fn checkpoint(msg: impl Into<String>) -> Self {
        Error::Checkpoint { msg: msg.into() }
    }

    /// An [`Error::Wrapped`]: `source` from outside Tessera, with what was being done.
    pub fn wrap(
        context: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Wrapped {
            context: context.into(),
            source: Arc::new(source),
        }
    }
}

/// `[2, 3], [3]`: the shapes of an op's inputs, for messages.
fn shape_list(shapes: &[Shape]) -> String {
    let parts: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
    parts.join(", ")
}

/// `std::result::Result` with Tessera's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
