//! [`FolderSource`]: a model's parameters read from an open Hugging Face folder by the model's
//! own names, one tensor at a time, so that a model is loaded whole ([`FolderSource::load`]
//! over every parameter) or one block at a time (a deferred load: the blocks' parameters hold
//! placeholders until [`FolderSource::load`] reads theirs).

use super::hf_files::WeightsFolder;
use super::{convert_dtype, same_values};
use crate::checkpoint::{check_specs, LoadMode, TensorSpec};
use crate::module::model_vars;
use crate::Module;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, DType, Error, Result, Tensor};

/// Where one of the model's tensors is stored in the folder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stored {
    /// The stored tensor's name.
    pub name: String,
    /// Whether it is stored transposed (GPT-2's `Conv1D` weights).
    pub transposed: bool,
}

impl Stored {
    /// Stored under `name`, as the model holds it.
    pub(crate) fn plain(name: impl Into<String>) -> Self {
        Stored {
            name: name.into(),
            transposed: false,
        }
    }

    /// `tensor` (a model's) in the stored layout, or the stored one (the same transposition)
    /// in the model's.
    pub(crate) fn layout<B: Backend>(&self, tensor: Tensor<B>) -> Result<Tensor<B>> {
        if self.transposed {
            tensor.t()?.contiguous()
        } else {
            Ok(tensor)
        }
    }
}

/// A model's tensors in an open Hugging Face folder: each of the model's names mapped to where
/// it is stored, read in the model's dtype. What a deferred load
/// ([`super::PretrainedModel::from_pretrained_deferred`]) reads its blocks from.
pub struct FolderSource {
    dir: PathBuf,
    folder: WeightsFolder,
    /// The model's tensor name → where it is stored.
    sources: BTreeMap<String, Stored>,
    dtype: DType,
}

impl FolderSource {
    /// The model tensors `sources` of `folder` (opened from `dir`), read as `dtype`.
    pub(crate) fn new(
        dir: &Path,
        folder: WeightsFolder,
        sources: BTreeMap<String, Stored>,
        dtype: DType,
    ) -> Self {
        FolderSource {
            dir: dir.to_path_buf(),
            folder,
            sources,
            dtype,
        }
    }

    /// Checks the model's tensors `model` (name and variable) against the folder before any
    /// value is read: strictly, every tensor must be stored, every stored tensor must have a
    /// place in the model, and each must have the model tensor's dims (after transposition)
    /// and a float dtype (converted to the model's). One error names every problem.
    pub(crate) fn check<B: Backend>(&self, model: &[(String, Var<B>)]) -> Result<()> {
        let mut found = BTreeMap::new();
        for (ours, stored) in &self.sources {
            let spec = self.folder.spec(&stored.name).ok_or_else(|| {
                Error::checkpoint(format!(
                    "{}: tensor `{}` is not stored",
                    self.dir.display(),
                    stored.name
                ))
            })?;
            let mut dims = spec.dims.clone();
            if stored.transposed {
                dims.reverse();
            }
            // A float is converted to the model's dtype; anything else is reported as stored.
            let dtype = if spec.dtype.is_float() {
                self.dtype
            } else {
                spec.dtype
            };
            found.insert(ours.clone(), TensorSpec::new(ours.clone(), dims, dtype));
        }
        let expected: Vec<TensorSpec> = model
            .iter()
            .map(|(name, var)| TensorSpec::new(name.clone(), var.dims(), var.dtype()))
            .collect();
        check_specs(&found, &expected, LoadMode::Strict)
            .map(|_| ())
            .map_err(|e| match e {
                Error::Checkpoint { msg } => {
                    Error::checkpoint(format!("{}: {msg}", self.dir.display()))
                }
                other => other,
            })
    }

    /// Errors unless the folder stores tensors of each of `blocks` blocks named
    /// `"{prefix}.{i}.…"`: checked before a model of that many blocks is built, so that a
    /// configuration that claims more blocks than the weights hold (a damaged file may claim
    /// millions) is an error naming the first missing block, not a model built for nothing.
    pub(crate) fn check_blocks(&self, prefix: &str, blocks: usize) -> Result<()> {
        let prefix = format!("{prefix}.");
        let stored: std::collections::BTreeSet<usize> = (self.sources.keys())
            .filter_map(|name| name.strip_prefix(&prefix)?.split('.').next()?.parse().ok())
            .collect();
        match (0..blocks).find(|i| !stored.contains(i)) {
            None => Ok(()),
            Some(missing) => Err(Error::checkpoint(format!(
                "{}: the configuration has {blocks} blocks, but no tensor of block {missing} \
                 (`{prefix}{missing}.…`) is stored",
                self.dir.display()
            ))),
        }
    }

    /// The model tensor `ours` read onto `backend`: in the model's dtype and layout.
    pub(crate) fn read<B: Backend>(&self, ours: &str, backend: &B) -> Result<Tensor<B>> {
        let stored = self.sources.get(ours).ok_or_else(|| {
            Error::checkpoint(format!(
                "{}: no stored tensor for `{ours}`",
                self.dir.display()
            ))
        })?;
        stored.layout(convert_dtype(
            self.folder.read(&stored.name, backend)?,
            self.dtype,
        )?)
    }

    /// Gives each of `params` (the model's names and variables) the value read for it. A
    /// variable listed under two names (a tied weight) is read once.
    pub(crate) fn load<B: Backend>(&self, params: &[(String, Var<B>)]) -> Result<()> {
        let mut done = std::collections::BTreeSet::new();
        for (name, var) in params {
            if !done.insert(var.id()) {
                continue;
            }
            let backend = var.value().backend().clone();
            let value = self.read(name, &backend)?;
            no_grad(|| var.set_value(value))?;
        }
        Ok(())
    }

    /// [`FolderSource::load`] of the tensors of `vars` not named `"{blocks}.…"`: everything
    /// outside the blocks.
    pub(crate) fn load_outside<B: Backend>(
        &self,
        vars: Vec<(String, Var<B>)>,
        blocks: &str,
    ) -> Result<()> {
        self.load(&vars_where(vars, blocks, false))
    }

    /// Errors unless the stored tensors `a` and `b` (model names) hold the same values: a tied
    /// weight stored under both names (`what` explains the tie).
    pub(crate) fn check_same<B: Backend>(
        &self,
        a: &str,
        b: &str,
        backend: &B,
        what: &str,
    ) -> Result<()> {
        if self.sources.get(a) == self.sources.get(b) {
            return Ok(());
        }
        if same_values(&self.read(a, backend)?, &self.read(b, backend)?)? {
            Ok(())
        } else {
            Err(Error::checkpoint(what.to_string()))
        }
    }
}

/// The tensors of [`model_vars`] named `"{prefix}.…"` (`inside`) or not (`!inside`).
fn vars_where<B: Backend>(
    mut vars: Vec<(String, Var<B>)>,
    prefix: &str,
    inside: bool,
) -> Vec<(String, Var<B>)> {
    let prefix = format!("{prefix}.");
    vars.retain(|(name, _)| name.starts_with(&prefix) == inside);
    vars
}

/// The tensors of [`model_vars`] named `"{prefix}.…"`.
pub(crate) fn tensors_under<B: Backend, M: Module<B> + ?Sized>(
    model: &M,
    prefix: &str,
) -> Vec<(String, Var<B>)> {
    vars_where(model_vars(model), prefix, true)
}
