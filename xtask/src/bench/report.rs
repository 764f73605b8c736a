//! Reporting a benchmark: the comparison table printed to the terminal and the JSON results file
//! `target/bench/<suite>.json`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::bench::numpy::PeerRun;
use crate::bench::peer::PeerKind;
use crate::bench::record::Record;
use crate::process::target_dir;
use crate::TaskResult;

/// A table of median throughput by problem size: Tessera's, the peer's and their ratio
/// (above 1: Tessera is faster). Sizes the peer did not measure show `-`.
pub fn throughput_table(ours: &[Record], peer_name: &str, peer: &[Record]) -> String {
    let backend = ours.first().map_or("?", |r| r.backend.as_str());
    let ours_head = format!("Tessera {backend} GFLOP/s");
    let peer_head = format!("{peer_name} GFLOP/s");
    let ratio_head = format!("Tessera/{peer_name}");
    let peer_by_n: BTreeMap<usize, f64> = peer.iter().map(|r| (r.n, r.gflops)).collect();
    let mut lines = vec![format!(
        "{:>6}  {ours_head:>20}  {peer_head:>16}  {ratio_head:>14}",
        "n"
    )];
    for r in ours {
        let (peer_cell, ratio_cell) = match peer_by_n.get(&r.n) {
            Some(&p) => (format!("{p:.1}"), format!("{:.2}", r.gflops / p)),
            None => ("-".to_string(), "-".to_string()),
        };
        lines.push(format!(
            "{:>6}  {:>20.1}  {peer_cell:>16}  {ratio_cell:>14}",
            r.n, r.gflops
        ));
    }
    lines.join("\n")
}

/// A column of [`comparison_table`]: one framework on one backend (in one precision).
fn column_name(r: &Record) -> String {
    format!("{} {}", r.framework, r.column())
}

/// The throughput a table shows for a record: samples/s where the suite counts samples, else
/// GFLOP/s.
pub fn headline_rate(r: &Record) -> f64 {
    r.samples_per_s.unwrap_or(r.gflops)
}

/// The unit of [`headline_rate`] for these records.
fn headline_unit(records: &[Record]) -> &'static str {
    if records.iter().any(|r| r.samples_per_s.is_some()) {
        "samples/s"
    } else {
        "GFLOP/s"
    }
}

/// The row label of a record: model, phase, variant and size, whichever it has.
fn row_label(r: &Record) -> String {
    r.case_label()
}

/// A table of every framework and backend side by side, one row per measured case (model,
/// phase, size), with each Tessera column's ratio over each peer's CPU figure (above 1:
/// Tessera is faster). Cases a column did not measure show `-`.
pub fn comparison_table(records: &[Record]) -> String {
    let unit = headline_unit(records);
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    let mut cells: BTreeMap<(String, String), f64> = BTreeMap::new();
    for r in records {
        let (col, row) = (column_name(r), row_label(r));
        if !columns.contains(&col) {
            columns.push(col.clone());
        }
        if !rows.contains(&row) {
            rows.push(row.clone());
        }
        cells.insert((row, col), headline_rate(r));
    }
    let ours: Vec<&String> = columns
        .iter()
        .filter(|c| c.starts_with("tessera "))
        .collect();
    let peers: Vec<&String> = columns
        .iter()
        .filter(|c| !c.starts_with("tessera "))
        .collect();
    let ratios: Vec<(&String, &String)> = ours
        .iter()
        .flat_map(|o| peers.iter().map(move |p| (*o, *p)))
        .collect();
    let label_width = rows.iter().map(String::len).max().unwrap_or(4).max(4);
    let mut head = format!("{:<label_width$}", "case");
    for c in &columns {
        head += &format!("  {:>16}", c);
    }
    for (o, p) in &ratios {
        let name = format!(
            "{}/{}",
            o.replace("tessera ", "tessera-"),
            p.split(' ').next().unwrap_or(p)
        );
        head += &format!("  {name:>18}");
    }
    let mut lines = vec![format!("({unit}, higher is better)"), head];
    for row in &rows {
        let mut line = format!("{row:<label_width$}");
        for c in &columns {
            match cells.get(&(row.clone(), c.clone())) {
                Some(v) => line += &format!("  {:>16}", format_rate(*v)),
                None => line += &format!("  {:>16}", "-"),
            }
        }
        for (o, p) in &ratios {
            let ratio = match (
                cells.get(&(row.clone(), (*o).clone())),
                cells.get(&(row.clone(), (*p).clone())),
            ) {
                (Some(a), Some(b)) if *b > 0.0 => format!("{:.2}", a / b),
                _ => "-".to_string(),
            };
            line += &format!("  {ratio:>18}");
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// The `mem` suite's table: one row per case (model, phase, batch), one column per framework
/// and backend with `before / +peak / after` in MiB (the resident set before the unit, the
/// unit's peak above it, the resident set after), and each Tessera column's peak increase
/// over each peer's (below 1: Tessera needs less).
pub fn memory_table(records: &[Record]) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    let with_memory: Vec<&Record> = records.iter().filter(|r| r.memory.is_some()).collect();
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<String> = Vec::new();
    for r in &with_memory {
        let (col, row) = (column_name(r), row_label(r));
        if !columns.contains(&col) {
            columns.push(col);
        }
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    let find = |row: &str, col: &str| {
        with_memory
            .iter()
            .find(|r| row_label(r) == row && column_name(r) == col)
            .and_then(|r| r.memory)
    };
    let ours: Vec<&String> = columns
        .iter()
        .filter(|c| c.starts_with("tessera "))
        .collect();
    let peers: Vec<&String> = columns
        .iter()
        .filter(|c| !c.starts_with("tessera "))
        .collect();
    let label_width = rows.iter().map(String::len).max().unwrap_or(4).max(4);
    let mut head = format!("{:<label_width$}", "case");
    for c in &columns {
        head += &format!("  {c:>26}");
    }
    for o in &ours {
        for p in &peers {
            let name = format!(
                "peak {}/{}",
                o.replace("tessera ", "tessera-"),
                p.split(' ').next().unwrap_or(p)
            );
            head += &format!("  {name:>24}");
        }
    }
    let mut lines = vec![
        "(MiB: resident before / peak above that / resident after; lower is better)".to_string(),
        head,
    ];
    for row in &rows {
        let mut line = format!("{row:<label_width$}");
        for c in &columns {
            let cell = match find(row, c) {
                Some(m) => format!(
                    "{:.1} / +{:.1} / {:.1}",
                    mib(m.rss_before_bytes),
                    mib(m.peak_increase_bytes()),
                    mib(m.rss_after_bytes)
                ),
                None => "-".to_string(),
            };
            line += &format!("  {cell:>26}");
        }
        for o in &ours {
            for p in &peers {
                let cell = match (find(row, o), find(row, p)) {
                    (Some(a), Some(b)) if b.peak_increase_bytes() > 0 => format!(
                        "{:.2}",
                        a.peak_increase_bytes() as f64 / b.peak_increase_bytes() as f64
                    ),
                    _ => "-".to_string(),
                };
                line += &format!("  {cell:>24}");
            }
        }
        lines.push(line);
    }
    lines.join("\n")
}

/// A rate with precision that suits its size.
pub fn format_rate(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// The whole result of one suite's run, every backend and every peer, as one JSON document.
pub fn suite_results_json(
    suite: &str,
    args: &[String],
    ours: &[Record],
    peers: &[(PeerKind, PeerRun)],
) -> Value {
    let mut records: Vec<&Record> = ours.iter().collect();
    let mut peer_status = serde_json::Map::new();
    for (kind, run) in peers {
        let status = match run {
            PeerRun::Ran(out) => {
                records.extend(&out.records);
                json!({ "status": "ran", "info": out.info })
            }
            PeerRun::Skipped(reason) => json!({ "status": "skipped", "reason": reason }),
        };
        peer_status.insert(kind.name().to_string(), status);
    }
    json!({
        "suite": suite,
        "args": args,
        "unix_time": unix_time(),
        "host": host(),
        "records": records,
        "peers": peer_status,
    })
}

/// Seconds since the Unix epoch (0 if the clock is before it).
pub fn unix_time() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The CPU model as `/proc/cpuinfo` names it, if it does.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_string())
}

/// The facts about this machine that help read the numbers later.
pub fn host() -> Value {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load_1m = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok());
    json!({
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
        "cpu_model": cpu_model(),
        "cpus": cpus,
        "load_avg_1m_at_end": load_1m,
    })
}

/// The whole result of one benchmark run as one JSON document.
pub fn results_json(suite: &str, args: &[String], ours: &[Record], peer: &PeerRun) -> Value {
    let unix_time = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut records: Vec<&Record> = ours.iter().collect();
    let numpy = match peer {
        PeerRun::Ran(out) => {
            records.extend(&out.records);
            json!({ "status": "ran", "info": out.info })
        }
        PeerRun::Skipped(reason) => json!({ "status": "skipped", "reason": reason }),
    };
    json!({
        "suite": suite,
        "args": args,
        "unix_time": unix_time,
        "host": host(),
        "records": records,
        "peers": { "numpy": numpy },
    })
}

/// Writes `results` to `target/bench/<suite>.json` (creating the folder) and returns the path.
pub fn write_results(suite: &str, results: &Value) -> TaskResult<PathBuf> {
    let dir = target_dir().join("bench");
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    let path = dir.join(format!("{suite}.json"));
    let text = serde_json::to_string_pretty(results)? + "\n";
    std::fs::write(&path, text).map_err(|e| format!("could not write {}: {e}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::record::Output;

    fn record(framework: &str, n: usize, gflops: f64) -> Record {
        Record {
            suite: "gemm".into(),
            framework: framework.into(),
            backend: "cpu".into(),
            n,
            reps: 5,
            median_s: 1.0,
            min_s: 1.0,
            max_s: 1.0,
            gflops,
            samples_per_s: None,
            model: None,
            phase: None,
            variant: None,
            precision: None,
            memory: None,
        }
    }

    #[test]
    fn the_comparison_table_has_a_column_per_side_and_tessera_ratios() {
        let mut ours = record("tessera", 128, 0.0);
        ours.samples_per_s = Some(200.0);
        ours.model = Some("mlp".into());
        ours.phase = Some("train".into());
        let mut theirs = ours.clone();
        theirs.framework = "torch".into();
        theirs.samples_per_s = Some(100.0);
        let table = comparison_table(&[ours, theirs]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("samples/s"));
        assert!(lines[1].contains("tessera cpu") && lines[1].contains("tessera-cpu/torch"));
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(cells, ["mlp", "train", "n=128", "200", "100", "2.00"]);
    }

    #[test]
    fn the_memory_table_shows_before_peak_after_and_the_peak_ratio() {
        let mib = 1024 * 1024;
        let mut ours = record("tessera", 128, 0.0);
        ours.suite = "mem".into();
        ours.model = Some("mlp".into());
        ours.phase = Some("train-step".into());
        ours.memory = Some(crate::bench::record::MemoryUse {
            rss_before_bytes: 10 * mib,
            peak_rss_bytes: 14 * mib,
            rss_after_bytes: 12 * mib,
        });
        let mut theirs = ours.clone();
        theirs.framework = "torch".into();
        theirs.memory = Some(crate::bench::record::MemoryUse {
            rss_before_bytes: 300 * mib,
            peak_rss_bytes: 308 * mib,
            rss_after_bytes: 305 * mib,
        });
        let table = memory_table(&[ours, theirs]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].contains("peak tessera-cpu/torch"), "{table}");
        assert!(lines[2].contains("10.0 / +4.0 / 12.0"), "{table}");
        assert!(lines[2].contains("300.0 / +8.0 / 305.0"), "{table}");
        assert!(lines[2].trim_end().ends_with("0.50"), "{table}");
    }

    #[test]
    fn suite_results_list_every_peer() {
        let ours = [record("tessera", 256, 10.0)];
        let peers = [
            (
                PeerKind::Numpy,
                PeerRun::Ran(Output {
                    records: vec![record("numpy", 256, 40.0)],
                    info: vec![],
                }),
            ),
            (PeerKind::Torch, PeerRun::Skipped("no torch".into())),
        ];
        let v = suite_results_json("gemm", &[], &ours, &peers);
        assert_eq!(v["records"].as_array().unwrap().len(), 2);
        assert_eq!(v["peers"]["numpy"]["status"], "ran");
        assert_eq!(v["peers"]["torch"]["reason"], "no torch");
    }

    #[test]
    fn the_table_shows_both_sides_and_their_ratio() {
        let ours = [record("tessera", 256, 10.0), record("tessera", 512, 30.0)];
        let peer = [record("numpy", 256, 40.0)];
        let table = throughput_table(&ours, "numpy", &peer);
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].contains("Tessera cpu GFLOP/s") && lines[0].contains("Tessera/numpy"));
        let cells: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(cells, ["256", "10.0", "40.0", "0.25"]);
        let cells: Vec<&str> = lines[2].split_whitespace().collect();
        assert_eq!(cells, ["512", "30.0", "-", "-"]);
    }

    #[test]
    fn results_hold_every_record_and_the_peer_status() {
        let ours = [record("tessera", 256, 10.0)];
        let peer = PeerRun::Ran(Output {
            records: vec![record("numpy", 256, 40.0)],
            info: vec![json!({"peer_info": {"blas": "openblas"}})],
        });
        let v = results_json("gemm", &["gemm".into()], &ours, &peer);
        assert_eq!(v["records"].as_array().unwrap().len(), 2);
        assert_eq!(v["records"][1]["framework"], "numpy");
        assert_eq!(v["peers"]["numpy"]["status"], "ran");
        let skipped = PeerRun::Skipped("no numpy".into());
        let v = results_json("gemm", &[], &ours, &skipped);
        assert_eq!(v["peers"]["numpy"]["reason"], "no numpy");
        assert_eq!(v["records"].as_array().unwrap().len(), 1);
    }
}
