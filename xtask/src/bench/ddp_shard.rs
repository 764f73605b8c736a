//! `cargo xtask bench ddp --shards`: what each sharding level (`train --shard 0|1|2|3`, and 3
//! with `--shard-prefetch`) costs and saves for the GPT on 2 and 4 ranks. Runs `train --model gpt --distributed` (release, MPI
//! build) under `mpirun --oversubscribe`, one rayon thread per rank, at every level in
//! alternating order (0-1-2-3, then 3-2-1-0, ...) so that drifting load hits every level alike;
//! reports each run's `state_bytes_per_rank` and `peak_rss_bytes` (the run's own figures) and
//! tokens/s (min/median/max over the runs), each against level 0 of the same world size.
//! Writes `target/bench/ddp-shard.json`.

use crate::bench::ddp::{mpirun_one_thread_per_rank, DdpArgs};
use crate::bench::report::write_results;
use crate::process::{cargo, output_checked, run_checked, target_dir};
use crate::TaskResult;
use serde_json::{json, Value};

/// The suite's name in its results file.
pub const NAME: &str = "ddp-shard";

/// A configuration compared: a sharding level, and whether level 3 prefetches its gathers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Variant {
    level: usize,
    prefetch: bool,
}

impl Variant {
    /// How the tables name it: the level, `3p` with prefetch.
    fn label(self) -> String {
        format!("{}{}", self.level, if self.prefetch { "p" } else { "" })
    }
}

/// The configurations compared: levels 0 to 3, then level 3 with prefetch.
const VARIANTS: [Variant; 5] = [
    Variant {
        level: 0,
        prefetch: false,
    },
    Variant {
        level: 1,
        prefetch: false,
    },
    Variant {
        level: 2,
        prefetch: false,
    },
    Variant {
        level: 3,
        prefetch: false,
    },
    Variant {
        level: 3,
        prefetch: true,
    },
];

/// The plain data-parallel baseline every ratio is against.
const BASELINE: Variant = VARIANTS[0];

/// One run's figures.
#[derive(Clone, Debug)]
struct ShardRun {
    ranks: usize,
    variant: Variant,
    state_bytes: f64,
    peak_rss: f64,
    tokens_per_s: f64,
    raw: Value,
}

fn run_once(
    exe: &std::path::Path,
    ranks: usize,
    variant: Variant,
    args: &DdpArgs,
) -> TaskResult<ShardRun> {
    // The run folder `train` needs (the GPT job always saves), replaced by every run.
    let dir = target_dir()
        .join("bench")
        .join("ddp-shard-runs")
        .join(format!("{ranks}-ranks-shard-{}", variant.label()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut cmd = mpirun_one_thread_per_rank();
    cmd.args(["--oversubscribe", "-np"])
        .arg(ranks.to_string())
        .arg(exe)
        .args(["--distributed", "--model", "gpt", "--shard"])
        .arg(variant.level.to_string())
        .args(variant.prefetch.then_some("--shard-prefetch"))
        .args(["--steps", &args.steps.to_string()])
        .args(["--eval-interval", &args.steps.to_string()])
        .args(["--eval-iters", "1", "--sample-chars", "0"])
        .args(["--batch-size", &args.batch.to_string()])
        .arg("--save")
        .arg(&dir);
    let stdout = output_checked(&mut cmd)?;
    let raw: Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<Value>(l).ok())
        .ok_or_else(|| format!("no JSON line from train:\n{stdout}"))?;
    let number = |key: &str| raw[key].as_f64().unwrap_or(f64::NAN);
    Ok(ShardRun {
        ranks,
        variant,
        state_bytes: number("state_bytes_per_rank"),
        peak_rss: number("peak_rss_bytes"),
        tokens_per_s: number("tokens_per_s"),
        raw,
    })
}

/// min, median, max of `values`.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    if n == 0 {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let median = if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    };
    (sorted[0], median, sorted[n - 1])
}

/// The table rows: per world size and level, the medians and the ratios to level 0.
fn summarise(runs: &[ShardRun]) -> Vec<Value> {
    let mut rows = Vec::new();
    for ranks in [2, 4] {
        let of = |variant: Variant, f: &dyn Fn(&ShardRun) -> f64| -> Vec<f64> {
            runs.iter()
                .filter(|r| r.ranks == ranks && r.variant == variant)
                .map(f)
                .collect()
        };
        let base_state = spread(&of(BASELINE, &|r| r.state_bytes)).1;
        let base_rss = spread(&of(BASELINE, &|r| r.peak_rss)).1;
        let base_tps = spread(&of(BASELINE, &|r| r.tokens_per_s)).1;
        for variant in VARIANTS {
            let state = spread(&of(variant, &|r| r.state_bytes)).1;
            let rss = spread(&of(variant, &|r| r.peak_rss)).1;
            let tps = spread(&of(variant, &|r| r.tokens_per_s));
            rows.push(json!({
                "ranks": ranks,
                "shard": variant.level,
                "prefetch": variant.prefetch,
                "state_bytes_per_rank": state,
                "state_vs_level0": state / base_state,
                "peak_rss_bytes": rss,
                "peak_rss_vs_level0": rss / base_rss,
                "tokens_per_s": [tps.0, tps.1, tps.2],
                "tokens_per_s_vs_level0": tps.1 / base_tps,
            }));
        }
    }
    rows
}

/// Runs the case: builds `train` with MPI, alternates the levels, prints the table, writes
/// `target/bench/ddp-shard.json`.
pub fn run(args: &DdpArgs) -> TaskResult<()> {
    println!("==> bench ddp --shards: building train (release, --features mpi)");
    run_checked(&mut cargo([
        "build",
        "--release",
        "-p",
        "tessera-cli",
        "--features",
        "mpi",
        "--bin",
        "train",
    ]))?;
    let exe = target_dir().join("release").join("train");
    let mut runs = Vec::new();
    for pair in 0..args.pairs {
        for ranks in [2, 4] {
            let mut order = VARIANTS.to_vec();
            if pair % 2 == 1 {
                order.reverse();
            }
            for variant in order {
                let run = run_once(&exe, ranks, variant, args)?;
                println!(
                    "    run {}: {ranks} ranks, --shard {}: {:.0} bytes of state per rank, \
                     peak RSS {:.1} MB, {:.0} tokens/s",
                    pair + 1,
                    variant.label(),
                    run.state_bytes,
                    run.peak_rss / 1e6,
                    run.tokens_per_s
                );
                runs.push(run);
            }
        }
    }
    let rows = summarise(&runs);
    println!(
        "\nddp --shards: train --model gpt (the default model), {} windows per rank and step, \
         {} steps, 1 thread per rank, mpirun --oversubscribe; medians of {} runs, ratios to \
         --shard 0 at the same world size (3p: --shard 3 --shard-prefetch)\n",
        args.batch, args.steps, args.pairs
    );
    println!(
        "| ranks | --shard | state bytes per rank | vs 0 | peak RSS MB | vs 0 | tokens/s (min / median / max) | vs 0 |"
    );
    println!("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |");
    for row in &rows {
        let f = |k: &str| row[k].as_f64().unwrap_or(f64::NAN);
        let tps = &row["tokens_per_s"];
        let t = |i: usize| tps[i].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {} | {}{} | {:.0} | {:.2} | {:.1} | {:.2} | {:.0} / {:.0} / {:.0} | {:.2} |",
            row["ranks"],
            row["shard"],
            if row["prefetch"] == true { "p" } else { "" },
            f("state_bytes_per_rank"),
            f("state_vs_level0"),
            f("peak_rss_bytes") / 1e6,
            f("peak_rss_vs_level0"),
            t(0),
            t(1),
            t(2),
            f("tokens_per_s_vs_level0"),
        );
    }
    let results = json!({
        "suite": NAME,
        "args": args.to_cli_args(),
        "machine": crate::bench::machine_description(),
        "runs": runs.iter().map(|r| r.raw.clone()).collect::<Vec<_>>(),
        "summary": rows,
    });
    let path = write_results(NAME, &results)?;
    println!("results written to {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(ranks: usize, variant: Variant, state: f64, tps: f64) -> ShardRun {
        ShardRun {
            ranks,
            variant,
            state_bytes: state,
            peak_rss: 100.0,
            tokens_per_s: tps,
            raw: Value::Null,
        }
    }

    #[test]
    fn ratios_are_against_level_zero_of_the_same_world_size() {
        let mut runs = Vec::new();
        for ranks in [2, 4] {
            for variant in VARIANTS {
                let level = variant.level + usize::from(variant.prefetch);
                for tps in [90.0, 100.0, 130.0] {
                    let state = 1000.0 / (1 + level * ranks / 2) as f64;
                    runs.push(run(ranks, variant, state, tps / (1 + level) as f64));
                }
            }
        }
        let rows = summarise(&runs);
        assert_eq!(rows.len(), 10);
        let row = |ranks: u64, level: u64, prefetch: bool| {
            rows.iter()
                .find(|r| r["ranks"] == ranks && r["shard"] == level && r["prefetch"] == prefetch)
                .unwrap()
        };
        assert_eq!(row(2, 0, false)["state_vs_level0"], 1.0);
        assert_eq!(row(4, 3, false)["state_vs_level0"], 1.0 / 7.0);
        let prefetched = row(4, 3, true)["state_vs_level0"].as_f64().unwrap();
        assert!((prefetched - 1.0 / 9.0).abs() < 1e-12);
        assert_eq!(row(2, 1, false)["tokens_per_s_vs_level0"], 0.5);
        assert_eq!(row(2, 3, true)["tokens_per_s_vs_level0"], 0.2);
        assert_eq!(
            row(4, 0, false)["tokens_per_s"],
            json!([90.0, 100.0, 130.0])
        );
        assert_eq!(
            Variant {
                level: 3,
                prefetch: true
            }
            .label(),
            "3p"
        );
    }
}
