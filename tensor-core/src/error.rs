//! The one error type of Tessera: every fallible operation returns [`Result`].

use crate::{DType, Shape};

/// Everything that can go wrong in a tensor operation.
///
/// Each message starts with the operation's name and names the offending shapes, dtypes, axes
/// or devices, e.g. `matmul: inner dimensions differ: lhs [2, 3] vs rhs [4, 5]`.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
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
}

/// `[2, 3], [3]`: the shapes of an op's inputs, for messages.
fn shape_list(shapes: &[Shape]) -> String {
    let parts: Vec<String> = shapes.iter().map(|s| s.to_string()).collect();
    parts.join(", ")
}

/// `std::result::Result` with Tessera's [`Error`].
pub type Result<T> = std::result::Result<T, Error>;
