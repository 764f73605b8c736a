//! The measurement record: what `tessera-bench` and the Python peers print, one JSON object a line.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::bench::timing::Timing;
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
    /// Throughput at the median time, 10⁹ floating-point operations per second (for model
    /// suites: the model's counted multiply-adds, see each suite; 0 where it means nothing).
    #[serde(default)]
    pub gflops: f64,
    /// Samples per second at the median time, for the suites that process samples (`n` is then
    /// the samples of one repetition: the batch, or the whole data set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_per_s: Option<f64>,
    /// The model measured (`"mlp"`, `"cnn"`), for the suites that run one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The phase of a model's life the record measures (`"prep"`, `"train"`, `"eval"`,
    /// `"infer-1"`, `"infer-batch"`), see [`crate::bench::lifecycle`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// What distinguishes cases of the same size within a suite (the gemm suite's element type
    /// and layout, `"f64 nt"`); absent for the suite's main case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// The precision the case was measured in: `"tf32"` (f32 tensors, TF32 matrix products)
    /// or a mixed-precision policy (`"bf16"`, `"f16"`: f32 parameters, matrix products in that
    /// dtype), see [`crate::bench::precision`]; `"f32"` or absent for full f32 (the
    /// `precision` suite always names it). Part of the case: records pair only with records
    /// of the same precision, and reports give each precision its own column.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// Resident memory around the measured unit, for the `mem` and `precision` suites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryUse>,
}

/// The resident memory of a measuring process around one measured unit (a training step, an
/// epoch), in bytes, from Linux's `/proc/self/status` (`VmRSS`, and `VmHWM` reset before the
/// unit through `/proc/self/clear_refs`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct MemoryUse {
    /// Resident set size before the unit ran (model, optimizer state and data in place).
    pub rss_before_bytes: u64,
    /// Peak resident set size while it ran.
    pub peak_rss_bytes: u64,
    /// Resident set size after it.
    pub rss_after_bytes: u64,
}

impl MemoryUse {
    /// How far the unit raised the resident set above where it started: its own peak memory.
    pub fn peak_increase_bytes(&self) -> u64 {
        self.peak_rss_bytes.saturating_sub(self.rss_before_bytes)
    }
}

impl Record {
    /// A record of `suite` measured by `framework` on `backend` for size `n`, with the
    /// statistics of `timing`; throughput fields start empty (set them with the builders).
    pub fn new(suite: &str, framework: &str, backend: &str, n: usize, timing: &Timing) -> Self {
        Record {
            suite: suite.to_string(),
            framework: framework.to_string(),
            backend: backend.to_string(),
            n,
            reps: timing.reps,
            median_s: timing.median_s,
            min_s: timing.min_s,
            max_s: timing.max_s,
            gflops: 0.0,
            samples_per_s: None,
            model: None,
            phase: None,
            variant: None,
            precision: None,
            memory: None,
        }
    }

    /// Where the record belongs in reports: its backend, with the precision when not f32
    /// (`"cuda bf16"`).
    pub fn column(&self) -> String {
        crate::bench::precision::column(&self.backend, self.precision.as_deref())
    }

    /// Sets [`Record::gflops`] from the floating-point operations of one repetition.
    pub fn with_flops(mut self, flops_per_rep: f64) -> Self {
        self.gflops = flops_per_rep / self.median_s / 1e9;
        self
    }

    /// Sets [`Record::samples_per_s`] from `n` samples per repetition.
    pub fn with_samples(mut self) -> Self {
        self.samples_per_s = Some(self.n as f64 / self.median_s);
        self
    }

    /// Sets [`Record::model`].
    pub fn with_model(mut self, model: &str) -> Self {
        self.model = Some(model.to_string());
        self
    }

    /// Sets [`Record::phase`].
    pub fn with_phase(mut self, phase: &str) -> Self {
        self.phase = Some(phase.to_string());
        self
    }

    /// Sets [`Record::precision`].
    pub fn with_precision(mut self, precision: &str) -> Self {
        self.precision = Some(precision.to_string());
        self
    }

    /// What identifies the measured configuration across frameworks and runs: suite, backend,
    /// model, phase, size, variant and precision (the framework is left out so that peers line
    /// up with Tessera).
    pub fn case_key(&self) -> String {
        let mut key = format!(
            "{}/{}/{}/{}/n={}",
            self.suite,
            self.backend,
            self.model.as_deref().unwrap_or("-"),
            self.phase.as_deref().unwrap_or("-"),
            self.n
        );
        for part in [&self.variant, &self.precision].into_iter().flatten() {
            key = format!("{key}/{part}");
        }
        key
    }

    /// Whether `other` measured the same case (suite, model, phase, size, variant and
    /// precision), whatever framework and backend computed it.
    pub fn same_case(&self, other: &Record) -> bool {
        self.suite == other.suite
            && self.n == other.n
            && self.model == other.model
            && self.phase == other.phase
            && self.variant == other.variant
            && self.precision == other.precision
    }

    /// The case as tables label it: model, phase, variant, precision and size, whichever it
    /// has.
    pub fn case_label(&self) -> String {
        let mut parts = Vec::new();
        for part in [&self.model, &self.phase, &self.variant, &self.precision]
            .into_iter()
            .flatten()
        {
            parts.push(part.clone());
        }
        parts.push(format!("n={}", self.n));
        parts.join(" ")
    }

    /// The relative spread `(max - min) / median` of the repetitions: the run's own noise.
    pub fn relative_spread(&self) -> f64 {
        if self.median_s > 0.0 {
            (self.max_s - self.min_s) / self.median_s
        } else {
            0.0
        }
    }

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
            samples_per_s: None,
            model: None,
            phase: None,
            variant: None,
            precision: None,
            memory: None,
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

    #[test]
    fn model_records_carry_samples_model_and_phase_and_old_lines_still_parse() {
        let timing = Timing::from_samples(&[0.5, 0.5, 0.5]).unwrap();
        let r = Record::new("mlp", "tessera", "cpu", 128, &timing)
            .with_samples()
            .with_flops(1e9)
            .with_model("mlp")
            .with_phase("train");
        assert_eq!(r.samples_per_s, Some(256.0));
        assert_eq!(r.gflops, 2.0);
        assert_eq!(r.case_key(), "mlp/cpu/mlp/train/n=128");
        let back = Output::parse(&r.to_json_line()).unwrap();
        assert_eq!(back.records, vec![r]);
        // A gemm line without the optional fields (what older peers print) still parses.
        let line = r#"{"suite":"gemm","framework":"numpy","backend":"cpu","n":8,"reps":1,"median_s":1.0,"min_s":1.0,"max_s":1.0,"gflops":1.0}"#;
        assert_eq!(Output::parse(line).unwrap().records[0].model, None);
    }
}
