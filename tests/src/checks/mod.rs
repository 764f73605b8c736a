//! One module per op family. Each has a `*Case` type (Debug-printable: op, shapes, layout
//! recipes, values), a `cases` strategy, a `check(dev, case)` that compares the backend with the
//! reference and returns `Err(description)` on a mismatch, and a `run(dev, ..)` that checks the
//! property over proptest's default 256 cases. Everything is generic over the backend.

pub mod arg_reduce;
pub mod attention;
pub mod binary;
pub mod cast;
pub mod comparison;
pub mod concat;
pub mod constructors;
pub mod conv;
pub mod display;
pub mod gradients;
pub mod indexing;
pub mod matmul;
pub mod metamorphic;
pub mod pool;
pub mod random;
pub mod reduce;
pub mod softmax;
pub mod statistics;
pub mod unary;
pub mod views;
pub mod where_select;

use crate::compare::describe_inputs;
use crate::strategies::TensorCase;
use tessera_core::{Backend, DType, Tensor};

/// The float dtypes.
pub const FLOAT_DTYPES: [DType; 2] = [DType::F32, DType::F64];

/// Builds the tensor of `case`, describing a failure.
pub(crate) fn build<B: Backend>(
    dev: &B,
    case: &TensorCase,
    what: &str,
) -> Result<Tensor<B>, String> {
    case.build(dev)
        .map_err(|e| format!("building {what} failed: {e}"))
}

/// Appends the layouts of `inputs` to a failure description.
pub(crate) fn with_inputs<B: Backend>(inputs: &[&Tensor<B>]) -> impl FnOnce(String) -> String {
    let described = describe_inputs(inputs);
    move |e| format!("{e}{described}")
}

/// Turns an op error into a failure description that names the op and the inputs.
pub(crate) fn op_failed<B: Backend, E: std::fmt::Display>(
    op: &str,
    inputs: &[&Tensor<B>],
) -> impl FnOnce(E) -> String {
    let described = describe_inputs(inputs);
    let op = op.to_string();
    move |e| format!("{op} returned an error: {e}{described}")
}

/// Expresses a resolved axis as `tensor-core` accepts it: as is or counted from the end.
pub(crate) fn signed_axis(axis: usize, rank: usize, from_end: bool) -> isize {
    if from_end {
        axis as isize - rank as isize
    } else {
        axis as isize
    }
}
