//! The small JSON file beside each run checkpoint: what it holds and how to tell it is whole.

use crate::{Error, Result};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// The manifest of one run checkpoint (`step-N.json` beside `step-N.safetensors`).
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
}

impl Manifest {
    /// The manifest of `bytes`, to be written as `file` at `step`.
    pub fn of(step: u64, file: String, bytes: &[u8]) -> Manifest {
        Manifest {
            format: super::CHECKPOINT_FORMAT.to_string(),
            step,
            file,
            bytes: bytes.len() as u64,
            crc32: format!("{:08x}", crc32fast::hash(bytes)),
        }
    }

    /// Reads and parses the manifest at `path`.
    pub fn read(path: &Path) -> Result<Manifest> {
        let text = std::fs::read(path).map_err(|e| Error::io(path, e))?;
        serde_json::from_slice(&text)
            .map_err(|e| Error::format(path, format!("not a run-checkpoint manifest: {e}")))
    }

    /// Errors unless `bytes` are the file this manifest describes (size and checksum) and
    /// the manifest is of this format.
    pub fn verify(&self, bytes: &[u8]) -> Result<()> {
        if self.format != super::CHECKPOINT_FORMAT {
            return Err(Error::checkpoint(format!(
                "{}: format `{}`, expected `{}`",
                self.file,
                self.format,
                super::CHECKPOINT_FORMAT
            )));
        }
        if bytes.len() as u64 != self.bytes {
            return Err(Error::checkpoint(format!(
                "{}: {} bytes where its manifest says {} (a torn write?)",
                self.file,
                bytes.len(),
                self.bytes
            )));
        }
        let crc = format!("{:08x}", crc32fast::hash(bytes));
        if crc != self.crc32 {
            return Err(Error::checkpoint(format!(
                "{}: CRC-32 {crc} where its manifest says {} (corrupt)",
                self.file, self.crc32
            )));
        }
        Ok(())
    }
}
