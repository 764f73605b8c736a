//! The safetensors layout written tensor by tensor: the header (names, dtypes, dims, byte
//! ranges) is known from the tensors' metadata alone, so each tensor is read back from its
//! device, encoded and written just before its bytes are due, and dropped after. Writing a
//! checkpoint thus holds one tensor's host copy at a time instead of the whole file in memory.

use crate::checkpoint::codec::{host_to_le_bytes, to_safetensors_dtype};
use crate::checkpoint::save::METADATA_KEY;
use crate::{Error, Result};
use safetensors::Dtype;
use serde_json::{json, Value};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use tessera_core::{Backend, DType, Tensor};

/// One tensor of a file to write, checked.
pub struct Entry<'a, B: Backend> {
    name: String,
    tensor: &'a Tensor<B>,
    dtype: Dtype,
    bytes: usize,
}

/// Checks the tensors to write (names non-empty, unique and not `__metadata__`; dtypes that
/// safetensors stores) and orders them as they are laid out: larger elements first, so that every
/// tensor's data starts at a multiple of its element size, then by name.
pub fn plan<'a, B, N, I>(tensors: I) -> Result<Vec<Entry<'a, B>>>
where
    B: Backend,
    N: AsRef<str>,
    I: IntoIterator<Item = (N, &'a Tensor<B>)>,
{
    let mut seen = BTreeSet::new();
    let mut entries = Vec::new();
    for (name, tensor) in tensors {
        let name = name.as_ref();
        let dtype = check_entry(&mut seen, name, tensor.dtype())?;
        entries.push(Entry {
            name: name.to_string(),
            tensor,
            dtype,
            bytes: tensor.numel() * tensor.dtype().size_in_bytes(),
        });
    }
    let width = |e: &Entry<B>| e.tensor.dtype().size_in_bytes();
    entries.sort_by(|a, b| (Reverse(width(a)), &a.name).cmp(&(Reverse(width(b)), &b.name)));
    Ok(entries)
}

/// Checks one tensor to write: its name non-empty, not `__metadata__` and not in `seen` (then
/// added), its dtype one safetensors stores (returned).
pub(super) fn check_entry(seen: &mut BTreeSet<String>, name: &str, dtype: DType) -> Result<Dtype> {
    if name.is_empty() || name == METADATA_KEY {
        return Err(Error::checkpoint(format!(
            "invalid tensor name '{name}' (names must be non-empty and not {METADATA_KEY})"
        )));
    }
    if !seen.insert(name.to_string()) {
        return Err(Error::checkpoint(format!("tensor '{name}' is given twice")));
    }
    to_safetensors_dtype(dtype).ok_or_else(|| {
        Error::checkpoint(format!(
            "tensor '{name}' has dtype {dtype}, which safetensors cannot store"
        ))
    })
}

/// How the header describes one tensor, its fields in the order the safetensors crate writes
/// them.
#[derive(serde::Serialize)]
struct TensorInfo<'a> {
    dtype: Dtype,
    shape: &'a [usize],
    data_offsets: (usize, usize),
}

/// The header: `metadata` (omitted when empty), then every tensor's dtype, dims and byte
/// range, given as `(name, dtype, dims, bytes)` in the order the data is laid out, as JSON
/// padded with spaces to a multiple of 8 bytes (so the data starts aligned): byte for byte what
/// the safetensors crate writes for these tensors.
pub(super) fn header<'a>(
    tensors: impl IntoIterator<Item = (&'a str, Dtype, &'a [usize], usize)>,
    metadata: &BTreeMap<String, String>,
) -> Vec<u8> {
    let mut fields = Vec::new();
    let quoted = |name: &str| Value::String(name.to_string()).to_string();
    if !metadata.is_empty() {
        fields.push(format!("{}:{}", quoted(METADATA_KEY), json!(metadata)));
    }
    let mut offset = 0usize;
    for (name, dtype, shape, bytes) in tensors {
        let info = TensorInfo {
            dtype,
            shape,
            data_offsets: (offset, offset + bytes),
        };
        let info = serde_json::to_string(&info).unwrap_or_default();
        fields.push(format!("{}:{info}", quoted(name)));
        offset += bytes;
    }
    let mut text = format!("{{{}}}", fields.join(",")).into_bytes();
    text.resize(text.len().next_multiple_of(8), b' ');
    text
}

/// Writes `entries` (from [`plan`]) and `metadata` in the safetensors layout to `out`, reading
/// each tensor back from its device only when its bytes are written. `path` names the
/// destination in I/O errors. Returns the number of bytes written.
pub fn write_safetensors<B: Backend>(
    out: &mut dyn Write,
    entries: &[Entry<B>],
    metadata: &BTreeMap<String, String>,
    path: &Path,
) -> Result<u64> {
    let header = header(
        entries
            .iter()
            .map(|e| (e.name.as_str(), e.dtype, e.tensor.dims(), e.bytes)),
        metadata,
    );
    let io = |e| Error::io(path, e);
    out.write_all(&(header.len() as u64).to_le_bytes())
        .map_err(io)?;
    out.write_all(&header).map_err(io)?;
    let mut written = 8 + header.len() as u64;
    for e in entries {
        let bytes = tensor_bytes(&e.name, e.tensor)?;
        out.write_all(&bytes).map_err(io)?;
        written += bytes.len() as u64;
    }
    Ok(written)
}

/// The little-endian bytes of `tensor` (named `name` in errors), read back from its device.
pub(super) fn tensor_bytes<B: Backend>(name: &str, tensor: &Tensor<B>) -> Result<Vec<u8>> {
    let host = tensor.to_host().map_err(|err| {
        Error::checkpoint(format!(
            "cannot read tensor '{name}' back from the device: {err}"
        ))
    })?;
    let bytes = host_to_le_bytes(&host).ok_or_else(|| {
        Error::checkpoint(format!(
            "tensor '{name}' has dtype {}, which safetensors cannot store",
            tensor.dtype()
        ))
    })?;
    let want = tensor.numel() * tensor.dtype().size_in_bytes();
    if bytes.len() != want {
        return Err(Error::checkpoint(format!(
            "tensor '{name}' read back {} bytes where its dims say {want}",
            bytes.len()
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use safetensors::SafeTensors;
    use tessera_core::{DType, Shape};
    use tessera_cpu::Cpu;

    #[test]
    fn the_safetensors_reader_reads_every_tensor_and_the_metadata_back() {
        let b = Cpu::new();
        let w = Tensor::from_vec(
            (0..6).map(|i| i as f32 * 0.5).collect(),
            Shape::from([2, 3]),
            &b,
        )
        .unwrap();
        let d = Tensor::from_vec(vec![1.0f64, -2.0], Shape::from([2]), &b).unwrap();
        let h = w.to_dtype(DType::F16).unwrap();
        let meta = BTreeMap::from([("step".to_string(), "7".to_string())]);
        let entries = plan([("w", &w), ("d", &d), ("h", &h)]).unwrap();
        let mut bytes = Vec::new();
        let n = write_safetensors(&mut bytes, &entries, &meta, Path::new("mem")).unwrap();
        assert_eq!(n as usize, bytes.len());
        let (_, file_meta) = SafeTensors::read_metadata(&bytes).unwrap();
        let info = file_meta.metadata().as_ref().unwrap();
        assert_eq!(info.get("step").map(String::as_str), Some("7"));
        let file = SafeTensors::deserialize(&bytes).unwrap();
        let w_back = file.tensor("w").unwrap();
        assert_eq!(w_back.dtype(), Dtype::F32);
        assert_eq!(w_back.shape(), &[2, 3]);
        let want: Vec<u8> = (0..6)
            .flat_map(|i| (i as f32 * 0.5).to_le_bytes())
            .collect();
        assert_eq!(w_back.data(), &want[..]);
        let d_back = file.tensor("d").unwrap();
        assert_eq!(
            d_back.data(),
            &[1.0f64.to_le_bytes(), (-2.0f64).to_le_bytes()].concat()[..]
        );
        assert_eq!(file.tensor("h").unwrap().dtype(), Dtype::F16);
        // Larger elements first (each tensor's data aligned to its element size), then by name.
        assert_eq!(
            entries.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
            ["d", "w", "h"]
        );
    }

    #[test]
    fn bad_names_are_refused_by_name() {
        let b = Cpu::new();
        let t = Tensor::from_vec(vec![1.0f32], Shape::from([1]), &b).unwrap();
        for (names, want) in [
            (vec!["", "x"], "invalid tensor name ''"),
            (vec![METADATA_KEY], "invalid tensor name"),
            (vec!["a", "a"], "tensor 'a' is given twice"),
        ] {
            let err = plan(names.into_iter().map(|n| (n, &t))).err().unwrap();
            assert!(err.to_string().contains(want), "{err}");
        }
    }
}
