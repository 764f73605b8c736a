//! One module per op family. Each has a `*Case` type (Debug-printable: op, shapes, layout
//! recipes, values), a `cases` strategy, a `check(dev, case)` that compares the backend with the
//! reference and returns `Err(description)` on a mismatch, and a `run(dev, ..)` that checks the
//! property over proptest's default 256 cases. Everything is generic over the backend.

pub mod arg_reduce;
pub mod attention;
pub mod attention_accuracy;
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

/// The provided `Backend` methods whose default implementations are composites of other
/// methods (`tensor-core/src/composite`).
pub const COMPOSITE_METHODS: [&str; 20] = [
    "concat",
    "softmax",
    "log_softmax",
    "logsumexp",
    "conv2d",
    "conv2d_backward_input",
    "conv2d_backward_weight",
    "max_pool2d",
    "avg_pool2d",
    "max_pool2d_backward",
    "avg_pool2d_backward",
    "relu_backward",
    "gelu_backward",
    "cross_entropy",
    "cross_entropy_backward",
    "layer_norm",
    "layer_norm_backward",
    "adam_update",
    "scaled_dot_product_attention",
    "scaled_dot_product_attention_backward",
];

/// When `method` is a composite and `error` (whose message starts with the name of the op that
/// raised it, `"random: not supported for dtype f16"`) was raised by another op, a note saying
/// so: the failure happened inside the default composite `method` calling that op, which the
/// vendor may not have expected to be called (or called in that dtype). Empty otherwise.
pub fn composite_note(method: &str, error: &str) -> String {
    let method = method.split_whitespace().next().unwrap_or(method);
    if !COMPOSITE_METHODS.contains(&method) {
        return String::new();
    }
    let Some((inner, _)) = error.split_once(": ") else {
        return String::new();
    };
    let is_op_name = !inner.is_empty()
        && inner
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !is_op_name || inner == method || method.starts_with(inner) {
        return String::new();
    }
    format!(
        "\n  note: the error was raised by `{inner}`, called inside `{method}`: unless this \
         backend overrides `{method}`, the failure happened inside the default composite \
         `{method}` (tensor-core/src/composite) calling `{inner}` with operands of this case's \
         dtype. Support them in `{inner}`, or override `{method}` (for 16-bit operands, compute \
         it in f32 with `tessera_core::composite::in_f32`)"
    )
}

/// Turns an op error into a failure description that names the op and the inputs (and, for
/// an error raised inside a default composite, the op that raised it: [`composite_note`]).
pub(crate) fn op_failed<B: Backend, E: std::fmt::Display>(
    op: &str,
    inputs: &[&Tensor<B>],
) -> impl FnOnce(E) -> String {
    let described = describe_inputs(inputs);
    let op = op.to_string();
    move |e| {
        let e = e.to_string();
        let note = composite_note(&op, &e);
        format!("{op} returned an error: {e}{note}{described}")
    }
}

/// For a 16-bit result that is NaN or infinite where the reference is finite, or far from it,
/// a hint that the intermediates were probably computed in 16 bits (the contract: compute in
/// f32, round once). Empty for other dtypes.
pub fn sixteen_bit_hint(dtype: DType, failure: &str) -> String {
    if !dtype.is_half() {
        return String::new();
    }
    let (max, min_normal) = if dtype == DType::F16 {
        ("65504", "6.1e-5")
    } else {
        ("3.4e38", "1.2e-38 (with 8 bits of precision)")
    };
    let non_finite = ["got NaN", "got inf", "got -inf", "expected a finite value"]
        .iter()
        .any(|s| failure.contains(s));
    let what = if non_finite {
        "a NaN or infinite result where the reference is finite"
    } else {
        "a result this far from the reference"
    };
    format!(
        "\n  hint: {what} in {dtype} usually means 16-bit intermediates: the contract is to \
         compute in f32 and round each result once (a square, a sum of squares or a quotient \
         overflows {dtype}'s largest value {max} or underflows its smallest normal {min_normal} \
         long before f32's do). Run the kernel in f32 between casts, e.g. with \
         `tessera_core::composite::in_f32`"
    )
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_inside_default_composites_name_the_composite_and_the_op() {
        let note = composite_note(
            "scaled_dot_product_attention",
            "random: not supported for dtype f16",
        );
        assert!(
            note.contains("raised by `random`, called inside `scaled_dot_product_attention`")
                && note.contains("the default composite `scaled_dot_product_attention`")
                && note.contains("in_f32"),
            "{note}"
        );
        // The composite's own error, a primitive's error and a message without an op name
        // get no note.
        assert_eq!(
            composite_note("adam_update", "adam_update: shapes differ"),
            ""
        );
        assert_eq!(composite_note("matmul", "random: not supported"), "");
        assert_eq!(composite_note("softmax", "out of memory on cpu:0: ..."), "");
    }

    #[test]
    fn sixteen_bit_failures_hint_at_16_bit_intermediates() {
        let failure = "mismatch at index [0] (flat 0): got NaN, expected 0.0";
        let hint = sixteen_bit_hint(DType::F16, failure);
        assert!(
            hint.contains("NaN or infinite") && hint.contains("compute in f32"),
            "{hint}"
        );
        assert_eq!(sixteen_bit_hint(DType::F32, failure), "");
    }
}
