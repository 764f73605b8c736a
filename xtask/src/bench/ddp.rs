//! `cargo xtask bench ddp`: data-parallel scaling on this machine. Runs the MLP training step
//! of `tessera-distributed`'s `ddp_bench` example (784-512-512-10, f32, Adam, CPU backend, one
//! rayon thread per rank, each rank bound to a core) under `mpirun` on 1 rank and on 2 ranks,
//! alternating the two in pairs (1-2, 2-1, 1-2, ...) so that drifting machine load hits both
//! sides alike. Reports, in the same run: samples/s over all ranks (min/median/max over the
//! runs), the step time, the computation per step (the slower rank's) and the time per step
//! spent synchronising the gradients (on the rank that arrived last, so without waiting); then
//! a closing note on the scaling it measured. Writes `target/bench/ddp.json`.
//!
//! Needs Open MPI's `mpirun` and `libopenmpi-dev` + `libclang-dev` to build the example with
//! the `mpi` feature; skipped, saying so, without them. Not part of a plain `cargo xtask
//! bench`.

use clap::Args;
use serde_json::{json, Value};
use std::process::Command;

use crate::bench::report::write_results;
use crate::process::{cargo, output_checked, run_checked, target_dir};
use crate::TaskResult;

/// The suite's name.
pub const NAME: &str = "ddp";

/// Arguments of `cargo xtask bench ddp`.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct DdpArgs {
    /// Samples per step and rank (2 ranks process twice as many samples per step).
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Unmeasured steps at the start of each run.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Measured steps per run.
    #[arg(long, default_value_t = 30)]
    pub steps: usize,
    /// Pairs of runs (one on 1 rank, one on 2 ranks, in alternating order): `bench`'s global
    /// `--pairs` (one argument of that name only: two made clap panic on access).
    #[arg(skip = 3usize)]
    pub pairs: usize,
    /// Instead: the GPT's sharding levels (`train --shard 0-3`) on 2 and 4 ranks, their
    /// training state and peak RSS per rank and their tokens/s (`--steps` steps of `--batch`
    /// windows per rank; `--pairs` runs of every level). See `ddp_shard`.
    #[arg(long)]
    pub shards: bool,
}

impl DdpArgs {
    /// The command-line words that parse back to `self` (without the subcommand name).
    pub fn to_cli_args(&self) -> Vec<String> {
        vec![
            "--batch".into(),
            self.batch.to_string(),
            "--warmup".into(),
            self.warmup.to_string(),
            "--steps".into(),
            self.steps.to_string(),
            "--pairs".into(),
            self.pairs.to_string(),
        ]
        .into_iter()
        .chain(self.shards.then(|| "--shards".to_string()))
        .collect()
    }
}

/// One `mpirun` of the example: what rank 0 reported.
#[derive(Clone, Debug)]
struct RunResult {
    world_size: usize,
    /// Rank 0's whole steps.
    step_seconds: Vec<f64>,
    /// Per step, the slowest rank's forward, backward and optimizer step.
    compute_seconds: Vec<f64>,
    /// Per step, the fastest rank's gradient synchronisation: the exchange without waiting.
    sync_seconds: Vec<f64>,
    gradient_bytes: f64,
    raw: Value,
}

impl RunResult {
    fn median_step(&self) -> f64 {
        median(&self.step_seconds)
    }

    fn samples_per_s(&self, batch: usize) -> f64 {
        (self.world_size * batch) as f64 / self.median_step()
    }
}

fn median(values: &[f64]) -> f64 {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    match sorted.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => sorted[n / 2],
        n => (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0,
    }
}

/// min, median, max.
fn spread(values: &[f64]) -> (f64, f64, f64) {
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    (min, median(values), max)
}

/// Why the suite cannot run here, if it cannot.
pub fn unavailable_reason() -> Option<String> {
    match Command::new("mpirun").arg("--version").output() {
        Ok(out) if String::from_utf8_lossy(&out.stdout).contains("Open MPI") => None,
        _ => Some(
            "Open MPI's mpirun not found (apt-get install openmpi-bin libopenmpi-dev \
             libclang-dev)"
                .into(),
        ),
    }
}

/// The 1-, 5- and 15-minute load averages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// `mpirun` allowed as root (CI machines run as root), one rayon thread per rank; the caller
/// adds its options, the rank count and the program.
pub(super) fn mpirun_one_thread_per_rank() -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.arg("--allow-run-as-root")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("RAYON_NUM_THREADS", "1");
    cmd
}

fn run_once(exe: &std::path::Path, ranks: usize, args: &DdpArgs) -> TaskResult<RunResult> {
    let mut cmd = mpirun_one_thread_per_rank();
    cmd.args(["--bind-to", "core", "-np"])
        .arg(ranks.to_string())
        .arg(exe)
        .args([args.batch, args.warmup, args.steps].map(|v| v.to_string()));
    let stdout = output_checked(&mut cmd)?;
    let raw: Value = stdout
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .ok_or_else(|| format!("no JSON line from ddp_bench:\n{stdout}"))?;
    let series = |key: &str| -> Vec<f64> {
        raw[key]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    };
    Ok(RunResult {
        world_size: raw["world_size"].as_u64().unwrap_or(0) as usize,
        step_seconds: series("step_seconds"),
        compute_seconds: series("compute_seconds_slowest_rank"),
        sync_seconds: series("sync_seconds_fastest_rank"),
        gradient_bytes: raw["gradient_bytes"].as_f64().unwrap_or(f64::NAN),
        raw,
    })
}

/// The measured figures of one world size over all its runs (medians over steps, then the
/// median over runs).
struct Side {
    samples_per_s: (f64, f64, f64),
    step_ms: f64,
    compute_ms: f64,
    sync_ms: f64,
}

fn summarise(runs: &[RunResult], batch: usize) -> Side {
    let over_runs =
        |f: &dyn Fn(&RunResult) -> f64| 1e3 * median(&runs.iter().map(f).collect::<Vec<_>>());
    let sps: Vec<f64> = runs.iter().map(|r| r.samples_per_s(batch)).collect();
    Side {
        samples_per_s: spread(&sps),
        step_ms: over_runs(&|r| r.median_step()),
        compute_ms: over_runs(&|r| median(&r.compute_seconds)),
        sync_ms: over_runs(&|r| median(&r.sync_seconds)),
    }
}

/// The closing note: what the numbers say about the scaling.
fn closing_note(one: &Side, two: &Side, gradient_mb: f64, load: (&str, &str)) -> String {
    let speedup = two.samples_per_s.1 / one.samples_per_s.1;
    let sync_share = 100.0 * two.sync_ms / two.step_ms;
    let bandwidth = gradient_mb / two.sync_ms.max(1e-6); // MB per ms = GB/s
    let waiting = (two.step_ms - two.compute_ms - two.sync_ms).max(0.0);
    format!(
        "2 ranks process {speedup:.2}x the samples/s of 1 rank ({:.0}% of linear scaling). \
         A 2-rank step takes {:.1} ms against {:.1} ms for 1 rank at the same per-rank batch. \
         Computation (forward, backward, Adam; the slower rank's) is {:.1} ms against {:.1} ms \
         alone ({:+.0}%): the two ranks share the machine's caches, memory bandwidth and any \
         other load on it. The gradient synchronisation of {gradient_mb:.1} MB (one bucket: \
         flatten, Open MPI all-reduce through shared memory, copy back) is {:.1} ms \
         ({sync_share:.0}% of the step, {bandwidth:.2} GB/s), measured on the rank that arrived \
         last so that it excludes waiting; the remaining {waiting:.1} ms is rank 0 waiting for \
         the slower rank. Gradients are exchanged after backward, without overlap, so the \
         synchronisation adds to every step in full. Load average {} before, {} after: on a \
         loaded machine the ranks wait for each other's time slices and the figures say more \
         about the load than about Tessera.",
        50.0 * speedup,
        two.step_ms,
        one.step_ms,
        two.compute_ms,
        one.compute_ms,
        100.0 * (two.compute_ms / one.compute_ms - 1.0),
        two.sync_ms,
        load.0,
        load.1,
    )
}

/// Runs the suite: builds the example, alternates 1-rank and 2-rank runs, prints the table and
/// the note, writes `target/bench/ddp.json`.
pub fn run(args: &DdpArgs) -> TaskResult<()> {
    if let Some(reason) = unavailable_reason() {
        println!("==> bench {NAME}: skipped: {reason}");
        return Ok(());
    }
    if args.pairs == 0 || args.steps == 0 || args.batch == 0 {
        return Err("--pairs, --steps and --batch must be at least 1".into());
    }
    if args.shards {
        return crate::bench::ddp_shard::run(args);
    }
    println!("==> bench {NAME}: building the ddp_bench example (release, --features mpi)");
    run_checked(&mut cargo([
        "build",
        "--release",
        "-p",
        "tessera-distributed",
        "--features",
        "mpi",
        "--example",
        "ddp_bench",
    ]))?;
    let exe = target_dir()
        .join("release")
        .join("examples")
        .join("ddp_bench");
    let load_before = load_average();
    let mut one = Vec::new();
    let mut two = Vec::new();
    for pair in 0..args.pairs {
        let order = if pair % 2 == 0 { [1, 2] } else { [2, 1] };
        for ranks in order {
            let result = run_once(&exe, ranks, args)?;
            println!(
                "    run {}: {ranks} rank(s): {:.0} samples/s, step {:.1} ms, sync {:.1} ms",
                pair + 1,
                result.samples_per_s(args.batch),
                1e3 * result.median_step(),
                1e3 * median(&result.sync_seconds)
            );
            if ranks == 1 { &mut one } else { &mut two }.push(result);
        }
    }
    let load_after = load_average();
    let (s1, s2) = (summarise(&one, args.batch), summarise(&two, args.batch));
    let gradient_mb = one.first().map_or(0.0, |r| r.gradient_bytes) / 1e6;
    println!(
        "\nddp: MLP 784-512-512-10 training step (f32, Adam), CPU backend, {} samples per rank \
         and step, 1 thread per rank; samples/s over all ranks, min/median/max of {} runs\n",
        args.batch, args.pairs
    );
    println!("| ranks | samples/s (min / median / max) | step ms | compute ms | sync ms |");
    println!("| ---: | ---: | ---: | ---: | ---: |");
    for (ranks, side) in [(1, &s1), (2, &s2)] {
        let (lo, mid, hi) = side.samples_per_s;
        println!(
            "| {ranks} | {lo:.0} / {mid:.0} / {hi:.0} | {:.1} | {:.1} | {:.1} |",
            side.step_ms, side.compute_ms, side.sync_ms
        );
    }
    let note = closing_note(&s1, &s2, gradient_mb, (&load_before, &load_after));
    println!("\n{note}\n");
    let results = json!({
        "suite": NAME,
        "args": args.to_cli_args(),
        "machine": crate::bench::machine_description(),
        "load_average_before": load_before,
        "load_average_after": load_after,
        "runs": one.iter().chain(&two).map(|r| r.raw.clone()).collect::<Vec<_>>(),
        "summary": {
            "samples_per_s_median": { "1": s1.samples_per_s.1, "2": s2.samples_per_s.1 },
            "speedup": s2.samples_per_s.1 / s1.samples_per_s.1,
            "step_ms": { "1": s1.step_ms, "2": s2.step_ms },
            "compute_ms": { "1": s1.compute_ms, "2": s2.compute_ms },
            "sync_ms_per_step_2_ranks": s2.sync_ms,
        },
        "note": note,
    });
    let path = write_results(NAME, &results)?;
    println!("results written to {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_spreads() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(spread(&[2.0, 5.0, 1.0]), (1.0, 2.0, 5.0));
    }

    #[test]
    fn the_note_states_the_measured_scaling() {
        let one = Side {
            samples_per_s: (900.0, 1000.0, 1100.0),
            step_ms: 64.0,
            compute_ms: 64.0,
            sync_ms: 0.0,
        };
        let two = Side {
            samples_per_s: (1500.0, 1600.0, 1700.0),
            step_ms: 80.0,
            compute_ms: 68.0,
            sync_ms: 10.0,
        };
        let note = closing_note(&one, &two, 2.68, ("1.0", "1.2"));
        assert!(note.contains("1.60x"), "{note}");
        assert!(note.contains("80% of linear"), "{note}");
        assert!(
            note.contains("68.0 ms against 64.0 ms alone (+6%)"),
            "{note}"
        );
        assert!(
            note.contains("is 10.0 ms (12% of the step, 0.27 GB/s)"),
            "{note}"
        );
        assert!(note.contains("remaining 2.0 ms"), "{note}");
    }
}
