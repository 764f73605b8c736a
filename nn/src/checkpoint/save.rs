//! Writing named tensors and string metadata to a safetensors file, atomically.

use crate::checkpoint::atomic_write::write_atomically;
use crate::checkpoint::codec::{host_to_le_bytes, to_safetensors_dtype, EncodedTensor};
use crate::{Error, Result};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use tessera_core::{Backend, Tensor};

/// The key safetensors reserves for the metadata in its header; no tensor may be named so.
pub const METADATA_KEY: &str = "__metadata__";

/// Saves `tensors` (name, tensor) and `metadata` to the safetensors file `path`, replacing it
/// atomically (see [`crate::checkpoint::write_atomically`]): a crash leaves the old file or the
/// new one, never a partial one.
///
/// Tensors may live on any backend and be non-contiguous views; they are stored row-major with
/// their dims and dtype (F32, F64, I64 or BOOL). Names must be non-empty, unique and not
/// `__metadata__`; a violation is an [`Error::Checkpoint`] naming the tensor.
pub fn save<'a, B, N, I>(
    path: impl AsRef<Path>,
    tensors: I,
    metadata: &BTreeMap<String, String>,
) -> Result<()>
where
    B: Backend,
    N: AsRef<str>,
    I: IntoIterator<Item = (N, &'a Tensor<B>)>,
{
    let bytes = serialize(tensors, metadata)?;
    write_atomically(path.as_ref(), &bytes)
}

/// The bytes of the safetensors file [`save`] writes.
pub fn serialize<'a, B, N, I>(tensors: I, metadata: &BTreeMap<String, String>) -> Result<Vec<u8>>
where
    B: Backend,
    N: AsRef<str>,
    I: IntoIterator<Item = (N, &'a Tensor<B>)>,
{
    let mut encoded: BTreeMap<String, EncodedTensor> = BTreeMap::new();
    for (name, tensor) in tensors {
        let name = name.as_ref();
        if name.is_empty() || name == METADATA_KEY {
            return Err(Error::checkpoint(format!(
                "invalid tensor name '{name}' (names must be non-empty and not {METADATA_KEY})"
            )));
        }
        if encoded.contains_key(name) {
            return Err(Error::checkpoint(format!("tensor '{name}' is given twice")));
        }
        let host = tensor.to_host().map_err(|e| {
            Error::checkpoint(format!(
                "cannot read tensor '{name}' back from the device: {e}"
            ))
        })?;
        let unencodable = || {
            Error::checkpoint(format!(
                "tensor '{name}' has dtype {}, which safetensors cannot store",
                tensor.dtype()
            ))
        };
        encoded.insert(
            name.to_string(),
            EncodedTensor {
                dtype: to_safetensors_dtype(tensor.dtype()).ok_or_else(unencodable)?,
                shape: tensor.dims().to_vec(),
                bytes: host_to_le_bytes(&host).ok_or_else(unencodable)?,
            },
        );
    }
    let info: Option<HashMap<String, String>> = if metadata.is_empty() {
        None
    } else {
        Some(
            metadata
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        )
    };
    safetensors::serialize(encoded.iter().map(|(n, t)| (n.as_str(), t)), info)
        .map_err(|e| Error::checkpoint(format!("cannot serialise the tensors: {e}")))
}
