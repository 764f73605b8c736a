//! Reading a safetensors file back into tensors on a backend, with optional checks against the
//! expected names, dims and dtypes.

use crate::checkpoint::codec::{from_safetensors_dtype, host_from_le_bytes};
use crate::checkpoint::tensor_spec::{check_specs, LoadMode, LoadReport, TensorSpec};
use crate::checkpoint::Checkpoint;
use crate::{Error, Result};
use safetensors::tensor::Metadata;
use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use tessera_core::{Backend, Shape, Tensor};

/// The names, dims, dtypes and metadata of a checkpoint file, without its tensor data.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckpointInfo {
    /// Every tensor, by name.
    pub tensors: BTreeMap<String, TensorSpec>,
    /// The string metadata.
    pub metadata: BTreeMap<String, String>,
}

/// A parsed, validated file: the open file, where its data starts, its header, its tensor
/// specs and its metadata. Only the header has been read; each tensor's bytes are read when
/// it is uploaded, so loading holds one tensor's bytes at a time, never the whole file.
struct ParsedFile {
    file: File,
    data_start: u64,
    header: Metadata,
    info: CheckpointInfo,
}

/// safetensors' own bound on the header (100 MB): a longer one is refused before it is read.
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// Reads and validates `path`'s header: it must parse (through `safetensors`' `Metadata`,
/// which checks that the data offsets are contiguous and match each tensor's dims and dtype),
/// every tensor must have a supported dtype, and the data must exactly fill the rest of the
/// file.
fn parse_file(path: &Path) -> Result<ParsedFile> {
    let io = |e| Error::io(path, e);
    let mut file = File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let mut prefix = [0u8; 8];
    if file_len < 8 {
        return Err(Error::format(path, "no safetensors header"));
    }
    file.read_exact(&mut prefix).map_err(io)?;
    let header_len = u64::from_le_bytes(prefix);
    if header_len > MAX_HEADER_BYTES {
        return Err(Error::format(
            path,
            format!("the safetensors header claims {header_len} bytes, more than the {MAX_HEADER_BYTES} allowed"),
        ));
    }
    if 8 + header_len > file_len {
        return Err(Error::format(path, "the safetensors header is truncated"));
    }
    let mut header_bytes = vec![0u8; header_len as usize];
    file.read_exact(&mut header_bytes).map_err(io)?;
    check_header_names(&header_bytes, path)?;
    // safetensors validates the header with checked arithmetic; the guard turns any panic it
    // might still raise on hostile input into an error instead of unwinding into the caller.
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        serde_json::from_slice::<Metadata>(&header_bytes)
    }))
    .map_err(|_| Error::format(path, "the safetensors parser failed on this file"))?;
    let header =
        parsed.map_err(|e| Error::format(path, format!("not a valid safetensors file: {e}")))?;
    let data_start = 8 + header_len;
    let data_len = file_len - data_start;
    if header.data_len() as u64 != data_len {
        return Err(Error::format(
            path,
            format!(
                "not a valid safetensors file: the header describes {} bytes of data, the file holds {data_len}",
                header.data_len()
            ),
        ));
    }
    let mut tensors = BTreeMap::new();
    for (name, info) in header.tensors() {
        if info.shape.len() > Shape::MAX_RANK {
            return Err(Error::format(
                path,
                format!(
                    "tensor '{name}' has rank {}, more than the {} a tensor may have",
                    info.shape.len(),
                    Shape::MAX_RANK
                ),
            ));
        }
        Shape::new(info.shape.clone())
            .check_size("checkpoint::load")
            .map_err(|e| Error::format(path, format!("tensor '{name}': {e}")))?;
        let dtype = from_safetensors_dtype(info.dtype).ok_or_else(|| {
            Error::format(
                path,
                format!(
                    "tensor '{name}' has dtype {:?}, which Tessera cannot load (supported: F32, F64, I64, BOOL)",
                    info.dtype
                ),
            )
        })?;
        let spec = TensorSpec::new(name.clone(), info.shape.clone(), dtype);
        tensors.insert(name, spec);
    }
    let metadata = header
        .metadata()
        .as_ref()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        .unwrap_or_default();
    Ok(ParsedFile {
        file,
        data_start,
        header,
        info: CheckpointInfo { tensors, metadata },
    })
}

impl ParsedFile {
    /// The stored bytes of tensor `name` (whose offsets the header's validation bounded by
    /// the file's length).
    fn read_tensor(&self, name: &str, path: &Path) -> Result<Vec<u8>> {
        let info = self.header.info(name).ok_or_else(|| {
            Error::checkpoint(format!("tensor '{name}' is not in {}", path.display()))
        })?;
        let (start, end) = info.data_offsets;
        let len = end - start;
        let mut bytes = Vec::new();
        bytes
            .try_reserve_exact(len)
            .map_err(|_| Error::OutOfMemory {
                device: "host".to_string(),
                requested_bytes: len,
            })?;
        bytes.resize(len, 0);
        let mut file = &self.file;
        file.seek(SeekFrom::Start(self.data_start + start as u64))
            .and_then(|_| file.read_exact(&mut bytes))
            .map_err(|e| Error::io(path, e))?;
        Ok(bytes)
    }
}

/// The top-level keys of a JSON object, in order and with repetitions (a map would keep only
/// the last of two equal keys, which is how a duplicate tensor name goes unnoticed).
struct TopLevelKeys(Vec<String>);

impl<'de> serde::Deserialize<'de> for TopLevelKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Keys;
        impl<'de> serde::de::Visitor<'de> for Keys {
            type Value = TopLevelKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<TopLevelKeys, A::Error> {
                let mut keys = Vec::new();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value::<serde::de::IgnoredAny>()?;
                    keys.push(key);
                }
                Ok(TopLevelKeys(keys))
            }
        }
        d.deserialize_map(Keys)
    }
}

/// Errors unless every tensor name of the header (the JSON object after the 8-byte length
/// prefix) is non-empty and given once.
fn check_header_names(header: &[u8], path: &Path) -> Result<()> {
    let TopLevelKeys(keys) = serde_json::from_slice(header)
        .map_err(|e| Error::format(path, format!("not a valid safetensors header: {e}")))?;
    let mut seen = std::collections::BTreeSet::new();
    for key in &keys {
        if key == crate::checkpoint::METADATA_KEY {
            continue;
        }
        if key.is_empty() {
            return Err(Error::format(
                path,
                "a tensor has an empty name (save refuses to write one)",
            ));
        }
        if !seen.insert(key.as_str()) {
            return Err(Error::format(
                path,
                format!("tensor '{key}' appears twice in the header"),
            ));
        }
    }
    Ok(())
}

/// Lists the tensors and metadata of the safetensors file `path` without uploading anything.
pub fn inspect(path: impl AsRef<Path>) -> Result<CheckpointInfo> {
    Ok(parse_file(path.as_ref())?.info)
}

/// Loads every tensor (and the metadata) of the safetensors file `path` onto `backend`.
///
/// A missing file is [`Error::Io`]; a truncated or corrupt file, or one holding a dtype Tessera
/// has no tensor type for, is [`Error::Format`] naming the file (and the tensor, where one is at
/// fault).
pub fn load<B: Backend>(path: impl AsRef<Path>, backend: &B) -> Result<Checkpoint<B>> {
    let path = path.as_ref();
    let parsed = parse_file(path)?;
    let names: Vec<&str> = parsed.info.tensors.keys().map(String::as_str).collect();
    upload(path, &parsed, &names, backend)
}

/// Loads the safetensors file `path` onto `backend`, checking its tensors against `expected`
/// before uploading any data.
///
/// A tensor of other dims or dtype than expected is always an [`Error::Checkpoint`] naming it. In
/// [`LoadMode::Strict`] a missing or unexpected tensor is too; in [`LoadMode::NonStrict`] they are
/// listed in the returned [`LoadReport`], and unexpected tensors are left out of the result.
pub fn load_checked<B: Backend>(
    path: impl AsRef<Path>,
    backend: &B,
    expected: &[TensorSpec],
    mode: LoadMode,
) -> Result<(Checkpoint<B>, LoadReport)> {
    let path = path.as_ref();
    let parsed = parse_file(path)?;
    let report = check_specs(&parsed.info.tensors, expected, mode).map_err(|e| match e {
        Error::Checkpoint { msg } => Error::checkpoint(format!("{}: {msg}", path.display())),
        other => other,
    })?;
    let names: Vec<&str> = expected
        .iter()
        .map(|s| s.name.as_str())
        .filter(|n| parsed.info.tensors.contains_key(*n))
        .collect();
    Ok((upload(path, &parsed, &names, backend)?, report))
}

/// A safetensors file opened for reading one tensor at a time: its header is read and
/// validated as [`load`] does, each tensor's bytes only when [`CheckpointReader::read`] asks.
pub struct CheckpointReader {
    path: std::path::PathBuf,
    parsed: ParsedFile,
}

impl CheckpointReader {
    /// Opens `path` (see [`load`] for the errors).
    pub fn open(path: impl AsRef<Path>) -> Result<CheckpointReader> {
        let path = path.as_ref().to_path_buf();
        let parsed = parse_file(&path)?;
        Ok(CheckpointReader { path, parsed })
    }

    /// The tensors' names, dims and dtypes, and the metadata.
    pub fn info(&self) -> &CheckpointInfo {
        &self.parsed.info
    }

    /// Reads tensor `name` onto `backend`.
    pub fn read<B: Backend>(&self, name: &str, backend: &B) -> Result<Tensor<B>> {
        let mut one = upload(&self.path, &self.parsed, &[name], backend)?;
        one.tensors
            .remove(name)
            .ok_or_else(|| Error::checkpoint(format!("tensor '{name}' is not in the file")))
    }
}

/// Decodes and uploads the tensors `names` of a parsed file.
fn upload<B: Backend>(
    path: &Path,
    parsed: &ParsedFile,
    names: &[&str],
    backend: &B,
) -> Result<Checkpoint<B>> {
    let mut tensors = BTreeMap::new();
    for &name in names {
        let spec = parsed.info.tensors.get(name).ok_or_else(|| {
            Error::checkpoint(format!("tensor '{name}' is not in {}", path.display()))
        })?;
        let stored = parsed.read_tensor(name, path)?;
        let host = host_from_le_bytes(spec.dtype, &stored)
            .map_err(|msg| Error::format(path, format!("tensor '{name}': {msg}")))?;
        let tensor = Tensor::from_host(host, spec.dims.clone(), backend).map_err(|e| {
            Error::checkpoint(format!(
                "cannot create tensor '{name}' on {}: {e}",
                backend.name()
            ))
        })?;
        tensors.insert(name.to_string(), tensor);
    }
    Ok(Checkpoint {
        tensors,
        metadata: parsed.info.metadata.clone(),
    })
}
