//! Saving and restoring a model's parameters and buffers together with its optimizer's state in
//! one safetensors file (`model.<name>` and `optim.<key>` entries).

use crate::checkpoint::{self, LoadMode, TensorSpec};
use crate::module::Module;
use crate::optim::Optimizer;
use crate::{Error, Result};
use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{Backend, Tensor};

const MODEL_PREFIX: &str = "model.";
const OPTIM_PREFIX: &str = "optim.";
const FORMAT_KEY: &str = "format";
const FORMAT: &str = "tessera-training-state-v1";

/// What [`load_training_state`] found besides the tensors.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainingStateInfo {
    /// The metadata stored with the file (including `format`).
    pub metadata: BTreeMap<String, String>,
}

fn model_tensors<B: Backend, M: Module<B> + ?Sized>(model: &M) -> Vec<(String, Tensor<B>)> {
    let mut out = Vec::new();
    model.visit_parameters("", &mut |name, var| {
        out.push((format!("{MODEL_PREFIX}{name}"), var.value()))
    });
    model.visit_buffers("", &mut |name, var| {
        out.push((format!("{MODEL_PREFIX}{name}"), var.value()))
    });
    out
}

/// Writes the model's parameters and buffers and the optimizer's state to `path`, atomically,
/// with `metadata` (e.g. epoch, model kind) added to the file's header.
pub fn save_training_state<B, M, O>(
    path: impl AsRef<Path>,
    model: &M,
    optimizer: &O,
    metadata: &BTreeMap<String, String>,
) -> Result<()>
where
    B: Backend,
    M: Module<B> + ?Sized,
    O: Optimizer<B> + ?Sized,
{
    let mut tensors = model_tensors(model);
    tensors.extend(
        optimizer
            .state()
            .into_iter()
            .map(|(k, t)| (format!("{OPTIM_PREFIX}{k}"), t)),
    );
    let mut meta = metadata.clone();
    meta.insert(FORMAT_KEY.into(), FORMAT.into());
    checkpoint::save(path, tensors.iter().map(|(n, t)| (n.as_str(), t)), &meta)
}

/// Restores what [`save_training_state`] wrote. The model part is strict: a missing, extra,
/// mis-shaped or mis-typed tensor is an error naming it, and nothing is changed. The optimizer
/// part is checked by [`Optimizer::load_state`].
pub fn load_training_state<B, M, O>(
    path: impl AsRef<Path>,
    model: &M,
    optimizer: &mut O,
    backend: &B,
) -> Result<TrainingStateInfo>
where
    B: Backend,
    M: Module<B> + ?Sized,
    O: Optimizer<B> + ?Sized,
{
    let path = path.as_ref();
    let file = checkpoint::load(path, backend)?;
    if file.metadata.get(FORMAT_KEY).map(String::as_str) != Some(FORMAT) {
        return Err(Error::Checkpoint {
            msg: format!(
                "{}: not a Tessera training state (metadata format != {FORMAT})",
                path.display()
            ),
        });
    }
    let mut model_part = BTreeMap::new();
    let mut optim_part = Vec::new();
    for (name, tensor) in file.tensors {
        if let Some(rest) = name.strip_prefix(MODEL_PREFIX) {
            model_part.insert(rest.to_string(), tensor);
        } else if let Some(rest) = name.strip_prefix(OPTIM_PREFIX) {
            optim_part.push((rest.to_string(), tensor));
        } else {
            return Err(Error::Checkpoint {
                msg: format!("unexpected tensor `{name}` in {}", path.display()),
            });
        }
    }
    let mut targets = Vec::new();
    model.visit_parameters("", &mut |name, var| {
        targets.push((name.to_string(), var.clone()))
    });
    model.visit_buffers("", &mut |name, var| {
        targets.push((name.to_string(), var.clone()))
    });
    let specs: Vec<TensorSpec> = targets
        .iter()
        .map(|(name, var)| TensorSpec::new(name.clone(), var.dims().to_vec(), var.dtype()))
        .collect();
    let found: BTreeMap<String, TensorSpec> = model_part
        .iter()
        .map(|(name, t)| {
            (
                name.clone(),
                TensorSpec::new(name.clone(), t.dims().to_vec(), t.dtype()),
            )
        })
        .collect();
    checkpoint::check_specs(&found, &specs, LoadMode::Strict)?;
    optimizer.load_state(&optim_part)?;
    for (name, var) in &targets {
        var.set_value(model_part[name].clone())?;
    }
    Ok(TrainingStateInfo {
        metadata: file.metadata,
    })
}
