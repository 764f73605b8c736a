//! The invariants every `Ok` result must satisfy, whatever the operation: the promises of
//! `tessera_core::limits` and of the layout rules, and that a small result reads back.

use crate::machine::Value;
use tessera_core::{Backend, BackendStorage, Tensor};

/// Results up to this many elements are read back to the host as part of the check.
const READ_BACK_LIMIT: usize = 4096;

/// Checks one value: a tensor directly, a variable through its value and gradient, a layer
/// through its parameters and buffers, an optimizer through its state.
pub fn check_value<B: Backend>(value: &Value<B>) -> Result<(), String> {
    match value {
        Value::Tensor(t) => check_tensor(t),
        Value::Var(v) => {
            check_tensor(&v.value())?;
            if let Some(g) = v.grad() {
                check_tensor(&g).map_err(|e| format!("gradient: {e}"))?;
                if g.shape() != v.shape() {
                    return Err(format!(
                        "gradient of shape {} for a variable of shape {}",
                        g.shape(),
                        v.shape()
                    ));
                }
            }
            Ok(())
        }
        Value::Layer(l) => {
            let mut result = Ok(());
            let mut check = |name: &str, v: &tessera_autograd::Var<B>| {
                if result.is_ok() {
                    result = check_tensor(&v.value()).map_err(|e| format!("{name}: {e}"));
                }
            };
            l.module.visit_parameters("", &mut check);
            l.module.visit_buffers("", &mut check);
            result
        }
        Value::Optim(o) => {
            for (name, t) in o.state() {
                check_tensor(&t).map_err(|e| format!("state {name}: {e}"))?;
            }
            Ok(())
        }
    }
}

/// The invariants of one tensor:
/// * its shape is within the size limits (rank, extent) and its element count is exact;
/// * its layout has non-negative strides and stays inside its storage (`check_fits`);
/// * a contiguous layout's storage range is inside the storage;
/// * a small tensor reads back as exactly `numel` elements of its dtype.
pub fn check_tensor<B: Backend>(t: &Tensor<B>) -> Result<(), String> {
    let shape = t.shape();
    let numel = shape
        .check_size("invariant")
        .map_err(|e| format!("shape {shape} beyond the limits: {e}"))?;
    if shape.checked_numel() != Some(numel) || t.numel() != numel {
        return Err(format!("element count of {shape} is not exact"));
    }
    let layout = t.layout();
    let storage_len = t.storage().len();
    layout
        .check_fits("invariant", storage_len)
        .map_err(|e| format!("layout outside its storage: {e}"))?;
    if t.storage().dtype() != t.dtype() {
        return Err("storage dtype differs from the tensor's".into());
    }
    if numel > 0 {
        if let Some(range) = layout.contiguous_range() {
            if range.end > storage_len {
                return Err(format!(
                    "contiguous range {range:?} past a storage of {storage_len} elements"
                ));
            }
        }
    }
    if numel <= READ_BACK_LIMIT {
        let host = t
            .to_host()
            .map_err(|e| format!("a valid tensor of {numel} elements does not read back: {e}"))?;
        if host.len() != numel || host.dtype() != t.dtype() {
            return Err(format!(
                "read back {} {} elements for a {} tensor of {numel}",
                host.len(),
                host.dtype(),
                t.dtype()
            ));
        }
    }
    Ok(())
}
