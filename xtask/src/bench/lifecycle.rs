//! The lifecycle report: for each phase of a model's life (prep, train, eval, infer-1,
//! infer-batch), the time on each Tessera backend, each accelerator's speedup over the CPU and
//! PyTorch's CPU time beside them; written as Markdown, JSON and an SVG plot under
//! `target/bench/` (or, for the gpu-check bundle, `tessera-bench lifecycle-report DIR`).
//!
//! A "backend" column is a backend in one precision ([`crate::bench::precision::column`]):
//! `cuda` (f32), `cuda tf32`, `cuda bf16`; every speedup is over the CPU backend in f32.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

use crate::bench::precision;
use crate::bench::record::Record;
use crate::bench::report::{format_rate, host, unix_time};

/// The phases, in the order of a model's life (`generate`: a language model's decoding).
pub const PHASES: [&str; 6] = [
    "prep",
    "train",
    "eval",
    "infer-1",
    "infer-batch",
    "generate",
];

/// The backend every speedup is measured against.
pub const REFERENCE_BACKEND: &str = "cpu";

/// One measured side of a row: a median time and the throughput it gives.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    /// Median seconds of the timed unit.
    pub median_s: f64,
    /// Samples per second.
    pub samples_per_s: f64,
    /// Relative spread of the repetitions.
    pub spread: f64,
}

impl Cell {
    fn of(r: &Record) -> Self {
        Cell {
            median_s: r.median_s,
            samples_per_s: r.samples_per_s.unwrap_or(r.n as f64 / r.median_s),
            spread: r.relative_spread(),
        }
    }
}

/// One row: a phase of one model (prep has no model).
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseRow {
    /// The phase, one of [`PHASES`].
    pub phase: String,
    /// The model, when the phase runs one.
    pub model: Option<String>,
    /// Samples in the timed unit (the batch, or the data set for prep and eval).
    pub n: usize,
    /// Tessera's figures by backend name.
    pub tessera: BTreeMap<String, Cell>,
    /// The peers' CPU figures by peer name.
    pub peers: BTreeMap<String, Cell>,
}

impl PhaseRow {
    /// A short label: `"train mlp"`, `"prep"`.
    pub fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{} {m}", self.phase),
            None => self.phase.clone(),
        }
    }

    /// What one timed repetition covers.
    pub fn unit(&self) -> String {
        match self.phase.as_str() {
            "prep" => format!("one epoch, {} samples", self.n),
            "train" if self.model.as_deref() == Some("gpt") => {
                format!("one step, {} tokens", self.n)
            }
            "train" => format!("one step, batch {}", self.n),
            "generate" => format!("{} tokens, batch 1, KV cache", self.n),
            "eval" => format!("test set, {} samples", self.n),
            _ => format!("one forward, batch {}", self.n),
        }
    }

    /// `backend`'s speedup over the CPU backend (CPU time / its time), when both ran.
    pub fn speedup(&self, backend: &str) -> Option<f64> {
        let cpu = self.tessera.get(REFERENCE_BACKEND)?;
        let other = self.tessera.get(backend)?;
        Some(cpu.median_s / other.median_s)
    }

    /// Tessera CPU's throughput over `peer`'s (above 1: Tessera is faster), when both ran.
    pub fn ratio_over_peer(&self, peer: &str) -> Option<f64> {
        let ours = self.tessera.get(REFERENCE_BACKEND)?;
        let theirs = self.peers.get(peer)?;
        Some(theirs.median_s / ours.median_s)
    }
}

/// The whole report.
#[derive(Debug, Clone, PartialEq)]
pub struct Lifecycle {
    /// Rows in phase order, then model order (MLP first).
    pub rows: Vec<PhaseRow>,
    /// Tessera columns measured (a backend, with its precision when not f32), the CPU first,
    /// then each backend's precisions in the order f32, TF32, bf16.
    pub backends: Vec<String>,
    /// Peers that measured some phase.
    pub peers: Vec<String>,
}

impl Lifecycle {
    /// Builds the report from every record of a run (the gemm suite's are ignored).
    pub fn from_records(records: &[Record]) -> Self {
        let mut rows: Vec<PhaseRow> = Vec::new();
        // (column, backend, precision rank)
        let mut backends: Vec<(String, String, usize)> = Vec::new();
        let mut peers: Vec<String> = Vec::new();
        for r in records {
            let Some(phase) = r.phase.as_deref() else {
                continue;
            };
            let key = (phase, r.model.as_deref());
            let index = match rows
                .iter()
                .position(|row| (row.phase.as_str(), row.model.as_deref()) == key)
            {
                Some(i) => i,
                None => {
                    rows.push(PhaseRow {
                        phase: phase.to_string(),
                        model: r.model.clone(),
                        n: r.n,
                        tessera: BTreeMap::new(),
                        peers: BTreeMap::new(),
                    });
                    rows.len() - 1
                }
            };
            if r.framework == "tessera" {
                let column = r.column();
                rows[index].tessera.insert(column.clone(), Cell::of(r));
                if !backends.iter().any(|(c, _, _)| *c == column) {
                    let rank = precision::column_rank(r.precision.as_deref());
                    backends.push((column, r.backend.clone(), rank));
                }
            } else {
                rows[index].peers.insert(r.framework.clone(), Cell::of(r));
                if !peers.contains(&r.framework) {
                    peers.push(r.framework.clone());
                }
            }
        }
        let model_order = |m: &Option<String>| match m.as_deref() {
            None => 0,
            Some("mlp") => 1,
            Some("cnn") => 2,
            Some(_) => 3,
        };
        rows.sort_by_key(|row| {
            let phase = PHASES
                .iter()
                .position(|p| *p == row.phase)
                .unwrap_or(PHASES.len());
            (phase, model_order(&row.model))
        });
        backends.sort_by_key(|(column, backend, rank)| {
            (column != REFERENCE_BACKEND, backend.clone(), *rank)
        });
        Lifecycle {
            rows,
            backends: backends.into_iter().map(|(column, _, _)| column).collect(),
            peers,
        }
    }

    /// The accelerators: every measured backend but the CPU.
    pub fn accelerators(&self) -> Vec<&str> {
        self.backends
            .iter()
            .map(String::as_str)
            .filter(|b| *b != REFERENCE_BACKEND)
            .collect()
    }

    /// The row and accelerator with the largest speedup over the CPU, if any accelerator ran.
    pub fn most_helped(&self) -> Option<(&PhaseRow, &str, f64)> {
        let mut best: Option<(&PhaseRow, &str, f64)> = None;
        for row in &self.rows {
            for acc in self.accelerators() {
                if let Some(s) = row.speedup(acc) {
                    if best.is_none_or(|(_, _, b)| s > b) {
                        best = Some((row, acc, s));
                    }
                }
            }
        }
        best
    }

    /// The answer to "which phase does an accelerator help most", in words.
    pub fn verdict(&self) -> String {
        match self.most_helped() {
            Some((row, acc, s)) if s > 1.0 => format!(
                "{acc} helps most in {} ({s:.2}x the CPU backend's speed).",
                row.label()
            ),
            Some((row, acc, s)) => format!(
                "No other column beats the CPU backend in any phase; the closest is {acc} in {} \
                 ({s:.2}x its speed).",
                row.label()
            ),
            None => "n/a: no accelerator backend was measured on this machine, so every speedup \
                     over the CPU is n/a."
                .to_string(),
        }
    }

    /// The report as a Markdown table with a heading line naming the machine.
    pub fn to_markdown(&self, machine: &str) -> String {
        let accs = self.accelerators();
        let mut head = vec![
            "phase".to_string(),
            "timed unit".to_string(),
            format!("Tessera {REFERENCE_BACKEND}"),
        ];
        for acc in &accs {
            head.push(format!("Tessera {acc}"));
            head.push(format!("{acc} speedup"));
        }
        if accs.is_empty() {
            head.push("accelerator speedup".to_string());
        }
        for p in &self.peers {
            head.push(format!("{} cpu", peer_title(p)));
            head.push(format!("Tessera cpu / {}", peer_title(p)));
        }
        let mut out = String::new();
        let _ = writeln!(out, "Machine: {machine}\n");
        let _ = writeln!(out, "| {} |", head.join(" | "));
        let _ = writeln!(out, "|{}", " --- |".repeat(head.len()));
        for row in &self.rows {
            let mut cells = vec![row.label(), row.unit()];
            cells.push(cell_text(row.tessera.get(REFERENCE_BACKEND)));
            for acc in &accs {
                cells.push(cell_text(row.tessera.get(*acc)));
                cells.push(ratio_text(row.speedup(acc), "x"));
            }
            if accs.is_empty() {
                cells.push("n/a".to_string());
            }
            for p in &self.peers {
                cells.push(cell_text(row.peers.get(p)));
                cells.push(ratio_text(row.ratio_over_peer(p), "x"));
            }
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        let _ = writeln!(
            out,
            "\nEach cell: median time of the timed unit (samples/s). Speedups are time ratios \
             against Tessera's CPU backend; `Tessera cpu / peer` above 1 means Tessera is faster."
        );
        if self.backends.iter().any(|b| b.contains(' ')) {
            let _ = writeln!(
                out,
                "\nColumns `<backend> tf32`: f32 tensors, matrix products on TF32 tensor cores \
                 (cuBLAS); `<backend> bf16`: the bf16 mixed-precision policy (linear layers in \
                 bf16, f32 master weights). `-`: not measured in that precision (prep does no \
                 matrix product)."
            );
        }
        let _ = writeln!(out, "\n{}", self.verdict());
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|row| {
                let tessera: serde_json::Map<String, Value> = row
                    .tessera
                    .iter()
                    .map(|(b, c)| (b.clone(), cell_json(c)))
                    .collect();
                let peers: serde_json::Map<String, Value> = row
                    .peers
                    .iter()
                    .map(|(p, c)| (p.clone(), cell_json(c)))
                    .collect();
                let speedups: serde_json::Map<String, Value> = self
                    .accelerators()
                    .into_iter()
                    .map(|a| (a.to_string(), json!(row.speedup(a))))
                    .collect();
                let ratios: serde_json::Map<String, Value> = self
                    .peers
                    .iter()
                    .map(|p| (p.clone(), json!(row.ratio_over_peer(p))))
                    .collect();
                json!({
                    "phase": row.phase,
                    "model": row.model,
                    "n": row.n,
                    "unit": row.unit(),
                    "tessera": tessera,
                    "speedup_over_cpu": speedups,
                    "peers": peers,
                    "tessera_cpu_over_peer": ratios,
                })
            })
            .collect();
        let most = self.most_helped().map(|(row, acc, s)| {
            json!({ "phase": row.phase, "model": row.model, "backend": acc, "speedup": s })
        });
        json!({
            "unix_time": unix_time(),
            "host": host(),
            "backends": self.backends,
            "peers": self.peers,
            "rows": rows,
            "most_helped": most,
            "verdict": self.verdict(),
        })
    }
}

/// How a peer is named in the report.
pub fn peer_title(peer: &str) -> &str {
    match peer {
        "torch" => "PyTorch",
        other => other,
    }
}

fn cell_json(c: &Cell) -> Value {
    json!({ "median_s": c.median_s, "samples_per_s": c.samples_per_s, "spread": c.spread })
}

/// `12.3 ms (5200/s)`, or `-` when the side did not run.
fn cell_text(cell: Option<&Cell>) -> String {
    match cell {
        Some(c) => format!(
            "{} ({}/s)",
            format_seconds(c.median_s),
            format_rate(c.samples_per_s)
        ),
        None => "-".to_string(),
    }
}

fn ratio_text(r: Option<f64>, suffix: &str) -> String {
    r.map_or("-".to_string(), |r| format!("{r:.2}{suffix}"))
}

/// Seconds in the unit that suits them: `1.23 s`, `45.6 ms`, `789 µs`.
pub fn format_seconds(s: f64) -> String {
    if s >= 1.0 {
        format!("{s:.2} s")
    } else if s >= 1e-3 {
        format!("{:.2} ms", s * 1e3)
    } else {
        format!("{:.0} µs", s * 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::timing::Timing;

    fn rec(framework: &str, backend: &str, phase: &str, model: Option<&str>, s: f64) -> Record {
        let t = Timing::from_samples(&[s]).unwrap();
        let mut r = Record::new("x", framework, backend, 64, &t)
            .with_samples()
            .with_phase(phase);
        r.model = model.map(str::to_string);
        r
    }

    #[test]
    fn rows_follow_the_lifecycle_and_one_backend_gives_na_speedups() {
        let records = [
            rec("tessera", "cpu", "infer-1", Some("mlp"), 0.001),
            rec("tessera", "cpu", "train", Some("cnn"), 0.2),
            rec("tessera", "cpu", "train", Some("mlp"), 0.01),
            rec("torch", "cpu", "train", Some("mlp"), 0.02),
            rec("tessera", "cpu", "prep", None, 1.0),
        ];
        let report = Lifecycle::from_records(&records);
        let labels: Vec<String> = report.rows.iter().map(PhaseRow::label).collect();
        assert_eq!(labels, ["prep", "train mlp", "train cnn", "infer-1 mlp"]);
        assert_eq!(report.rows[1].ratio_over_peer("torch"), Some(2.0));
        assert!(report.most_helped().is_none());
        let md = report.to_markdown("test machine");
        assert!(md.contains("| accelerator speedup |") || md.contains("accelerator speedup"));
        assert!(md.contains("| train mlp | one step, batch 64 | 10.00 ms (6400/s) | n/a |"));
        assert!(md.contains("2.00x"));
        assert!(report.verdict().starts_with("n/a"));
        assert!(report.to_json()["most_helped"].is_null());
    }

    fn rec_in(backend: &str, precision: Option<&str>, phase: &str, s: f64) -> Record {
        let model = (phase != "prep").then_some("mlp");
        let mut r = rec("tessera", backend, phase, model, s);
        r.precision = precision.map(str::to_string);
        r
    }

    #[test]
    fn each_precision_gets_its_own_column_and_speedup_over_cpu_f32() {
        let records = [
            rec_in("cuda", Some("bf16"), "train", 0.001),
            rec_in("cpu", None, "train", 0.04),
            rec_in("cuda", Some("tf32"), "train", 0.002),
            rec_in("cuda", None, "train", 0.004),
            rec_in("cpu", None, "prep", 1.0),
            rec_in("cuda", None, "prep", 0.5),
        ];
        let report = Lifecycle::from_records(&records);
        assert_eq!(report.backends, ["cpu", "cuda", "cuda tf32", "cuda bf16"]);
        let train = &report.rows[1];
        assert_eq!(train.label(), "train mlp");
        assert_eq!(train.speedup("cuda"), Some(10.0));
        assert_eq!(train.speedup("cuda tf32"), Some(20.0));
        assert_eq!(train.speedup("cuda bf16"), Some(40.0));
        // Prep was not measured in tf32/bf16: no speedup, a `-` cell.
        assert_eq!(report.rows[0].speedup("cuda bf16"), None);
        let md = report.to_markdown("gpu machine");
        assert!(
            md.contains("| Tessera cuda tf32 | cuda tf32 speedup |"),
            "{md}"
        );
        assert!(
            md.contains("| Tessera cuda bf16 | cuda bf16 speedup |"),
            "{md}"
        );
        assert!(
            md.contains("| prep | one epoch, 64 samples | 1.00 s (64.0/s) | 500.00 ms (128/s) | 2.00x | - | - | - | - |"),
            "{md}"
        );
        assert!(md.contains("40.00x") && md.contains("bf16 mixed-precision policy"));
        let (row, column, s) = report.most_helped().unwrap();
        assert_eq!(
            (row.label().as_str(), column, s),
            ("train mlp", "cuda bf16", 40.0)
        );
        let json = report.to_json();
        assert_eq!(json["rows"][1]["speedup_over_cpu"]["cuda tf32"], 20.0);
        assert_eq!(json["backends"][3], "cuda bf16");
    }

    #[test]
    fn a_slower_column_is_not_said_to_help() {
        let records = [
            rec_in("cpu", None, "train", 0.01),
            rec_in("cpu", Some("bf16"), "train", 0.02),
        ];
        let verdict = Lifecycle::from_records(&records).verdict();
        assert!(verdict.starts_with("No other column beats"), "{verdict}");
        assert!(
            verdict.contains("cpu bf16 in train mlp (0.50x"),
            "{verdict}"
        );
    }

    #[test]
    fn an_f32_only_report_has_no_precision_note() {
        let records = [
            rec_in("cpu", None, "train", 0.04),
            rec_in("cuda", None, "train", 0.004),
        ];
        let md = Lifecycle::from_records(&records).to_markdown("m");
        assert!(!md.contains("mixed-precision"), "{md}");
    }

    #[test]
    fn an_accelerator_gets_speedups_and_the_verdict_names_its_best_phase() {
        let records = [
            rec("tessera", "cpu", "train", Some("cnn"), 0.4),
            rec("tessera", "cuda", "train", Some("cnn"), 0.02),
            rec("tessera", "cpu", "infer-1", Some("cnn"), 0.001),
            rec("tessera", "cuda", "infer-1", Some("cnn"), 0.002),
        ];
        let report = Lifecycle::from_records(&records);
        assert_eq!(report.backends, ["cpu", "cuda"]);
        assert_eq!(report.rows[0].speedup("cuda"), Some(20.0));
        let (row, acc, s) = report.most_helped().unwrap();
        assert_eq!((row.label().as_str(), acc, s), ("train cnn", "cuda", 20.0));
        let md = report.to_markdown("m");
        assert!(md.contains("cuda speedup") && md.contains("20.00x") && md.contains("0.50x"));
    }
}
