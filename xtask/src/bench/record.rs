//! The measurement record: what `tessera-bench` and the Python peers print, one JSON object a line.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::TaskResult;

/// One measured configuration of one suite, e.g.
/// `{"suite":"gemm","framework":"tessera","backend":"cpu","n":1024,"reps":20,"median_s":...}`.
///
/// Peers print the same fields so that both sides parse with the same code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The suite that measured it: `"gemm"`.
    pub suite: String,
    /// Who computed: `"tessera"` or a peer such as `"numpy"`.
    pub framework: String,
    /// Where it computed: `"cpu"` (later `"opencl"`, `"cuda"`).
    pub backend: String,
    /// The problem size (for gemm: square n×n matrices).
    pub n: usize,
    /// Number of timed repetitions behind the statistics.
    pub reps: usize,
    /// Median time of one repetition, seconds.
    pub median_s: f64,
    /// Fastest repetition, seconds.
    pub min_s: f64,
    /// Slowest repetition, seconds.
    pub max_s: f64,
    /// Throughput at the median time, 10⁹ floating-point operations per second.
    pub gflops: f64,
}

impl Record {
    /// The record as one line of JSON (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).expect("a record always serialises")
    }
}

/// What a measuring process printed: its records and any other JSON objects (peers print a
/// `{"peer_info": {...}}` line describing themselves, e.g. numpy's BLAS and thread count).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Output {
    /// Lines that are records (they have a `"suite"` field).
    pub records: Vec<Record>,
    /// Every other JSON object, as printed.
    pub info: Vec<Value>,
}

impl Output {
    /// Parses a process's stdout: one JSON object per non-empty line. A line that is not a
    /// JSON object, or a `"suite"` line that is not a valid [`Record`], is an error naming it.
    pub fn parse(stdout: &str) -> TaskResult<Self> {
        let mut out = Output::default();
        for line in stdout.lines() {
            out.push_line(line)?;
        }
        Ok(out)
    }

    /// Adds one line of output (blank lines are ignored) and returns the record it held, if any.
    pub fn push_line(&mut self, line: &str) -> TaskResult<Option<&Record>> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(None);
        }
        let value: Value =
            serde_json::from_str(line).map_err(|e| format!("not a JSON line ({e}): {line}"))?;
        if !value.is_object() {
            return Err(format!("not a JSON object: {line}").into());
        }
        if value.get("suite").is_some() {
            let record = serde_json::from_value(value)
                .map_err(|e| format!("not a valid record ({e}): {line}"))?;
            self.records.push(record);
            Ok(self.records.last())
        } else {
            self.info.push(value);
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Record {
        Record {
            suite: "gemm".into(),
            framework: "tessera".into(),
            backend: "cpu".into(),
            n: 256,
            reps: 5,
            median_s: 0.002,
            min_s: 0.001,
            max_s: 0.003,
            gflops: 16.7,
        }
    }

    #[test]
    fn a_record_line_parses_back_to_the_same_record() {
        let line = sample().to_json_line();
        assert!(!line.contains('\n'));
        let out = Output::parse(&format!("{line}\n\n")).unwrap();
        assert_eq!(out.records, vec![sample()]);
        assert!(out.info.is_empty());
    }

    #[test]
    fn lines_without_a_suite_are_kept_as_info() {
        let text = format!(
            "{{\"peer_info\":{{\"blas\":\"openblas\"}}}}\n{}",
            sample().to_json_line()
        );
        let out = Output::parse(&text).unwrap();
        assert_eq!(out.records.len(), 1);
        assert_eq!(out.info[0]["peer_info"]["blas"], "openblas");
    }

    #[test]
    fn garbage_and_incomplete_records_are_errors() {
        assert!(Output::parse("warming up...").is_err());
        assert!(Output::parse("[1, 2]").is_err());
        assert!(Output::parse("{\"suite\":\"gemm\"}").is_err());
    }
}
