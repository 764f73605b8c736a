//! TensorBoard event files: `Event` protocol buffers (TensorFlow's `event.proto`, the fields a
//! scalar needs) encoded by `prost`, framed as TFRecords (length, masked CRC-32C of the length,
//! data, masked CRC-32C of the data; the CRCs from the `crc32c` crate).

use crate::{Error, Result};
use prost::Message;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `tensorflow.Event` (the fields written here).
#[derive(Clone, PartialEq, Message)]
pub struct Event {
    /// Seconds since the Unix epoch.
    #[prost(double, tag = "1")]
    pub wall_time: f64,
    /// The training step.
    #[prost(int64, tag = "2")]
    pub step: i64,
    /// `brain.Event:2` in a file's first event.
    #[prost(string, optional, tag = "3")]
    pub file_version: Option<String>,
    /// The values of this event.
    #[prost(message, optional, tag = "5")]
    pub summary: Option<Summary>,
    /// A session event: `START` at a resumed run's first step makes TensorBoard drop the
    /// steps from there on that an earlier, killed process had logged.
    #[prost(message, optional, tag = "6")]
    pub session_log: Option<SessionLog>,
}

/// `tensorflow.SessionLog`.
#[derive(Clone, PartialEq, Message)]
pub struct SessionLog {
    /// `SessionStatus`: 1 is `START`.
    #[prost(int32, tag = "1")]
    pub status: i32,
}

/// `SessionLog.START`.
pub const SESSION_START: i32 = 1;

/// `tensorflow.Summary`.
#[derive(Clone, PartialEq, Message)]
pub struct Summary {
    /// Tagged values.
    #[prost(message, repeated, tag = "1")]
    pub value: Vec<SummaryValue>,
}

/// `tensorflow.Summary.Value` with a scalar (`simple_value`).
#[derive(Clone, PartialEq, Message)]
pub struct SummaryValue {
    /// The curve's name, e.g. `train/loss`.
    #[prost(string, tag = "1")]
    pub tag: String,
    /// The value (TensorBoard's scalars are f32).
    #[prost(float, optional, tag = "2")]
    pub simple_value: Option<f32>,
}

/// The masked CRC-32C of TFRecord framing (a rotation plus a constant, so that a CRC of data
/// holding CRCs is not degenerate).
pub fn masked_crc32c(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// `bytes` framed as one TFRecord.
pub fn tfrecord(bytes: &[u8]) -> Vec<u8> {
    let len = (bytes.len() as u64).to_le_bytes();
    let mut out = Vec::with_capacity(bytes.len() + 16);
    out.extend_from_slice(&len);
    out.extend_from_slice(&masked_crc32c(&len).to_le_bytes());
    out.extend_from_slice(bytes);
    out.extend_from_slice(&masked_crc32c(bytes).to_le_bytes());
    out
}

/// An open event file (`events.out.tfevents.<seconds>.<host>.<pid>`), written record by record
/// and flushed after each batch of scalars, so that TensorBoard shows a run while it trains.
#[derive(Debug)]
pub struct EventFile {
    path: PathBuf,
    file: File,
}

impl EventFile {
    /// Creates a new event file in `dir` (created if needed) and writes its version record.
    pub fn create(dir: &Path) -> Result<EventFile> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let now = wall_time();
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "localhost".into());
        let path = dir.join(format!(
            "events.out.tfevents.{}.{host}.{}",
            now as u64,
            std::process::id()
        ));
        let file = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut events = EventFile { path, file };
        events.write(&Event {
            wall_time: now,
            step: 0,
            file_version: Some("brain.Event:2".into()),
            summary: None,
            session_log: None,
        })?;
        Ok(events)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event and flushes it.
    pub fn write(&mut self, event: &Event) -> Result<()> {
        let record = tfrecord(&event.encode_to_vec());
        self.file
            .write_all(&record)
            .and_then(|()| self.file.flush())
            .map_err(|e| Error::io(&self.path, e))
    }

    /// Appends the scalars `values` (tag, value) of `step` as one event.
    pub fn write_scalars(&mut self, step: u64, values: &[(String, f64)]) -> Result<()> {
        let value = values
            .iter()
            .map(|(tag, v)| SummaryValue {
                tag: tag.clone(),
                simple_value: Some(*v as f32),
            })
            .collect();
        self.write(&Event {
            wall_time: wall_time(),
            step: step as i64,
            file_version: None,
            summary: Some(Summary { value }),
            session_log: None,
        })
    }

    /// Marks a (re)start at `step`: TensorBoard discards what earlier files logged at `step`
    /// and after (its purge of orphaned data).
    pub fn write_session_start(&mut self, step: u64) -> Result<()> {
        self.write(&Event {
            wall_time: wall_time(),
            step: step as i64,
            file_version: None,
            summary: None,
            session_log: Some(SessionLog {
                status: SESSION_START,
            }),
        })
    }
}

/// Seconds since the Unix epoch.
fn wall_time() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32c_and_its_mask_match_known_values() {
        // CRC-32C check value (RFC 3720 / iSCSI): "123456789" -> 0xE3069283.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        // The mask of TFRecord: rotate right by 15, add 0xa282ead8.
        assert_eq!(
            masked_crc32c(b"123456789"),
            0xe306_9283u32.rotate_right(15).wrapping_add(0xa282_ead8)
        );
    }

    #[test]
    fn records_frame_and_events_decode_back() {
        let event = Event {
            wall_time: 1.5,
            step: 7,
            file_version: None,
            session_log: None,
            summary: Some(Summary {
                value: vec![SummaryValue {
                    tag: "train/loss".into(),
                    simple_value: Some(0.25),
                }],
            }),
        };
        let data = event.encode_to_vec();
        let record = tfrecord(&data);
        assert_eq!(
            u64::from_le_bytes(record[..8].try_into().unwrap()),
            data.len() as u64
        );
        assert_eq!(
            u32::from_le_bytes(record[8..12].try_into().unwrap()),
            masked_crc32c(&record[..8])
        );
        assert_eq!(&record[12..12 + data.len()], &data[..]);
        let tail = &record[12 + data.len()..];
        assert_eq!(
            u32::from_le_bytes(tail.try_into().unwrap()),
            masked_crc32c(&data)
        );
        assert_eq!(Event::decode(&data[..]).unwrap(), event);
    }
}
