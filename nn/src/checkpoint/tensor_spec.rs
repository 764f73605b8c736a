//! [`TensorSpec`]: the name, dims and dtype a checkpoint tensor must have, and the check of a
//! set of tensors against a list of them.

use crate::{Error, Result};
use std::collections::{BTreeMap, BTreeSet};
use tessera_core::{Backend, DType, Tensor};

/// What one named tensor must look like.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorSpec {
    /// The tensor's name in the checkpoint, e.g. `"fc1.weight"`.
    pub name: String,
    /// Its dimensions.
    pub dims: Vec<usize>,
    /// Its element type.
    pub dtype: DType,
}

impl TensorSpec {
    /// A spec from its parts.
    pub fn new(name: impl Into<String>, dims: impl Into<Vec<usize>>, dtype: DType) -> Self {
        TensorSpec {
            name: name.into(),
            dims: dims.into(),
            dtype,
        }
    }

    /// The spec of an existing tensor under `name`.
    pub fn of<B: Backend>(name: impl Into<String>, tensor: &Tensor<B>) -> Self {
        TensorSpec::new(name, tensor.dims(), tensor.dtype())
    }
}

/// How tolerant a checked load is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LoadMode {
    /// Every expected tensor must be present and no other tensor may be (PyTorch's
    /// `strict=True`).
    Strict,
    /// Missing and unexpected tensors are listed in the [`LoadReport`] instead of failing;
    /// unexpected ones are skipped (PyTorch's `strict=False`).
    NonStrict,
}

/// What a checked load tolerated (always empty in [`LoadMode::Strict`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LoadReport {
    /// Expected tensors the checkpoint lacks, in the order expected.
    pub missing: Vec<String>,
    /// Checkpoint tensors that were not expected and were skipped, sorted by name.
    pub unexpected: Vec<String>,
}

impl LoadReport {
    /// True when nothing was missing or skipped.
    pub fn is_complete(&self) -> bool {
        self.missing.is_empty() && self.unexpected.is_empty()
    }
}

/// Checks the tensors `found` (name → spec) against `expected`.
///
/// A tensor present in both but with other dims or dtype is always an error; missing and
/// unexpected tensors are errors in [`LoadMode::Strict`] and listed in the report otherwise.
/// Every problem is named in one [`Error::Checkpoint`]. Duplicate names in `expected` are an
/// [`Error::InvalidArgument`].
pub fn check_specs(
    found: &BTreeMap<String, TensorSpec>,
    expected: &[TensorSpec],
    mode: LoadMode,
) -> Result<LoadReport> {
    let mut seen = BTreeSet::new();
    let mut mismatched = Vec::new();
    let mut missing = Vec::new();
    for spec in expected {
        if !seen.insert(spec.name.as_str()) {
            return Err(Error::InvalidArgument {
                op: "checkpoint::check_specs",
                msg: format!("tensor '{}' is expected twice", spec.name),
            });
        }
        match found.get(&spec.name) {
            None => missing.push(spec.name.clone()),
            Some(got) if got.dims != spec.dims || got.dtype != spec.dtype => {
                mismatched.push(format!(
                    "tensor '{}' is {} {:?} in the checkpoint but {} {:?} is expected",
                    spec.name, got.dtype, got.dims, spec.dtype, spec.dims
                ));
            }
            Some(_) => {}
        }
    }
    let unexpected: Vec<String> = found
        .keys()
        .filter(|name| !seen.contains(name.as_str()))
        .cloned()
        .collect();

    let mut problems = mismatched;
    if mode == LoadMode::Strict {
        if !missing.is_empty() {
            problems.push(format!("missing tensors: {}", quoted_list(&missing)));
        }
        if !unexpected.is_empty() {
            problems.push(format!("unexpected tensors: {}", quoted_list(&unexpected)));
        }
    }
    if !problems.is_empty() {
        return Err(Error::checkpoint(problems.join("; ")));
    }
    if mode == LoadMode::Strict {
        return Ok(LoadReport::default());
    }
    Ok(LoadReport {
        missing,
        unexpected,
    })
}

/// `'a', 'b', 'c'`.
fn quoted_list(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}
