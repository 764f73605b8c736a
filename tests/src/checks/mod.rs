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
pub mod device;
pub mod display;
pub mod errors;
pub mod fused;
pub mod gradients;
pub mod indexing;
pub mod kinks;
pub mod losses;
pub mod matmul;
pub mod memory;
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
use crate::strategies::{elementwise_patterns, Pattern, TensorCase, ValueRegime};
use proptest::prelude::*;
use std::fmt::Debug;
use tessera_core::{Backend, DType, Tensor};

/// The float dtypes. The 16-bit ones run only on backends whose `supports_dtype` says so, with
/// the tolerances of `tessera_checked::tolerance` (f32 compute, one rounding).
pub const FLOAT_DTYPES: [DType; 4] = [DType::F32, DType::F64, DType::F16, DType::BF16];

/// The float dtypes gradients are checked in: f64 against finite differences, f32 against
/// the CPU. Not the 16-bit ones: finite differences need more precision than they have, and
/// their backward passes are the f32 ones run on upcast values (see the cast gradient tests).
pub const GRADIENT_DTYPES: [DType; 2] = [DType::F32, DType::F64];

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

/// The value regimes every element-wise op gets a systematic pattern of (on contiguous
/// full-shape operands), besides the structural patterns on ordinary values.
pub const VALUE_REGIMES: [ValueRegime; 3] =
    [ValueRegime::Huge, ValueRegime::Ties, ValueRegime::Specials];

/// The systematic patterns of an element-wise op of `dtypes.len()` operands named `names`:
/// every structure of [`elementwise_patterns`] on ordinary values, then each of
/// [`VALUE_REGIMES`] on full-shape contiguous operands; `make` turns the operands into a case.
pub(crate) fn elementwise_cases<T: Debug + 'static>(
    names: &[&str],
    dtypes: Vec<DType>,
    make: impl Fn(Vec<TensorCase>) -> T + Clone + 'static,
) -> Vec<Pattern<T>> {
    let n = dtypes.len();
    let patterns = elementwise_patterns(n);
    let mut out: Vec<Pattern<T>> = patterns
        .iter()
        .map(|p| {
            let make = make.clone();
            let strategy = p
                .strategy(dtypes.clone(), vec![ValueRegime::Ordinary; n])
                .prop_map(make)
                .boxed();
            Pattern::new(p.label(names), strategy)
        })
        .collect();
    for regime in VALUE_REGIMES {
        let make = make.clone();
        let strategy = patterns[0]
            .strategy(dtypes.clone(), vec![regime; n])
            .prop_map(make)
            .boxed();
        out.push(Pattern::new(regime.name(), strategy));
    }
    out
}
