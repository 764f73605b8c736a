//! What every optimizer shares: the named parameter list and the reading of saved state.

use std::collections::{HashMap, HashSet};
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// A parameter and the name its state is saved under.
pub(crate) struct NamedParam<B: Backend> {
    pub name: String,
    pub var: Var<B>,
}

/// Collects `params`, rejecting duplicate names (their saved states would collide).
pub(crate) fn collect_params<B: Backend>(
    op: &'static str,
    params: impl IntoIterator<Item = (String, Var<B>)>,
) -> Result<Vec<NamedParam<B>>> {
    let mut seen = HashSet::new();
    params
        .into_iter()
        .map(|(name, var)| {
            if !seen.insert(name.clone()) {
                return Err(Error::InvalidArgument {
                    op,
                    msg: format!("parameter name {name:?} appears twice"),
                });
            }
            Ok(NamedParam { name, var })
        })
        .collect()
}

/// Errors unless `value` is finite, at least `min` and, if given, below `max_exclusive`.
pub(crate) fn check_hyper(
    op: &'static str,
    what: &str,
    value: f64,
    min: f64,
    max_exclusive: Option<f64>,
) -> Result<()> {
    let in_range = value.is_finite() && value >= min && max_exclusive.is_none_or(|m| value < m);
    if !in_range {
        let upper = max_exclusive.map_or(String::new(), |m| format!(" and below {m}"));
        return Err(Error::InvalidArgument {
            op,
            msg: format!("{what} must be at least {min}{upper}, got {value}"),
        });
    }
    Ok(())
}

/// The `i64` scalar tensor saved as a parameter's `step`, on `like`'s device.
pub(crate) fn step_tensor<B: Backend>(step: u64, like: &Tensor<B>) -> Result<Tensor<B>> {
    Tensor::full((), step as f64, DType::I64, like.backend())
}

/// Saved state being taken apart by key; whatever is left at the end is an error.
pub(crate) struct StateReader<B: Backend> {
    op: &'static str,
    entries: HashMap<String, Tensor<B>>,
}

impl<B: Backend> StateReader<B> {
    /// Indexes `state`, rejecting duplicate keys.
    pub fn new(op: &'static str, state: &[(String, Tensor<B>)]) -> Result<Self> {
        let mut entries = HashMap::new();
        for (key, tensor) in state {
            if entries.insert(key.clone(), tensor.clone()).is_some() {
                return Err(Error::InvalidArgument {
                    op,
                    msg: format!("state key {key:?} appears twice"),
                });
            }
        }
        Ok(StateReader { op, entries })
    }

    /// Whether `param` has any saved entry.
    pub fn has_any(&self, param: &str) -> bool {
        let prefix = format!("{param}.");
        self.entries.keys().any(|k| k.starts_with(&prefix))
    }

    /// Removes and returns `"<param>.<key>"`, which must exist.
    fn take(&mut self, param: &str, key: &str) -> Result<Tensor<B>> {
        let full = format!("{param}.{key}");
        self.entries
            .remove(&full)
            .ok_or_else(|| Error::InvalidArgument {
                op: self.op,
                msg: format!("state of parameter {param:?} lacks {full:?}"),
            })
    }

    /// Removes `"<param>.<key>"`, which must have the shape and dtype of `like`, and returns it
    /// (made contiguous on the parameter's device layout).
    pub fn take_like(&mut self, param: &str, key: &str, like: &Tensor<B>) -> Result<Tensor<B>> {
        let tensor = self.take(param, key)?;
        if tensor.shape() != like.shape() || tensor.dtype() != like.dtype() {
            return Err(Error::InvalidArgument {
                op: self.op,
                msg: format!(
                    "{param}.{key}: expected a {} tensor of shape {}, got a {} tensor of shape {}",
                    like.dtype(),
                    like.shape(),
                    tensor.dtype(),
                    tensor.shape()
                ),
            });
        }
        Ok(tensor)
    }

    /// Removes `"<param>.step"` and returns it as a count.
    pub fn take_step(&mut self, param: &str) -> Result<u64> {
        let tensor = self.take(param, "step")?;
        let value = tensor.to_scalar_f64()?;
        if !(value.is_finite() && value >= 0.0 && value.fract() == 0.0) {
            return Err(Error::InvalidArgument {
                op: self.op,
                msg: format!("{param}.step must be a non-negative whole number, got {value}"),
            });
        }
        Ok(value as u64)
    }

    /// Errors if any key was not consumed.
    pub fn finish(self) -> Result<()> {
        if let Some(key) = self.entries.keys().min() {
            return Err(Error::InvalidArgument {
                op: self.op,
                msg: format!("unexpected state key {key:?}"),
            });
        }
        Ok(())
    }
}
