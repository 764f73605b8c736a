//! Crash-safe file replacement: write a sibling temporary file, fsync it, rename it over the
//! target, then fsync the folder.

use crate::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Distinguishes temporary files of concurrent writes from one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces the file at `path` with `bytes` so that, even after a crash or power loss, `path`
/// holds either its old content or the complete new one, never a mix or a truncated file.
///
/// The bytes go to a new hidden file in the same folder (same file system, so the rename is
/// atomic), which is flushed to disk before being renamed over `path`; the folder is then synced
/// so the rename itself is durable. On failure the temporary file is removed.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let file_name = path.file_name().ok_or_else(|| Error::InvalidArgument {
        op: "write_atomically",
        msg: format!("{} does not name a file", path.display()),
    })?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let temp = dir.join(format!(
        ".{}.tmp-{}-{}",
        file_name.to_string_lossy(),
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = write_and_sync(&temp, bytes)
        .and_then(|()| fs::rename(&temp, path).map_err(|e| Error::io(path, e)));
    if result.is_err() {
        // Best effort: the temporary file may not even exist.
        let _ = fs::remove_file(&temp);
        return result;
    }
    sync_dir(&dir);
    Ok(())
}

/// Creates `temp` (which must not exist), writes `bytes` and flushes them to the device.
fn write_and_sync(temp: &Path, bytes: &[u8]) -> Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| Error::io(temp, e))?;
    file.write_all(bytes).map_err(|e| Error::io(temp, e))?;
    file.sync_all().map_err(|e| Error::io(temp, e))
}

/// Flushes the folder entry of a rename to disk. Best effort: some platforms and file systems
/// cannot open or sync folders, and the data itself is already synced.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}
