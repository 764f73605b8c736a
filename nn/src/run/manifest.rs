//! The small JSON file beside each run checkpoint: what it holds and how to tell it is whole.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;

/// The manifest of one run checkpoint (`step-N.json` beside `step-N.safetensors`, or beside
/// the ranks' files `step-N.rank-R-of-W.safetensors` of a sharded checkpoint).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The checkpoint format ([`super::CHECKPOINT_FORMAT`]).
    pub format: String,
    /// Optimisation steps done when it was written.
    pub step: u64,
    /// The checkpoint file's name, in the same folder.
    pub file: String,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The CRC-32 (IEEE) of the file's bytes, in hexadecimal.
    pub crc32: String,
    /// A sharded checkpoint's files, one per rank in rank order (`file`, `bytes` and `crc32`
    /// above are then rank 0's); empty for a checkpoint of one file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shards: Vec<ShardFile>,
}

/// One file of a checkpoint, as its [`Manifest`] records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardFile {
    /// The file's name, in the manifest's folder.
    pub file: String,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The CRC-32 (IEEE) of the file's bytes, in hexadecimal.
    pub crc32: String,
}

impl ShardFile {
    /// The record of a file `file` of `bytes` bytes with CRC-32 `crc32`.
    pub fn new(file: String, bytes: u64, crc32: u32) -> ShardFile {
        ShardFile {
            file,
            bytes,
            crc32: format!("{crc32:08x}"),
        }
    }

    /// Errors unless the file at `path` is the file recorded (size and checksum), read in
    /// blocks (never whole).
    pub fn verify_file(&self, path: &Path) -> Result<()> {
        use std::io::Read;
        let io = |e| Error::io(path, e);
        let mut file = std::fs::File::open(path).map_err(io)?;
        let mut hasher = crc32fast::Hasher::new();
        let mut block = vec![0u8; 1 << 20];
        let mut bytes = 0u64;
        loop {
            let n = file.read(&mut block).map_err(io)?;
            if n == 0 {
                break;
            }
            hasher.update(&block[..n]);
            bytes += n as u64;
        }
        self.check(bytes, hasher.finalize())
    }

    /// Errors unless `bytes` are the file recorded (size and checksum).
    pub fn verify(&self, bytes: &[u8]) -> Result<()> {
        self.check(bytes.len() as u64, crc32fast::hash(bytes))
    }

    /// Errors unless a file of `bytes` bytes with CRC-32 `crc32` is the file recorded.
    fn check(&self, bytes: u64, crc32: u32) -> Result<()> {
        if bytes != self.bytes {
            return Err(Error::checkpoint(format!(
                "{}: {bytes} bytes where its manifest says {} (a torn write?)",
                self.file, self.bytes
            )));
        }
        let crc = format!("{crc32:08x}");
        if crc != self.crc32 {
            return Err(Error::checkpoint(format!(
                "{}: CRC-32 {crc} where its manifest says {} (corrupt)",
                self.file, self.crc32
            )));
        }
        Ok(())
    }
}

impl Manifest {
    /// The manifest of `bytes`, to be written as `file` at `step`.
    #[cfg(test)]
    pub fn of(step: u64, file: String, bytes: &[u8]) -> Manifest {
        Manifest::new(step, file, bytes.len() as u64, crc32fast::hash(bytes))
    }

    /// The manifest of a file of `bytes` bytes with CRC-32 `crc32`, written as `file` at `step`.
    pub fn new(step: u64, file: String, bytes: u64, crc32: u32) -> Manifest {
        Manifest::of_one_file(step, ShardFile::new(file, bytes, crc32))
    }

    /// The manifest of a checkpoint of `step` that is one file, `file`.
    pub fn of_one_file(step: u64, file: ShardFile) -> Manifest {
        Manifest {
            format: super::CHECKPOINT_FORMAT.to_string(),
            step,
            file: file.file,
            bytes: file.bytes,
            crc32: file.crc32,
            shards: Vec::new(),
        }
    }

    /// The manifest of a sharded checkpoint of `step` made of `shards`, one file per rank in
    /// rank order (at least one).
    pub fn sharded(step: u64, shards: Vec<ShardFile>) -> Manifest {
        let head = shards
            .first()
            .cloned()
            .unwrap_or_else(|| ShardFile::new(String::new(), 0, 0));
        Manifest {
            shards,
            ..Manifest::of_one_file(step, head)
        }
    }

    /// Whether the checkpoint is sharded (one file per rank).
    pub fn is_sharded(&self) -> bool {
        !self.shards.is_empty()
    }

    /// Reads and parses the manifest at `path`.
    pub fn read(path: &Path) -> Result<Manifest> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        serde_json::from_slice(&text)
            .map_err(|e| Error::format(path, format!("not a run-checkpoint manifest: {e}")))
    }

    /// Errors unless the manifest is of this format.
    pub fn check_format(&self) -> Result<()> {
        if self.format != super::CHECKPOINT_FORMAT {
            return Err(Error::checkpoint(format!(
                "{}: format `{}`, expected `{}`",
                self.file,
                self.format,
                super::CHECKPOINT_FORMAT
            )));
        }
        Ok(())
    }

    /// Errors unless `bytes` are the file this manifest describes (size and checksum; rank
    /// 0's file of a sharded checkpoint) and the manifest is of this format.
    pub fn verify(&self, bytes: &[u8]) -> Result<()> {
        self.check_format()?;
        self.head().verify(bytes)
    }

    /// The record of `file` (rank 0's file of a sharded checkpoint).
    pub fn head(&self) -> ShardFile {
        ShardFile {
            file: self.file.clone(),
            bytes: self.bytes,
            crc32: self.crc32.clone(),
        }
    }
}

/// A writer that passes bytes on and counts them and their CRC-32 (what a [`Manifest`] records)
/// on the way.
pub struct ChecksummedWriter<'a> {
    inner: &'a mut dyn Write,
    hasher: crc32fast::Hasher,
    bytes: u64,
}

impl<'a> ChecksummedWriter<'a> {
    /// Counts what goes to `inner`.
    pub fn new(inner: &'a mut dyn Write) -> Self {
        ChecksummedWriter {
            inner,
            hasher: crc32fast::Hasher::new(),
            bytes: 0,
        }
    }

    /// The number of bytes written and their CRC-32.
    pub fn finish(self) -> (u64, u32) {
        (self.bytes, self.hasher.finalize())
    }
}

impl Write for ChecksummedWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.hasher.update(&buf[..n]);
        self.bytes += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checksummed_writer_counts_what_the_manifest_of_the_bytes_records() {
        let text = b"a checkpoint, written in pieces";
        let mut out = Vec::new();
        let mut w = ChecksummedWriter::new(&mut out);
        w.write_all(&text[..5]).unwrap();
        w.write_all(&text[5..]).unwrap();
        let (bytes, crc) = w.finish();
        assert_eq!(out, text);
        let whole = Manifest::of(3, "f".into(), text);
        let streamed = Manifest::new(3, "f".into(), bytes, crc);
        assert_eq!(
            (whole.bytes, &whole.crc32),
            (streamed.bytes, &streamed.crc32)
        );
        streamed.verify(text).unwrap();
    }
}
