//! The error type of the `nn` crate: every fallible function here returns [`Result`].

use std::path::PathBuf;

/// Everything that can go wrong in `nn`: tensor errors from `tensor-core`, file access, malformed
/// files, checkpoint mismatches and missing data sets.
///
/// Messages name the file or the tensor concerned, e.g.
/// `data/train-images-idx3-ubyte.gz: payload has 1000 bytes but dims [60000, 28, 28] need 47040000`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A tensor operation failed.
    #[error(transparent)]
    Tensor(#[from] tessera_core::Error),

    /// Reading or writing a file failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder being accessed.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
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

    /// A checkpoint does not match what was expected (a missing, extra, mis-shaped or mis-typed
    /// tensor, an unsupported dtype, an invalid name); `msg` names the tensor.
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

    /// An argument is invalid (a zero batch size, an index beyond a data set, ...).
    #[error("{op}: {msg}")]
    InvalidArgument {
        /// The function that rejected the argument.
        op: &'static str,
        /// Which argument and why.
        msg: String,
    },

    /// A background worker (e.g. the data loader's prefetch thread) stopped unexpectedly.
    #[error("worker thread: {msg}")]
    Worker {
        /// What happened to the worker.
        msg: String,
    },
}

/// `std::result::Result` with the `nn` [`Error`].
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
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
}
