//! Writing named tensors and string metadata to a safetensors file, atomically.

use crate::checkpoint::atomic_write::write_atomically_with;
use crate::checkpoint::writer;
use crate::Result;
use std::collections::BTreeMap;
use std::path::Path;
use tessera_core::{Backend, Tensor};

/// The key safetensors reserves for the metadata in its header; no tensor may be named so.
pub const METADATA_KEY: &str = "__metadata__";

/// Saves `tensors` (name, tensor) and `metadata` to the safetensors file `path`, replacing it
/// atomically (see [`crate::checkpoint::write_atomically`]): a crash leaves the old file or the
/// new one, never a partial one. The file is written tensor by tensor: besides the tensors
/// themselves, saving holds one tensor's host copy at a time.
///
/// Tensors may live on any backend and be non-contiguous views; they are stored row-major with
/// their dims and dtype (F32, F64, I64 or BOOL). Names must be non-empty, unique and not
/// `__metadata__`; a violation is an [`tessera_core::Error::Checkpoint`] naming the tensor.
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
    let path = path.as_ref();
    let entries = writer::plan(tensors)?;
    write_atomically_with(path, |out| {
        writer::write_safetensors(out, &entries, metadata, path).map(|_| ())
    })
}

/// The bytes of the safetensors file [`save`] writes.
pub fn serialize<'a, B, N, I>(tensors: I, metadata: &BTreeMap<String, String>) -> Result<Vec<u8>>
where
    B: Backend,
    N: AsRef<str>,
    I: IntoIterator<Item = (N, &'a Tensor<B>)>,
{
    let entries = writer::plan(tensors)?;
    let mut bytes = Vec::new();
    writer::write_safetensors(&mut bytes, &entries, metadata, Path::new("(memory)"))?;
    Ok(bytes)
}
