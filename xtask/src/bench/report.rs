//! Reporting a benchmark: the comparison table printed to the terminal and the JSON results file
//! `target/bench/<suite>.json`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

use crate::bench::numpy::PeerRun;
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

/// The facts about this machine that help read the numbers later.
fn host() -> Value {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let load_1m = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<f64>().ok());
    json!({
        "os": std::env::consts::OS,
        "arch": std::env::consts::ARCH,
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
        }
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
