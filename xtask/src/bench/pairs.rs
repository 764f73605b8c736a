//! Alternating rounds: each suite runs Tessera, then each peer, then Tessera again, and so on
//! (A B A B ...), so that a change of machine load hits both sides of a pair alike. A ratio is
//! computed per round (Tessera's throughput over the peer's, both from that round) and
//! reported as the median over the rounds with its min and max; a shared machine moves the
//! absolute figures, far less the ratios of pairs.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::bench::record::Record;
use crate::bench::report::headline_rate;

/// The records of one round: every side measured once.
pub type Round = Vec<Record>;

/// The median, with min and max, of values that are all finite; `None` for none.
pub fn median_min_max(values: &[f64]) -> Option<(f64, f64, f64)> {
    if values.is_empty() {
        return None;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    let median = if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    };
    Some((median, v[0], v[v.len() - 1]))
}

/// One record per side and case over all rounds: the round whose median time is the median
/// (the lower middle one for an even count), with min and max over every round and the
/// repetitions of all of them.
pub fn aggregate(rounds: &[Round]) -> Vec<Record> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<&Record>> = BTreeMap::new();
    for r in rounds.iter().flatten() {
        let key = (r.framework.clone(), r.case_key());
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(r);
    }
    order
        .into_iter()
        .map(|key| {
            let mut runs = groups.remove(&key).expect("every key has a group");
            runs.sort_by(|a, b| a.median_s.total_cmp(&b.median_s));
            let mut out = runs[(runs.len() - 1) / 2].clone();
            out.min_s = runs.iter().map(|r| r.min_s).fold(f64::INFINITY, f64::min);
            out.max_s = runs.iter().map(|r| r.max_s).fold(0.0, f64::max);
            out.reps = runs.iter().map(|r| r.reps).sum();
            out
        })
        .collect()
}

/// Tessera on one backend against one peer on one case, over the rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PairRatio {
    /// The case, as the tables label it (`"mlp train n=128"`).
    pub case: String,
    /// Tessera's backend.
    pub backend: String,
    /// The peer framework.
    pub peer: String,
    /// Tessera's throughput over the peer's, one per round where both ran (above 1: Tessera
    /// is faster).
    pub ratios: Vec<f64>,
    /// Median of [`PairRatio::ratios`].
    pub median: f64,
    /// Smallest ratio.
    pub min: f64,
    /// Largest ratio.
    pub max: f64,
}

/// Every Tessera / peer ratio over the rounds, in the order the cases first appear.
pub fn pair_ratios(rounds: &[Round]) -> Vec<PairRatio> {
    let mut per: Vec<((String, String, String), String)> = Vec::new();
    let mut ratios: BTreeMap<(String, String, String), Vec<f64>> = BTreeMap::new();
    for round in rounds {
        let peers: Vec<&Record> = round.iter().filter(|r| r.framework != "tessera").collect();
        for ours in round.iter().filter(|r| r.framework == "tessera") {
            for theirs in &peers {
                let same_case = theirs.same_case(ours);
                let rate = headline_rate(theirs);
                if !same_case || theirs.backend != "cpu" || rate <= 0.0 {
                    continue;
                }
                let key = (
                    ours.case_key(),
                    ours.backend.clone(),
                    theirs.framework.clone(),
                );
                if !ratios.contains_key(&key) {
                    per.push((key.clone(), ours.case_label()));
                }
                ratios
                    .entry(key)
                    .or_default()
                    .push(headline_rate(ours) / rate);
            }
        }
    }
    per.into_iter()
        .map(|(key, case)| {
            let values = ratios.remove(&key).expect("every key has ratios");
            let (median, min, max) = median_min_max(&values).expect("at least one ratio");
            PairRatio {
                case,
                backend: key.1,
                peer: key.2,
                ratios: values,
                median,
                min,
                max,
            }
        })
        .collect()
}

/// The ratios as a table: one row per case and backend, one column per peer, each cell
/// `median [min, max]` over the pairs.
pub fn ratio_table(ratios: &[PairRatio], rounds: usize) -> String {
    let mut peers: Vec<&str> = Vec::new();
    let mut rows: Vec<(String, String)> = Vec::new();
    let mut cells: BTreeMap<(String, String, &str), &PairRatio> = BTreeMap::new();
    for r in ratios {
        if !peers.contains(&r.peer.as_str()) {
            peers.push(&r.peer);
        }
        let row = (r.case.clone(), r.backend.clone());
        if !rows.contains(&row) {
            rows.push(row.clone());
        }
        cells.insert((row.0, row.1, &r.peer), r);
    }
    let label_width = rows
        .iter()
        .map(|(c, b)| c.len() + b.len() + 3)
        .max()
        .unwrap_or(4)
        .max(4);
    let mut head = format!("{:<label_width$}", "case");
    for p in &peers {
        head += &format!("  {:>24}", format!("tessera/{p}"));
    }
    let mut lines = vec![
        format!(
            "Tessera / peer throughput, median [min, max] of {rounds} alternating pair(s); above 1: \
             Tessera is faster"
        ),
        head,
    ];
    for (case, backend) in &rows {
        let mut line = format!("{:<label_width$}", format!("{case} ({backend})"));
        for p in &peers {
            let cell = match cells.get(&(case.clone(), backend.clone(), *p)) {
                Some(r) => format!("{:.2} [{:.2}, {:.2}]", r.median, r.min, r.max),
                None => "-".to_string(),
            };
            line += &format!("  {cell:>24}");
        }
        lines.push(line);
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gemm(framework: &str, n: usize, median_s: f64) -> Record {
        Record {
            suite: "gemm".into(),
            framework: framework.into(),
            backend: "cpu".into(),
            n,
            reps: 5,
            median_s,
            min_s: median_s * 0.9,
            max_s: median_s * 1.1,
            gflops: 1.0 / median_s,
            samples_per_s: None,
            model: None,
            phase: None,
            variant: None,
            precision: None,
            memory: None,
        }
    }

    #[test]
    fn ratios_are_taken_within_each_round_and_summarised() {
        // The machine slows down in round 2; both sides do, and the ratio holds.
        let rounds = vec![
            vec![gemm("tessera", 8, 1.0), gemm("numpy", 8, 2.0)],
            vec![gemm("tessera", 8, 3.0), gemm("numpy", 8, 6.0)],
            vec![gemm("tessera", 8, 1.0), gemm("numpy", 8, 1.0)],
        ];
        let r = pair_ratios(&rounds);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].ratios, vec![2.0, 2.0, 1.0]);
        assert_eq!((r[0].median, r[0].min, r[0].max), (2.0, 1.0, 2.0));
        assert_eq!(r[0].case, "n=8");
        let table = ratio_table(&r, 3);
        assert!(table.contains("tessera/numpy"), "{table}");
        assert!(table.contains("2.00 [1.00, 2.00]"), "{table}");
    }

    #[test]
    fn aggregation_keeps_the_median_round_and_the_extremes() {
        let rounds = vec![
            vec![gemm("tessera", 8, 1.0)],
            vec![gemm("tessera", 8, 3.0)],
            vec![gemm("tessera", 8, 2.0)],
        ];
        let all = aggregate(&rounds);
        assert_eq!(all.len(), 1);
        assert_eq!(all[0].median_s, 2.0);
        assert_eq!(all[0].gflops, 0.5);
        assert_eq!(
            (all[0].min_s, all[0].max_s, all[0].reps),
            (0.9, 3.3000000000000003, 15)
        );
    }

    #[test]
    fn different_cases_and_missing_peers_do_not_pair() {
        let rounds = vec![vec![gemm("tessera", 8, 1.0), gemm("numpy", 16, 1.0)]];
        assert!(pair_ratios(&rounds).is_empty());
        assert_eq!(median_min_max(&[]), None);
        assert_eq!(median_min_max(&[4.0, 1.0]), Some((2.5, 1.0, 4.0)));
    }
}
