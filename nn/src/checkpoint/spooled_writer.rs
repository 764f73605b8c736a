//! A safetensors file whose tensors arrive in any order and are not all alive at once (e.g. a
//! sharded optimizer's state gathered one bucket at a time): each tensor's bytes go to an
//! unnamed temporary file of its element width as it arrives, and [`SpooledSafetensors::finish`]
//! writes the header, then the groups widest first (so every tensor's data stays aligned to its
//! element size, as [`super::writer`] lays files out). Holds one tensor's host copy at a time;
//! costs one more pass over the data on disk.

use super::writer::{check_entry, header, tensor_bytes};
use crate::{Error, Result};
use safetensors::Dtype;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use tessera_core::{Backend, Tensor};

/// One tensor already spooled.
struct Spooled {
    name: String,
    dtype: Dtype,
    dims: Vec<usize>,
    bytes: usize,
}

/// The tensors of one element width, in arrival order, and the file holding their bytes.
struct Group {
    file: File,
    tensors: Vec<Spooled>,
}

/// A safetensors file written from tensors handed over one at a time ([`Self::add`]), in any
/// order; see the [module docs](self).
pub struct SpooledSafetensors {
    /// Where the temporary files live (the destination's folder: the same disk).
    dir: PathBuf,
    /// By element width, widest first when iterated in reverse.
    groups: BTreeMap<usize, Group>,
    seen: BTreeSet<String>,
}

impl SpooledSafetensors {
    /// An empty file whose temporaries go to `dir` (removed by the system when dropped, even
    /// if the process is killed).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SpooledSafetensors {
            dir: dir.into(),
            groups: BTreeMap::new(),
            seen: BTreeSet::new(),
        }
    }

    /// Reads `tensor` back from its device and spools it under `name` (non-empty, unique, not
    /// `__metadata__`, a dtype safetensors stores).
    pub fn add<B: Backend>(&mut self, name: &str, tensor: &Tensor<B>) -> Result<()> {
        let dtype = check_entry(&mut self.seen, name, tensor.dtype())?;
        let bytes = tensor_bytes(name, tensor)?;
        let width = tensor.dtype().size_in_bytes();
        let group = match self.groups.entry(width) {
            std::collections::btree_map::Entry::Occupied(g) => g.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                let file = tempfile::tempfile_in(&self.dir).map_err(|e| Error::io(&self.dir, e))?;
                v.insert(Group {
                    file,
                    tensors: Vec::new(),
                })
            }
        };
        group
            .file
            .write_all(&bytes)
            .map_err(|e| Error::io(&self.dir, e))?;
        group.tensors.push(Spooled {
            name: name.to_string(),
            dtype,
            dims: tensor.dims().to_vec(),
            bytes: bytes.len(),
        });
        Ok(())
    }

    /// Writes the whole file to `out`: the length of the header, the header (`metadata` and
    /// every tensor), then the spooled bytes, widest elements first. `path` names the
    /// destination in I/O errors. Returns the number of bytes written.
    pub fn finish(
        mut self,
        out: &mut dyn Write,
        metadata: &BTreeMap<String, String>,
        path: &Path,
    ) -> Result<u64> {
        let widest_first: Vec<&Group> = self.groups.values().rev().collect();
        let header = header(
            widest_first.iter().flat_map(|g| {
                g.tensors
                    .iter()
                    .map(|t| (t.name.as_str(), t.dtype, t.dims.as_slice(), t.bytes))
            }),
            metadata,
        );
        let io = |e| Error::io(path, e);
        out.write_all(&(header.len() as u64).to_le_bytes())
            .map_err(io)?;
        out.write_all(&header).map_err(io)?;
        let mut written = 8 + header.len() as u64;
        for group in self.groups.values_mut().rev() {
            let spool = |e| Error::io(&self.dir, e);
            group.file.flush().map_err(spool)?;
            group.file.seek(SeekFrom::Start(0)).map_err(spool)?;
            let want: u64 = group.tensors.iter().map(|t| t.bytes as u64).sum();
            let copied = std::io::copy(&mut (&mut group.file).take(want), out).map_err(io)?;
            if copied != want {
                return Err(Error::checkpoint(format!(
                    "the temporary file of {} read back {copied} bytes of {want}",
                    path.display()
                )));
            }
            written += copied;
        }
        Ok(written)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::writer::{plan, write_safetensors};
    use safetensors::SafeTensors;
    use tessera_core::{DType, Shape};
    use tessera_cpu::Cpu;

    /// The tensors of one file in the order their data is laid out, with their bytes.
    fn laid_out(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        let file = SafeTensors::deserialize(bytes).unwrap();
        let (_, meta) = SafeTensors::read_metadata(bytes).unwrap();
        let mut names: Vec<(usize, String)> = meta
            .tensors()
            .iter()
            .map(|(n, info)| (info.data_offsets.0, n.clone()))
            .collect();
        names.sort();
        names
            .into_iter()
            .map(|(_, n)| {
                let data = file.tensor(&n).unwrap().data().to_vec();
                (n, data)
            })
            .collect()
    }

    #[test]
    fn tensors_in_any_order_give_the_file_the_in_memory_writer_gives() {
        let b = Cpu::new();
        let f = |n: usize, scale: f32| {
            Tensor::from_vec(
                (0..n).map(|i| i as f32 * scale - 1.5).collect(),
                Shape::from([n]),
                &b,
            )
            .unwrap()
        };
        let w = f(6, 0.5).reshape([2, 3]).unwrap();
        let v = f(3, -0.25);
        let d = Tensor::from_vec(vec![1.0f64, -2.0, 0.125], Shape::from([3]), &b).unwrap();
        let h = w.to_dtype(DType::BF16).unwrap();
        let i = Tensor::from_vec(vec![7i64], Shape::from([1]), &b).unwrap();
        let meta = BTreeMap::from([("step".to_string(), "3".to_string())]);
        let tmp = tempfile::tempdir().unwrap();
        let mut spooled = SpooledSafetensors::new(tmp.path());
        // Not the layout's order: narrow before wide, names out of order.
        for (name, t) in [("w", &w), ("h", &h), ("a", &v), ("d", &d), ("i", &i)] {
            spooled.add(name, t).unwrap();
        }
        let mut got = Vec::new();
        let n = spooled.finish(&mut got, &meta, Path::new("mem")).unwrap();
        assert_eq!(n as usize, got.len());
        let entries = plan([("w", &w), ("h", &h), ("a", &v), ("d", &d), ("i", &i)]).unwrap();
        let mut want = Vec::new();
        write_safetensors(&mut want, &entries, &meta, Path::new("mem")).unwrap();
        let (got_files, want_files) = (laid_out(&got), laid_out(&want));
        let sorted = |mut v: Vec<(String, Vec<u8>)>| {
            v.sort();
            v
        };
        assert_eq!(sorted(got_files.clone()), sorted(want_files));
        // Widest elements first (f64 and i64 before f32 before bf16): every tensor aligned.
        let order: Vec<&str> = got_files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(order, ["d", "i", "w", "a", "h"]);
        let (_, file_meta) = SafeTensors::read_metadata(&got).unwrap();
        assert_eq!(
            file_meta.metadata().as_ref().unwrap().get("step").unwrap(),
            "3"
        );
    }

    #[test]
    fn duplicate_and_bad_names_are_refused_and_an_empty_file_is_valid() {
        let b = Cpu::new();
        let t = Tensor::from_vec(vec![1.0f32], Shape::from([1]), &b).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let mut spooled = SpooledSafetensors::new(tmp.path());
        spooled.add("x", &t).unwrap();
        let twice = spooled.add("x", &t).unwrap_err().to_string();
        assert!(twice.contains("tensor 'x' is given twice"), "{twice}");
        let empty = spooled.add("", &t).unwrap_err().to_string();
        assert!(empty.contains("invalid tensor name"), "{empty}");
        let mut bytes = Vec::new();
        spooled
            .finish(&mut bytes, &BTreeMap::new(), Path::new("mem"))
            .unwrap();
        assert_eq!(SafeTensors::deserialize(&bytes).unwrap().len(), 1);
        let mut none = Vec::new();
        SpooledSafetensors::new(tmp.path())
            .finish(&mut none, &BTreeMap::new(), Path::new("mem"))
            .unwrap();
        assert_eq!(SafeTensors::deserialize(&none).unwrap().len(), 0);
        // The temporaries are unnamed: nothing is left in the folder.
        assert_eq!(std::fs::read_dir(tmp.path()).unwrap().count(), 0);
    }
}
