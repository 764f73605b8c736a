//! Checkpoints: named tensors plus string metadata in the
//! [safetensors](https://huggingface.co/docs/safetensors) format, readable by PyTorch's and
//! NumPy's `safetensors` loaders.
//!
//! * [`save`] writes any backend's tensors (F32, F64, I64, BOOL; dims preserved) atomically.
//! * [`load`] reads them back onto a backend; [`load_checked`] first checks names, dims and
//!   dtypes against a list of [`TensorSpec`]s ([`LoadMode::Strict`] or
//!   [`LoadMode::NonStrict`]); [`inspect`] lists a file's content without uploading it.
//! * Corrupt or truncated files are errors naming the file, never panics.
//!
//! The API is tensor-level on purpose: saving a model's parameters and its optimizer state is a
//! matter of naming their tensors.

mod atomic_write;
mod codec;
mod load;
mod save;
mod spooled_writer;
mod tensor_spec;
mod writer;

pub(crate) use atomic_write::{folder_of, write_atomically_with};
pub use atomic_write::{remove_stale_temporaries_in, write_atomically};
pub use load::{inspect, load, load_checked, CheckpointInfo, CheckpointReader};
pub use save::{save, serialize, METADATA_KEY};
pub(crate) use spooled_writer::SpooledSafetensors;
pub use tensor_spec::{check_specs, LoadMode, LoadReport, TensorSpec};
pub(crate) use writer::{plan, write_safetensors};

use crate::Result;
use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{Backend, Tensor};

/// Tensors by name.
pub type NamedTensors<B> = BTreeMap<String, Tensor<B>>;

/// The content of a checkpoint file: named tensors on a backend and string metadata (e.g. the
/// optimizer's name, the step count).
#[derive(Clone)]
pub struct Checkpoint<B: Backend> {
    /// The tensors, by name.
    pub tensors: NamedTensors<B>,
    /// Free-form string metadata.
    pub metadata: BTreeMap<String, String>,
}

impl<B: Backend> Default for Checkpoint<B> {
    fn default() -> Self {
        Checkpoint {
            tensors: BTreeMap::new(),
            metadata: BTreeMap::new(),
        }
    }
}

impl<B: Backend> std::fmt::Debug for Checkpoint<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let specs: Vec<TensorSpec> = self.specs();
        f.debug_struct("Checkpoint")
            .field("tensors", &specs)
            .field("metadata", &self.metadata)
            .finish()
    }
}

impl<B: Backend> Checkpoint<B> {
    /// An empty checkpoint.
    pub fn new() -> Self {
        Self::default()
    }

    /// The tensor called `name`, if any.
    pub fn get(&self, name: &str) -> Option<&Tensor<B>> {
        self.tensors.get(name)
    }

    /// The spec (name, dims, dtype) of every tensor, sorted by name.
    pub fn specs(&self) -> Vec<TensorSpec> {
        self.tensors
            .iter()
            .map(|(name, t)| TensorSpec::of(name.clone(), t))
            .collect()
    }

    /// Checks the tensors against `expected` (see [`check_specs`]).
    pub fn check(&self, expected: &[TensorSpec], mode: LoadMode) -> Result<LoadReport> {
        let found = self
            .tensors
            .iter()
            .map(|(name, t)| (name.clone(), TensorSpec::of(name.clone(), t)))
            .collect();
        check_specs(&found, expected, mode)
    }

    /// Writes the checkpoint to `path` atomically (see [`save`]).
    pub fn save(&self, path: impl AsRef<Path>) -> Result<()> {
        save(path, &self.tensors, &self.metadata)
    }
}
