//! [`MetricsLog`]: a run's scalars (losses, accuracy, learning rate, gradient norm, loss
//! scale, throughput) as TensorBoard event files and as `metrics.jsonl`.

use super::tfevents::EventFile;
use crate::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Writes scalars to a log folder: a new TensorBoard event file per process
/// (`events.out.tfevents.*`: `tensorboard --logdir DIR` draws the curves; a resumed run adds a
/// file, and TensorBoard shows the steps of both) and one JSON object per line in
/// `metrics.jsonl` (`{"step": 10, "train/loss": 0.53, ...}`, full f64 precision), appended.
#[derive(Debug)]
pub struct MetricsLog {
    dir: PathBuf,
    events: EventFile,
    jsonl: File,
}

impl MetricsLog {
    /// Opens the log folder `dir` (created if needed) for a fresh run.
    pub fn open(dir: impl Into<PathBuf>) -> Result<MetricsLog> {
        Self::open_resumed(dir, None)
    }

    /// Opens the log folder `dir` for a run resumed after step `resumed` (None: a fresh run):
    /// what a killed process logged after that step is dropped from `metrics.jsonl`, and the
    /// new event file starts with a session start at the next step, so that TensorBoard drops
    /// it too.
    pub fn open_resumed(dir: impl Into<PathBuf>, resumed: Option<u64>) -> Result<MetricsLog> {
        let dir = dir.into();
        let mut events = EventFile::create(&dir)?;
        let path = dir.join("metrics.jsonl");
        if let Some(step) = resumed {
            events.write_session_start(step + 1)?;
            truncate_after(&path, step)?;
        }
        let jsonl = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| Error::io(&path, e))?;
        Ok(MetricsLog { dir, events, jsonl })
    }

    /// The log folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The event file this process writes.
    pub fn event_file(&self) -> &Path {
        self.events.path()
    }

    /// Records the scalars `values` (tag, value) at `step`. Non-finite values are written to
    /// the event file (TensorBoard shows them) and as `null` in `metrics.jsonl`.
    pub fn log(&mut self, step: u64, values: &[(&str, f64)]) -> Result<()> {
        let owned: Vec<(String, f64)> = values.iter().map(|(t, v)| (t.to_string(), *v)).collect();
        self.events.write_scalars(step, &owned)?;
        let mut line = serde_json::Map::new();
        line.insert("step".into(), step.into());
        for (tag, value) in values {
            line.insert(tag.to_string(), serde_json::json!(value));
        }
        let path = self.dir.join("metrics.jsonl");
        writeln!(self.jsonl, "{}", serde_json::Value::Object(line))
            .and_then(|()| self.jsonl.flush())
            .map_err(|e| Error::io(path, e))
    }
}

/// Rewrites the JSON-lines file `path` (if it exists) without the lines of steps after `step`.
fn truncate_after(path: &Path, step: u64) -> Result<()> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(path, e)),
    };
    let kept: String = text
        .lines()
        .filter(|line| {
            serde_json::from_str::<serde_json::Value>(line)
                .ok()
                .and_then(|v| v["step"].as_u64())
                .is_some_and(|s| s <= step)
        })
        .map(|line| format!("{line}\n"))
        .collect();
    crate::checkpoint::write_atomically(path, kept.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_go_to_an_event_file_and_to_metrics_jsonl() {
        let tmp = tempfile::tempdir().unwrap();
        let mut log = MetricsLog::open(tmp.path().join("logs")).unwrap();
        log.log(1, &[("train/loss", 2.5), ("lr", 1e-3)]).unwrap();
        log.log(2, &[("train/loss", f64::NAN)]).unwrap();
        let text = std::fs::read_to_string(tmp.path().join("logs/metrics.jsonl")).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["step"], 1);
        assert_eq!(lines[0]["train/loss"], 2.5);
        assert_eq!(lines[0]["lr"], 1e-3);
        assert!(lines[1]["train/loss"].is_null());
        let name = log
            .event_file()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        assert!(name.starts_with("events.out.tfevents."), "{name}");
        // The version record and two events.
        let bytes = std::fs::read(log.event_file()).unwrap();
        let mut at = 0;
        let mut records = 0;
        while at < bytes.len() {
            let len = u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap()) as usize;
            at += 12 + len + 4;
            records += 1;
        }
        assert_eq!((at, records), (bytes.len(), 3));

        // Resumed after step 1: step 2's line goes.
        drop(log);
        let log = MetricsLog::open_resumed(tmp.path().join("logs"), Some(1)).unwrap();
        let text = std::fs::read_to_string(log.dir().join("metrics.jsonl")).unwrap();
        assert_eq!(text.lines().count(), 1);
    }
}
