//! `Display`: a small tensor lists every value; one past 1000 elements is summarised with `...`.

use super::op_failed;
use crate::runner::check_property;
use crate::strategies::{contiguous_case, shape, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, DType};

/// The number-like tokens of a printed tensor's body (brackets and separators removed),
/// `...` included; `None` when the text does not look like `tensor(<body>, dtype=.., device=..)`.
pub fn body_tokens(text: &str) -> Option<Vec<String>> {
    let body = text.strip_prefix("tensor(")?;
    let end = body.rfind(", dtype=")?;
    Some(
        body[..end]
            .split(|c: char| c == '[' || c == ']' || c == ',' || c.is_whitespace())
            .filter(|t| !t.is_empty())
            .map(str::to_string)
            .collect(),
    )
}

/// Parses one printed element: numbers, `nan`, `inf`, `-inf`, `true`, `false`.
pub fn parse_token(token: &str) -> Option<f64> {
    match token {
        "true" => Some(1.0),
        "false" => Some(0.0),
        t => t.parse().ok(),
    }
}

/// Whether a printed value `shown` stands for `value` (4 decimals or 5 significant digits).
fn shows(shown: f64, value: f64) -> bool {
    if value.is_nan() {
        return shown.is_nan();
    }
    if value.is_infinite() || shown.is_infinite() {
        return shown == value;
    }
    (shown - value).abs() <= 5.1e-5 + 5.1e-5 * value.abs()
}

/// A tensor to print.
#[derive(Clone, Debug)]
pub struct DisplayCase {
    /// The tensor (contiguous; printing reads through `download`).
    pub input: TensorCase,
}

/// Small tensors (at most 625 elements) of every dtype.
pub fn small_cases() -> BoxedStrategy<DisplayCase> {
    (shape(), prop::sample::select(DType::ALL.to_vec()))
        .prop_flat_map(|(s, dtype)| contiguous_case(dtype, s, ValueProfile::DEFAULT))
        .prop_map(|input| DisplayCase { input })
        .boxed()
}

/// Small tensors (at most 625 elements) of `dtype`.
pub fn small_cases_of(dtype: DType) -> BoxedStrategy<DisplayCase> {
    shape()
        .prop_flat_map(move |s| contiguous_case(dtype, s, ValueProfile::DEFAULT))
        .prop_map(|input| DisplayCase { input })
        .boxed()
}

/// Checks that every value of a small tensor is printed, in order, with its dtype and device.
pub fn check_small<B: Backend>(dev: &B, case: &DisplayCase) -> Result<(), String> {
    let t = case
        .input
        .build(dev)
        .map_err(op_failed::<B, _>("build", &[]))?;
    let text = t.to_string();
    let tokens = body_tokens(&text).ok_or_else(|| format!("unexpected format: {text}"))?;
    let values = case.input.reference().data;
    if tokens.len() != values.len() {
        return Err(format!(
            "{} tokens for {} values in {text}",
            tokens.len(),
            values.len()
        ));
    }
    for (i, (tok, &v)) in tokens.iter().zip(&values).enumerate() {
        let shown =
            parse_token(tok).ok_or_else(|| format!("token {tok:?} is not a value in {text}"))?;
        if !shows(shown, v) {
            return Err(format!("value {i} printed as {tok}, is {v} in {text}"));
        }
    }
    let suffix = format!(", dtype={}, device={})", t.dtype(), dev.device());
    if !text.ends_with(&suffix) {
        return Err(format!("{text} does not end with {suffix}"));
    }
    Ok(())
}

/// Shapes of more than 1000 elements (rank 1..=3).
pub fn big_shapes() -> BoxedStrategy<Vec<usize>> {
    prop_oneof![
        (1001usize..=3000).prop_map(|n| vec![n]),
        (2usize..=40, 0usize..=20).prop_map(|(a, extra)| vec![a, 1000 / a + 1 + extra]),
        (2usize..=10, 2usize..=10, 0usize..=5).prop_map(|(a, b, extra)| vec![
            a,
            b,
            1000 / (a * b) + 1 + extra
        ]),
    ]
    .boxed()
}

/// Checks that a big tensor is summarised: `...` appears, fewer values than elements are
/// printed, and the first and last printed values are the first and last elements.
pub fn check_big<B: Backend>(dev: &B, shape: &[usize]) -> Result<(), String> {
    let n: usize = shape.iter().product();
    let values: Vec<f64> = (0..n).map(|i| i as f64).collect();
    let t = tessera_core::Tensor::from_f64_values(&values, shape.to_vec(), DType::I64, dev)
        .map_err(op_failed::<B, _>("from_f64_values", &[]))?;
    let text = t.to_string();
    let tokens = body_tokens(&text).ok_or_else(|| format!("unexpected format: {text}"))?;
    if !tokens.iter().any(|t| t == "...") {
        return Err(format!("no `...` in the summary of {n} elements: {text}"));
    }
    let numbers: Vec<f64> = tokens.iter().filter_map(|t| parse_token(t)).collect();
    if numbers.len() >= n {
        return Err(format!("{} values printed for {n} elements", numbers.len()));
    }
    if numbers.first() != Some(&0.0) || numbers.last() != Some(&((n - 1) as f64)) {
        return Err(format!(
            "the summary does not start at 0 and end at {}: {text}",
            n - 1
        ));
    }
    Ok(())
}

/// Checks small and big tensors over 256 random cases each.
pub fn run<B: Backend>(dev: &B) {
    // Cases of a dtype the device lacks are skipped (the device family checks that they are
    // refused).
    check_property("display small", small_cases(), |c| {
        if dev.supports_dtype(c.input.dtype) {
            check_small(dev, c)
        } else {
            Ok(())
        }
    });
    check_property("display big", big_shapes(), |s| check_big(dev, s));
}
