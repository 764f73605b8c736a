//! Exact host values in a checkpoint's JSON state: `f64`s by their bits, `u64`s as numbers.

use crate::{Error, Result};
use serde_json::Value;

/// `x` as a JSON string of its 64 bits in hexadecimal, so that NaN, infinities and every last
/// bit survive the round trip (read back with [`f64_from_json`]).
pub fn f64_to_json(x: f64) -> Value {
    Value::String(format!("{:016x}", x.to_bits()))
}

/// The `f64` that [`f64_to_json`] wrote into `value` (named `what` in the error otherwise).
pub fn f64_from_json(value: &Value, what: &str) -> Result<f64> {
    value
        .as_str()
        .filter(|s| s.len() == 16)
        .and_then(|s| u64::from_str_radix(s, 16).ok())
        .map(f64::from_bits)
        .ok_or_else(|| {
            Error::checkpoint(format!(
                "checkpoint state `{what}` is not an f64 bit pattern: {value}"
            ))
        })
}

/// A loss scaler's position (`DynamicLossScaler::position`, None without a scaler) as JSON
/// `[scale bits, finite steps]` or `null` (read back with [`scaler_from_json`]).
pub fn scaler_to_json(position: Option<(f64, usize)>) -> Value {
    position.map_or(Value::Null, |(scale, n)| {
        Value::Array(vec![f64_to_json(scale), n.into()])
    })
}

/// The loss-scaler position [`scaler_to_json`] wrote into `value`.
pub fn scaler_from_json(value: &Value) -> Result<Option<(f64, usize)>> {
    match value {
        Value::Null => Ok(None),
        v => Ok(Some((
            f64_from_json(&v[0], "scaler.scale")?,
            u64_from_json(&v[1], "scaler.finite_steps")? as usize,
        ))),
    }
}

/// The `u64` in `value` (named `what` in the error otherwise).
pub fn u64_from_json(value: &Value, what: &str) -> Result<u64> {
    value.as_u64().ok_or_else(|| {
        Error::checkpoint(format!(
            "checkpoint state `{what}` is not an unsigned integer: {value}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_bit_of_an_f64_survives() {
        for x in [
            0.1,
            -0.0,
            f64::NAN,
            f64::INFINITY,
            f64::MIN_POSITIVE / 3.0,
            1.0 + f64::EPSILON,
        ] {
            let back = f64_from_json(&f64_to_json(x), "x").unwrap();
            assert_eq!(back.to_bits(), x.to_bits());
        }
    }

    #[test]
    fn malformed_values_are_named_errors() {
        for v in [
            Value::from(1.5),
            Value::from("12"),
            Value::from("zzzzzzzzzzzzzzzz"),
        ] {
            let e = f64_from_json(&v, "loss_sum").unwrap_err().to_string();
            assert!(e.contains("loss_sum"), "{e}");
        }
        assert!(u64_from_json(&Value::from(-1), "step").is_err());
        assert_eq!(u64_from_json(&Value::from(7), "step").unwrap(), 7);
    }
}
