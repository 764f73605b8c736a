//! Crash-safe file replacement: write a sibling temporary file, fsync it, rename it over the
//! target, then fsync the folder.

use crate::{Error, Result};
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Distinguishes temporary files of concurrent writes from one process.
static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Replaces the file at `path` with `bytes` so that, even after a crash or power loss, `path`
/// holds either its old content or the complete new one, never a mix or a truncated file.
///
/// The bytes go to a new hidden file in the same folder (`.<name>.tmp-<pid>-<n>`: same file
/// system, so the rename is atomic), which is flushed to disk before being renamed over `path`;
/// the folder is then synced so the rename itself is durable. On failure the temporary file is
/// removed. A process killed mid-write cannot remove its temporary, so each write first
/// removes the stale temporaries of the same target: those of processes that no longer run
/// (and, where that cannot be told, those older than a day).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomically_with(path, |file| {
        file.write_all(bytes).map_err(|e| Error::io(path, e))
    })
}

/// The folder a file `path` is in (`.` for a bare file name): where its temporaries go.
pub(crate) fn folder_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// [`write_atomically`] of what `write` writes into the (buffered) temporary file: a file
/// streamed piece by piece, with the same guarantees. Returns what `write` returns.
pub fn write_atomically_with<T>(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> Result<T>,
) -> Result<T> {
    let file_name = path.file_name().ok_or_else(|| Error::InvalidArgument {
        op: "write_atomically",
        msg: format!("{} does not name a file", path.display()),
    })?;
    let dir = folder_of(path);
    let prefix = format!(".{}.tmp-", file_name.to_string_lossy());
    remove_stale_temporaries(&dir, &prefix);
    let temp = dir.join(format!(
        "{prefix}{}-{}",
        std::process::id(),
        TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = write_and_sync(&temp, write).and_then(|written| {
        fs::rename(&temp, path)
            .map(|()| written)
            .map_err(|e| Error::io(path, e))
    });
    if result.is_err() {
        // Best effort: the temporary file may not even exist.
        let _ = fs::remove_file(&temp);
        return result;
    }
    sync_dir(&dir);
    result
}

/// Temporaries older than this are stale even when their writer's liveness cannot be checked.
const STALE_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// Removes the temporaries `<prefix><pid>-<n>` in `dir` left by writers that are gone: a pid
/// that is not running (on Linux, checked through `/proc`), or a file older than
/// [`STALE_AGE`]. Temporaries of running processes (this one included) are left alone: they
/// may belong to a write in progress. Best effort: failures are ignored.
fn remove_stale_temporaries(dir: &Path, prefix: &str) {
    remove_stale(dir, |name| name.strip_prefix(prefix));
}

/// Removes every stale temporary [`write_atomically`] left in `dir`, whatever its target
/// (`.<name>.tmp-<pid>-<n>` of a writer that is gone; see `remove_stale_temporaries`): what a
/// run folder does when it is opened, since a killed save's target may never be written again.
pub fn remove_stale_temporaries_in(dir: &Path) {
    remove_stale(dir, |name| {
        let rest = name.strip_prefix('.')?;
        rest.rfind(".tmp-").map(|at| &rest[at + ".tmp-".len()..])
    });
}

/// Removes the files of `dir` for which `pid_part` gives `<pid>-<n>` and whose writer is gone.
fn remove_stale(dir: &Path, pid_part: impl Fn(&str) -> Option<&str>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(&pid_part) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_AGE);
        let gone = pid != std::process::id() && process_is_gone(pid);
        if gone || old {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// True when no process `pid` runs (Linux: no `/proc/<pid>`); false when it runs or when this
/// cannot be told.
fn process_is_gone(pid: u32) -> bool {
    let proc = Path::new("/proc");
    proc.join("self").exists() && !proc.join(pid.to_string()).exists()
}

/// Creates `temp` (which must not exist), lets `write` fill it through a buffer and flushes it
/// to the device; returns what `write` returns.
fn write_and_sync<T>(temp: &Path, write: impl FnOnce(&mut dyn Write) -> Result<T>) -> Result<T> {
    let file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(temp)
        .map_err(|e| Error::io(temp, e))?;
    let mut buffered = BufWriter::new(file);
    let written = write(&mut buffered)?;
    let file = buffered
        .into_inner()
        .map_err(|e| Error::io(temp, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(temp, e))?;
    Ok(written)
}

/// Flushes the folder entry of a rename to disk. Best effort: some platforms and file systems
/// cannot open or sync folders, and the data itself is already synced.
fn sync_dir(dir: &Path) {
    if let Ok(handle) = File::open(dir) {
        let _ = handle.sync_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn stale_temporaries_of_the_target_are_removed_by_the_next_write() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("model.safetensors");
        // A writer killed mid-write (its pid cannot be running), one of this process (maybe a
        // write in progress), and one of another target.
        let dead = dir
            .path()
            .join(format!(".model.safetensors.tmp-{}-0", u32::MAX - 1));
        let ours = dir
            .path()
            .join(format!(".model.safetensors.tmp-{}-99", std::process::id()));
        let other = dir.path().join(format!(".other.tmp-{}-0", u32::MAX - 1));
        for p in [&dead, &ours, &other] {
            fs::write(p, b"partial").unwrap();
        }
        write_atomically(&target, b"new").unwrap();
        assert_eq!(fs::read(&target).unwrap(), b"new");
        let left = names(dir.path());
        assert!(!left.contains(&dead.file_name().unwrap().to_string_lossy().into_owned()));
        assert!(left.contains(&ours.file_name().unwrap().to_string_lossy().into_owned()));
        assert!(left.contains(&other.file_name().unwrap().to_string_lossy().into_owned()));
    }

    #[test]
    fn a_folder_sweep_removes_the_dead_writers_temporaries_of_every_target() {
        let dir = tempfile::tempdir().unwrap();
        let dead_a = format!(".step-1.safetensors.tmp-{}-0", u32::MAX - 1);
        let dead_b = format!(".latest.tmp-{}-3", u32::MAX - 1);
        let ours = format!(".latest.tmp-{}-1", std::process::id());
        let unrelated = ".hidden.tmp-notapid".to_string();
        for n in [&dead_a, &dead_b, &ours, &unrelated] {
            fs::write(dir.path().join(n), b"partial").unwrap();
        }
        remove_stale_temporaries_in(dir.path());
        let mut want = vec![unrelated, ours];
        want.sort();
        assert_eq!(names(dir.path()), want);
    }

    #[test]
    fn a_failed_write_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        // The target is a non-empty folder: the rename over it fails.
        let target = dir.path().join("busy");
        fs::create_dir(&target).unwrap();
        fs::write(target.join("inside"), b"x").unwrap();
        assert!(write_atomically(&target, b"bytes").is_err());
        assert_eq!(names(dir.path()), vec!["busy".to_string()]);
    }
}
