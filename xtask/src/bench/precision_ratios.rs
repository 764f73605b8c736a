//! The ratios of the `precision` suite, per alternating round and then median / min / max over
//! the rounds (as [`crate::bench::pairs`] does for Tessera / peer):
//!
//! * [`speedups`]: each framework's 16-bit throughput over its own f32 throughput on the same
//!   case (above 1: the 16-bit case is faster);
//! * [`memory_ratios`]: the peak memory above the resident set before the unit, Tessera over
//!   each peer at the same precision, and each framework's 16-bit over its f32 (below 1: less
//!   memory).
//!
//! Tessera / peer throughput at the same precision is [`crate::bench::pairs::pair_ratios`]:
//! the precision is part of a record's case.

use serde::Serialize;

use crate::bench::pairs::{median_min_max, Round};
use crate::bench::record::Record;
use crate::bench::report::headline_rate;

/// The precision every other one is compared with.
pub const REFERENCE: &str = "f32";

/// One ratio over the rounds: `numerator / denominator` on `case`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ratio {
    /// The case without its precision, as tables label it (`"gemm n=1024"`).
    pub case: String,
    /// What is divided (`"tessera cpu bf16"`).
    pub numerator: String,
    /// What it is divided by (`"tessera cpu f32"`, `"torch cpu bf16"`).
    pub denominator: String,
    /// One ratio per round where both sides were measured.
    pub ratios: Vec<f64>,
    /// Median of [`Ratio::ratios`].
    pub median: f64,
    /// Smallest ratio.
    pub min: f64,
    /// Largest ratio.
    pub max: f64,
}

/// `r`'s framework, backend and precision: one side of a ratio.
fn side(r: &Record) -> String {
    format!(
        "{} {} {}",
        r.framework,
        r.backend,
        r.precision.as_deref().unwrap_or("-")
    )
}

/// `r`'s case label without its precision.
fn case_without_precision(r: &Record) -> String {
    Record {
        precision: None,
        ..r.clone()
    }
    .case_label()
}

/// Whether `a` and `b` are the same case at possibly different precisions.
fn same_case_any_precision(a: &Record, b: &Record) -> bool {
    let strip = |r: &Record| Record {
        precision: None,
        ..r.clone()
    };
    strip(a).same_case(&strip(b))
}

/// The ratios `value(numerator) / value(denominator)` of every pair that `pairs` finds in each
/// round, grouped by (case, numerator, denominator) in order of first appearance.
fn over_rounds<'r>(
    rounds: &'r [Round],
    pairs: impl Fn(&'r Round) -> Vec<(&'r Record, &'r Record)>,
    value: impl Fn(&Record) -> Option<f64>,
) -> Vec<Ratio> {
    let mut out: Vec<Ratio> = Vec::new();
    for round in rounds {
        for (num, den) in pairs(round) {
            let (Some(a), Some(b)) = (value(num), value(den)) else {
                continue;
            };
            if !(a.is_finite() && b.is_finite() && b > 0.0) {
                continue;
            }
            let (case, numerator, denominator) =
                (case_without_precision(num), side(num), side(den));
            let index = match out.iter().position(|r| {
                (&r.case, &r.numerator, &r.denominator) == (&case, &numerator, &denominator)
            }) {
                Some(i) => i,
                None => {
                    out.push(Ratio {
                        case,
                        numerator,
                        denominator,
                        ratios: Vec::new(),
                        median: 0.0,
                        min: 0.0,
                        max: 0.0,
                    });
                    out.len() - 1
                }
            };
            out[index].ratios.push(a / b);
        }
    }
    for r in &mut out {
        (r.median, r.min, r.max) = median_min_max(&r.ratios).expect("at least one ratio");
    }
    out
}

/// Pairs of a 16-bit record with the f32 record of the same framework, backend and case.
fn against_f32(round: &Round) -> Vec<(&Record, &Record)> {
    let mut pairs = Vec::new();
    for low in round {
        let Some(p) = low.precision.as_deref() else {
            continue;
        };
        if p == REFERENCE {
            continue;
        }
        let reference = round.iter().find(|f| {
            f.precision.as_deref() == Some(REFERENCE)
                && f.framework == low.framework
                && f.backend == low.backend
                && same_case_any_precision(f, low)
        });
        if let Some(f) = reference {
            pairs.push((low, f));
        }
    }
    pairs
}

/// Pairs of a Tessera record with each peer's CPU record of the same case and precision.
fn against_peers(round: &Round) -> Vec<(&Record, &Record)> {
    let mut pairs = Vec::new();
    for ours in round.iter().filter(|r| r.framework == "tessera") {
        for theirs in round
            .iter()
            .filter(|r| r.framework != "tessera" && r.backend == "cpu" && r.same_case(ours))
        {
            pairs.push((ours, theirs));
        }
    }
    pairs
}

/// Each framework's 16-bit throughput over its f32 throughput, per round (timed records only).
pub fn speedups(rounds: &[Round]) -> Vec<Ratio> {
    over_rounds(rounds, against_f32, |r| {
        r.memory.is_none().then(|| headline_rate(r))
    })
}

/// Peak memory above the resident set before the unit: Tessera over each peer at the same
/// precision, then each framework's 16-bit over its f32, per round (memory records only).
pub fn memory_ratios(rounds: &[Round]) -> Vec<Ratio> {
    let peak = |r: &Record| r.memory.map(|m| m.peak_increase_bytes() as f64);
    let mut out = over_rounds(rounds, against_peers, peak);
    out.extend(over_rounds(rounds, against_f32, peak));
    out
}

/// The ratios as a table under `title`: one row per case, one column per numerator /
/// denominator pair, each cell `median [min, max]`.
pub fn ratio_table(title: &str, ratios: &[Ratio]) -> String {
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    for r in ratios {
        let column = format!("{} / {}", r.numerator, r.denominator);
        if !columns.contains(&column) {
            columns.push(column);
        }
        if !rows.contains(&r.case) {
            rows.push(r.case.clone());
        }
    }
    let label_width = rows.iter().map(String::len).max().unwrap_or(4).max(4);
    let width = |c: &String| c.len().max(22);
    let mut head = format!("{:<label_width$}", "case");
    for c in &columns {
        head += &format!("  {c:>w$}", w = width(c));
    }
    let mut lines = vec![title.to_string(), head];
    for row in &rows {
        let mut line = format!("{row:<label_width$}");
        for c in &columns {
            let cell = ratios
                .iter()
                .find(|r| &r.case == row && &format!("{} / {}", r.numerator, r.denominator) == c)
                .map_or("-".to_string(), |r| {
                    format!("{:.2} [{:.2}, {:.2}]", r.median, r.min, r.max)
                });
            line += &format!("  {cell:>w$}", w = width(c));
        }
        lines.push(line);
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::MemoryUse;
    use crate::bench::timing::Timing;

    fn gemm(framework: &str, precision: &str, median_s: f64) -> Record {
        let timing = Timing::from_samples(&[median_s]).unwrap();
        Record::new("precision", framework, "cpu", 64, &timing)
            .with_flops(1e9)
            .with_phase("gemm")
            .with_precision(precision)
    }

    fn memory(framework: &str, precision: &str, peak_mib: u64) -> Record {
        let timing = Timing::from_samples(&[1.0]).unwrap();
        let mut r = Record::new("precision", framework, "cpu", 64, &timing)
            .with_phase("gemm-memory")
            .with_precision(precision);
        r.memory = Some(MemoryUse {
            rss_before_bytes: 10 << 20,
            peak_rss_bytes: (10 + peak_mib) << 20,
            rss_after_bytes: 12 << 20,
        });
        r
    }

    #[test]
    fn speedups_divide_each_framework_by_its_own_f32_within_a_round() {
        // Round 2 is slower for everything; the ratios hold.
        let rounds = vec![
            vec![
                gemm("tessera", "f32", 2.0),
                gemm("tessera", "bf16", 1.0),
                gemm("torch", "f32", 2.0),
                gemm("torch", "bf16", 0.5),
            ],
            vec![
                gemm("tessera", "f32", 6.0),
                gemm("tessera", "bf16", 2.0),
                gemm("torch", "f32", 4.0),
                gemm("torch", "bf16", 1.0),
            ],
        ];
        let s = speedups(&rounds);
        let summary: Vec<(&str, &str, &str, Vec<f64>)> = s
            .iter()
            .map(|r| {
                (
                    r.case.as_str(),
                    r.numerator.as_str(),
                    r.denominator.as_str(),
                    r.ratios.clone(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "gemm n=64",
                    "tessera cpu bf16",
                    "tessera cpu f32",
                    vec![2.0, 3.0]
                ),
                (
                    "gemm n=64",
                    "torch cpu bf16",
                    "torch cpu f32",
                    vec![4.0, 4.0]
                ),
            ]
        );
        assert_eq!((s[0].median, s[0].min, s[0].max), (2.5, 2.0, 3.0));
        let table = ratio_table("speedups", &s);
        assert!(
            table.contains("tessera cpu bf16 / tessera cpu f32"),
            "{table}"
        );
        assert!(table.contains("2.50 [2.00, 3.00]"), "{table}");
    }

    #[test]
    fn memory_ratios_compare_with_the_peer_then_with_f32() {
        let rounds = vec![vec![
            memory("tessera", "f32", 16),
            memory("tessera", "bf16", 56),
            memory("torch", "f32", 16),
            memory("torch", "bf16", 8),
            gemm("tessera", "bf16", 1.0),
        ]];
        let m = memory_ratios(&rounds);
        let summary: Vec<(&str, &str, f64)> = m
            .iter()
            .map(|r| (r.numerator.as_str(), r.denominator.as_str(), r.median))
            .collect();
        assert_eq!(
            summary,
            [
                ("tessera cpu f32", "torch cpu f32", 1.0),
                ("tessera cpu bf16", "torch cpu bf16", 7.0),
                ("tessera cpu bf16", "tessera cpu f32", 3.5),
                ("torch cpu bf16", "torch cpu f32", 0.5),
            ]
        );
        assert!(m.iter().all(|r| r.case == "gemm-memory n=64"));
    }

    #[test]
    fn records_without_a_precision_or_a_partner_give_no_ratio() {
        let mut plain = gemm("tessera", "f32", 1.0);
        plain.precision = None;
        let rounds = vec![vec![plain, gemm("tessera", "bf16", 1.0)]];
        assert!(speedups(&rounds).is_empty());
        assert!(memory_ratios(&rounds).is_empty());
    }
}
