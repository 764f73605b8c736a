//! The regression guard: compares a run's Tessera records with a saved baseline and lists what
//! got slower beyond the noise. It reports; it never fails a build and asserts no time.
//!
//! Two comparisons per measured case (suite, backend, model, phase, size):
//! * **time**: the median against the baseline's median, with a tolerance of the larger of
//!   [`MIN_NOISE`] and half of either run's relative spread `(max - min) / median`;
//! * **ratio to a peer**: when both runs measured a peer on the same case, Tessera's speed
//!   relative to the peer, which cancels most of a loaded machine's slowdown.

use std::path::Path;

use serde_json::{json, Value};

use crate::bench::record::Record;
use crate::bench::report::{host, unix_time};
use crate::TaskResult;

/// The smallest relative change that counts, whatever the spreads say.
pub const MIN_NOISE: f64 = 0.05;

/// What a comparison is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Measure {
    /// Tessera's own median time.
    Time,
    /// Tessera's speed relative to this peer's.
    RatioTo(String),
}

/// One case that moved beyond the noise.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The case, as [`Record::case_key`].
    pub case: String,
    /// What was compared.
    pub measure: Measure,
    /// Current speed over baseline speed (below 1: slower now).
    pub speed_ratio: f64,
    /// The tolerance that applied.
    pub noise: f64,
}

impl Change {
    /// True when the case got slower beyond the noise.
    pub fn is_regression(&self) -> bool {
        self.speed_ratio < 1.0
    }

    /// The change in words.
    pub fn describe(&self) -> String {
        let what = match &self.measure {
            Measure::Time => "time".to_string(),
            Measure::RatioTo(peer) => format!("speed relative to {peer}"),
        };
        let pct = (self.speed_ratio - 1.0) * 100.0;
        format!(
            "{}: {what} {:+.1}% (noise ±{:.1}%)",
            self.case,
            pct,
            self.noise * 100.0
        )
    }
}

/// The tolerance of a comparison of two records.
fn noise(a: &Record, b: &Record) -> f64 {
    MIN_NOISE
        .max(a.relative_spread() / 2.0)
        .max(b.relative_spread() / 2.0)
}

/// The peer record of the same case as `ours`, from `records`.
fn peer_of<'a>(records: &'a [Record], ours: &Record, peer: &str) -> Option<&'a Record> {
    let key = ours.case_key();
    records
        .iter()
        .find(|r| r.framework == peer && r.case_key() == key)
}

/// Every case of `current` that moved beyond the noise against `baseline`, slower or faster.
pub fn compare(baseline: &[Record], current: &[Record]) -> Vec<Change> {
    let mut changes = Vec::new();
    for now in current.iter().filter(|r| r.framework == "tessera") {
        let key = now.case_key();
        let Some(before) = baseline
            .iter()
            .find(|r| r.framework == "tessera" && r.case_key() == key)
        else {
            continue;
        };
        let tolerance = noise(before, now);
        let speed_ratio = before.median_s / now.median_s;
        if (speed_ratio - 1.0).abs() > tolerance {
            changes.push(Change {
                case: key.clone(),
                measure: Measure::Time,
                speed_ratio,
                noise: tolerance,
            });
        }
        let peers: Vec<&str> = current
            .iter()
            .filter(|r| r.framework != "tessera" && r.case_key() == key)
            .map(|r| r.framework.as_str())
            .collect();
        for peer in peers {
            let (Some(peer_now), Some(peer_before)) =
                (peer_of(current, now, peer), peer_of(baseline, before, peer))
            else {
                continue;
            };
            let ratio_now = peer_now.median_s / now.median_s;
            let ratio_before = peer_before.median_s / before.median_s;
            let tolerance = noise(before, now).max(noise(peer_before, peer_now));
            let speed_ratio = ratio_now / ratio_before;
            if (speed_ratio - 1.0).abs() > tolerance {
                changes.push(Change {
                    case: key.clone(),
                    measure: Measure::RatioTo(peer.to_string()),
                    speed_ratio,
                    noise: tolerance,
                });
            }
        }
    }
    changes
}

/// Reads the records of a baseline (or of any results file with a `"records"` array).
pub fn load(path: &Path) -> TaskResult<Vec<Record>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("could not read the baseline {}: {e}", path.display()))?;
    let value: Value =
        serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
    let records = value
        .get("records")
        .cloned()
        .ok_or_else(|| format!("{} has no \"records\" array", path.display()))?;
    serde_json::from_value(records)
        .map_err(|e| format!("{}: unexpected records: {e}", path.display()).into())
}

/// Writes `records` as a baseline file at `path` (creating its folder).
pub fn save(path: &Path, records: &[Record]) -> TaskResult<()> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    }
    let doc = json!({ "unix_time": unix_time(), "host": host(), "records": records });
    let text = serde_json::to_string_pretty(&doc)? + "\n";
    std::fs::write(path, text).map_err(|e| format!("could not write {}: {e}", path.display()))?;
    Ok(())
}

/// The comparison's report: the regressions first, then the improvements, or a line saying
/// nothing moved beyond the noise.
pub fn report(changes: &[Change], against: &Path) -> String {
    let (worse, better): (Vec<&Change>, Vec<&Change>) =
        changes.iter().partition(|c| c.is_regression());
    let mut lines = Vec::new();
    if worse.is_empty() {
        lines.push(format!(
            "no regression beyond the noise against {}",
            against.display()
        ));
    } else {
        lines.push(format!(
            "REGRESSIONS beyond the noise against {}:",
            against.display()
        ));
        lines.extend(worse.iter().map(|c| format!("  {}", c.describe())));
    }
    if !better.is_empty() {
        lines.push("improvements beyond the noise:".to_string());
        lines.extend(better.iter().map(|c| format!("  {}", c.describe())));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::timing::Timing;

    fn rec(framework: &str, samples: &[f64]) -> Record {
        Record::new(
            "mlp",
            framework,
            "cpu",
            128,
            &Timing::from_samples(samples).unwrap(),
        )
        .with_phase("train")
    }

    #[test]
    fn changes_within_the_noise_are_ignored() {
        let before = [rec("tessera", &[1.0, 1.0, 1.0])];
        let now = [rec("tessera", &[1.03, 1.03, 1.03])];
        assert!(compare(&before, &now).is_empty());
        // A wide spread widens the tolerance: 20% slower with a 60% spread is noise.
        let noisy = [rec("tessera", &[0.9, 1.2, 1.5])];
        assert!(compare(&before, &noisy).is_empty());
    }

    #[test]
    fn a_slower_time_and_a_worse_peer_ratio_are_regressions() {
        let before = [rec("tessera", &[1.0]), rec("torch", &[1.0])];
        let now = [rec("tessera", &[1.5]), rec("torch", &[1.0])];
        let changes = compare(&before, &now);
        assert_eq!(changes.len(), 2);
        assert!(changes.iter().all(Change::is_regression));
        assert_eq!(changes[1].measure, Measure::RatioTo("torch".into()));
        let text = report(&changes, Path::new("base.json"));
        assert!(text.starts_with("REGRESSIONS"), "{text}");
        assert!(text.contains("-33.3%"), "{text}");
    }

    #[test]
    fn a_machine_wide_slowdown_shows_in_time_but_not_in_the_peer_ratio() {
        let before = [rec("tessera", &[1.0]), rec("torch", &[1.0])];
        let now = [rec("tessera", &[2.0]), rec("torch", &[2.0])];
        let changes = compare(&before, &now);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].measure, Measure::Time);
    }

    #[test]
    fn baselines_round_trip_through_a_file() {
        let dir = std::env::temp_dir().join(format!("tessera-baseline-{}", std::process::id()));
        let path = dir.join("b.json");
        let records = vec![rec("tessera", &[1.0, 2.0])];
        save(&path, &records).unwrap();
        assert_eq!(load(&path).unwrap(), records);
        std::fs::remove_dir_all(&dir).unwrap();
        let faster = compare(&records, &[rec("tessera", &[0.5])]);
        assert!(!faster[0].is_regression());
        assert!(report(&faster, &path).contains("no regression"));
    }
}
