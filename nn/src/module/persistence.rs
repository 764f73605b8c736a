//! State dicts, saving and loading of modules (the provided methods of [`Module`]).

use super::{Module, ModuleVisitor};
use crate::checkpoint::{self, check_specs, LoadMode, LoadReport, NamedTensors, TensorSpec};
use std::collections::BTreeMap;
use std::path::Path;
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Result};

/// How [`Module::load_with`] treats a file that does not match the module exactly.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Strict (the default): every tensor of the module must be in the file and nothing else;
    /// non-strict: load what matches and report the rest.
    pub mode: LoadMode,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            mode: LoadMode::Strict,
        }
    }
}

impl LoadOptions {
    /// Strict loading (the default).
    pub fn strict() -> Self {
        Self::default()
    }

    /// Non-strict loading: missing and unexpected tensors are reported, not errors.
    pub fn non_strict() -> Self {
        LoadOptions {
            mode: LoadMode::NonStrict,
        }
    }
}

/// Every parameter and buffer with its name, in visiting order (a tensor visited under two
/// names, e.g. tied weights, appears under both).
struct Collect<B: Backend>(Vec<(String, Var<B>)>);

impl<B: Backend> ModuleVisitor<B> for Collect<B> {
    fn visit_parameter(&mut self, name: &str, parameter: &Var<B>) {
        self.0.push((name.to_string(), parameter.clone()));
    }
    fn visit_buffer(&mut self, name: &str, buffer: &Var<B>) {
        self.0.push((name.to_string(), buffer.clone()));
    }
}

fn collect<B: Backend, M: Module<B> + ?Sized>(module: &M) -> Vec<(String, Var<B>)> {
    let mut c = Collect(Vec::new());
    module.visit("", &mut c);
    c.0
}

pub(super) fn state_dict<B: Backend, M: Module<B> + ?Sized>(module: &M) -> NamedTensors<B> {
    collect(module)
        .into_iter()
        .map(|(name, var)| (name, var.value()))
        .collect()
}

/// The specs the module expects, erroring on a name visited twice for different tensors.
fn expected_specs<B: Backend>(vars: &[(String, Var<B>)]) -> Result<Vec<TensorSpec>> {
    let mut seen: BTreeMap<&str, u64> = BTreeMap::new();
    let mut specs = Vec::new();
    for (name, var) in vars {
        match seen.insert(name, var.id()) {
            Some(id) if id == var.id() => continue,
            Some(_) => {
                return Err(Error::checkpoint(format!(
                    "the module names two different tensors '{name}'"
                )))
            }
            None => specs.push(TensorSpec::new(name.clone(), var.dims(), var.dtype())),
        }
    }
    Ok(specs)
}

/// Sets the visited variables from `tensors`, after the checks of `mode` passed.
fn assign<B: Backend>(vars: &[(String, Var<B>)], tensors: &NamedTensors<B>) -> Result<()> {
    for (name, var) in vars {
        if let Some(t) = tensors.get(name) {
            var.set_value(t.clone())?;
        }
    }
    Ok(())
}

pub(super) fn load_state_dict<B: Backend, M: Module<B> + ?Sized>(
    module: &M,
    tensors: &NamedTensors<B>,
    mode: LoadMode,
) -> Result<LoadReport> {
    let vars = collect(module);
    let expected = expected_specs(&vars)?;
    let found = tensors
        .iter()
        .map(|(name, t)| (name.clone(), TensorSpec::of(name.clone(), t)))
        .collect();
    let report = check_specs(&found, &expected, mode)?;
    assign(&vars, tensors)?;
    Ok(report)
}

/// The metadata of a file [`Module::save`] writes.
pub(crate) fn module_file_metadata() -> BTreeMap<String, String> {
    BTreeMap::from([("format".to_string(), "tessera-module-v1".to_string())])
}

pub(super) fn save<B: Backend, M: Module<B> + ?Sized>(module: &M, path: &Path) -> Result<()> {
    let tensors = state_dict(module);
    checkpoint::save(path, tensors.iter(), &module_file_metadata())
}

pub(super) fn load<B: Backend, M: Module<B> + ?Sized>(
    module: &M,
    path: &Path,
    options: LoadOptions,
) -> Result<LoadReport> {
    let vars = collect(module);
    let expected = expected_specs(&vars)?;
    let Some((_, first)) = vars.first() else {
        // Nothing to load into: only the file's own checks apply.
        let info = checkpoint::inspect(path)?;
        let report =
            check_specs(&info.tensors, &[], options.mode).map_err(|e| prefix_path(e, path))?;
        return Ok(report);
    };
    let backend = first.value().backend().clone();
    let (loaded, report) = checkpoint::load_checked(path, &backend, &expected, options.mode)?;
    assign(&vars, &loaded.tensors)?;
    Ok(report)
}

fn prefix_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Checkpoint { msg } => Error::checkpoint(format!("{}: {msg}", path.display())),
        other => other,
    }
}
