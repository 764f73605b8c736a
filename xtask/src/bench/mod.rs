//! `cargo xtask bench [suite]`: measures Tessera on every backend present and, where they can
//! run, its peers (numpy, PyTorch) on the same workloads; prints comparison tables and writes
//! `target/bench/<suite>.json`. Without a suite it runs them all and also writes the lifecycle
//! report (`target/bench/lifecycle.{md,json,svg}`). Nothing asserts speed; a saved baseline,
//! when there is one, is compared and regressions beyond the noise are printed.
//!
//! Tessera's side runs in the `tessera-bench` binary, built in release (see [`tessera`]); the
//! peers are Python scripts under `xtask/peers/` (see [`peer`]). Both print one
//! [`record::Record`] per line as JSON and follow the same [`timing::Protocol`].

pub mod backend;
pub mod baseline;
pub mod collect;
pub mod lifecycle;
pub mod numpy;
pub mod peer;
pub mod plot;
pub mod record;
pub mod report;
pub mod suites;
pub mod tessera;
pub mod timing;

use std::path::PathBuf;

use clap::Args;

use crate::process::target_dir;
use crate::TaskResult;
use backend::BackendKind;
use lifecycle::Lifecycle;
use peer::{PeerKind, PeerRun};
use record::Record;
use suites::SuiteCommand;

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct BenchArgs {
    /// Tessera backends to measure, comma-separated [default: every backend present].
    #[arg(long = "backend", value_enum, value_delimiter = ',', global = true)]
    pub backends: Vec<BackendKind>,
    /// Measure Tessera only, without the Python peers.
    #[arg(long, global = true)]
    pub no_peers: bool,
    /// Baseline to compare with [default: target/bench/baseline.json, when it exists].
    #[arg(long, global = true)]
    pub baseline: Option<PathBuf>,
    /// Save this run's records as the baseline (at --baseline, or the default path).
    #[arg(long, global = true)]
    pub save_baseline: bool,
    /// The suite to run [default: all of them, then the lifecycle report].
    #[command(subcommand)]
    pub suite: Option<SuiteCommand>,
}

/// Arguments of `tessera-bench`: one suite on one backend.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct MeasureArgs {
    /// The Tessera backend to measure.
    #[arg(long, value_enum, default_value_t)]
    pub backend: BackendKind,
    /// The suite to run.
    #[command(subcommand)]
    pub suite: SuiteCommand,
}

/// The default baseline file.
pub fn default_baseline() -> PathBuf {
    target_dir().join("bench").join("baseline.json")
}

/// The machine in one line, for report headings: CPU model, CPU count, OS and architecture.
pub fn machine_description() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    format!(
        "{}, {cpus} CPUs, {} {}",
        report::cpu_model().unwrap_or_else(|| "unknown CPU".to_string()),
        std::env::consts::OS,
        std::env::consts::ARCH
    )
}

/// What the table of a suite measures, printed above it.
fn suite_caption(suite: &SuiteCommand) -> &'static str {
    match suite {
        SuiteCommand::Gemm(_) => "gemm: C = A·B, square n×n f32; GFLOP/s = 2·n³ / median time",
        SuiteCommand::Mlp(_) => "mlp: one training step (forward, cross-entropy, backward, Adam)",
        SuiteCommand::Cnn(_) => "cnn: one training step (forward, cross-entropy, backward, Adam)",
        SuiteCommand::Infer(_) => "infer: one forward pass in eval mode, no graph",
        SuiteCommand::Prep(_) => "prep: decode + normalise + batch one Fashion-MNIST epoch",
        SuiteCommand::Eval(_) => "eval: one evaluate() pass over the Fashion-MNIST test set",
        SuiteCommand::Gpt(_) => {
            "gpt: train = one step (forward, loss, backward, clip, AdamW), n = tokens; \
             generate = greedy KV-cached decoding at batch 1, n = new tokens (ms/token = median / n)"
        }
    }
}

/// Runs one suite: Tessera on each backend, then each peer that covers it; prints its table
/// and writes its results file. Returns every record.
fn run_suite(
    suite: &SuiteCommand,
    backends: &[BackendKind],
    no_peers: bool,
) -> TaskResult<Vec<Record>> {
    let name = suite.name();
    let mut records = Vec::new();
    for &backend in backends {
        println!(
            "==> bench {name}: Tessera on {} (release build of tessera-bench)",
            backend.name()
        );
        records.extend(tessera::measure(backend, suite)?.records);
    }
    let ours = records.clone();
    let mut peers = Vec::new();
    for kind in PeerKind::ALL.into_iter().filter(|k| k.covers(suite)) {
        println!("==> bench {name}: {} peer", kind.name());
        let run = if no_peers {
            PeerRun::Skipped("--no-peers".to_string())
        } else {
            kind.measure(suite)?
        };
        match &run {
            PeerRun::Ran(out) => {
                for info in &out.info {
                    println!(
                        "    {}: {}",
                        kind.name(),
                        info.get("peer_info").unwrap_or(info)
                    );
                }
                records.extend(out.records.iter().cloned());
            }
            PeerRun::Skipped(reason) => println!("    {} skipped: {reason}", kind.name()),
        }
        peers.push((kind, run));
    }
    println!("\n{}", suite_caption(suite));
    println!("{}\n", report::comparison_table(&records));
    let results = report::suite_results_json(name, &suite.to_cli_args(), &ours, &peers);
    let path = report::write_results(name, &results)?;
    println!("results written to {}\n", path.display());
    Ok(records)
}

/// Writes the lifecycle report of `records` (Markdown, JSON, SVG) and prints the Markdown.
fn write_lifecycle(records: &[Record]) -> TaskResult<()> {
    let report = Lifecycle::from_records(records);
    let machine = machine_description();
    let dir = target_dir().join("bench");
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("could not create {}: {e}", dir.display()))?;
    let markdown = report.to_markdown(&machine);
    let md_path = dir.join("lifecycle.md");
    std::fs::write(&md_path, &markdown)
        .map_err(|e| format!("could not write {}: {e}", md_path.display()))?;
    let json_path = report::write_results("lifecycle", &report.to_json())?;
    let svg_path = dir.join("lifecycle.svg");
    plot::write_svg(&report, &machine, &svg_path)?;
    println!("==> lifecycle report\n\n{markdown}");
    println!(
        "written to {}, {} and {}",
        md_path.display(),
        json_path.display(),
        svg_path.display()
    );
    Ok(())
}

/// Compares `records` with the baseline (given, or the default one when it exists) and saves
/// them as the new baseline when asked.
fn guard_regressions(args: &BenchArgs, records: &[Record]) -> TaskResult<()> {
    let path = args.baseline.clone().unwrap_or_else(default_baseline);
    if path.is_file() {
        let before = baseline::load(&path)?;
        let changes = baseline::compare(&before, records);
        println!(
            "\n==> regression guard\n{}",
            baseline::report(&changes, &path)
        );
    } else if args.baseline.is_some() {
        return Err(format!("the baseline {} does not exist", path.display()).into());
    } else {
        println!(
            "\n(no baseline at {}: `cargo xtask bench --save-baseline` saves one)",
            path.display()
        );
    }
    if args.save_baseline {
        baseline::save(&path, records)?;
        println!("baseline saved to {}", path.display());
    }
    Ok(())
}

/// Runs the benchmark: each suite (one, or all), its tables and files, the lifecycle report
/// when all ran, then the regression guard.
pub fn run(args: &BenchArgs) -> TaskResult<()> {
    let backends = if args.backends.is_empty() {
        BackendKind::present()
    } else {
        args.backends.clone()
    };
    let suites = match &args.suite {
        Some(suite) => vec![suite.clone()],
        None => SuiteCommand::all_defaults(),
    };
    let mut records = Vec::new();
    for suite in &suites {
        if let Some(reason) = suite.unavailable_reason() {
            println!("==> bench {}: skipped: {reason}\n", suite.name());
            continue;
        }
        records.extend(run_suite(suite, &backends, args.no_peers)?);
    }
    if args.suite.is_none() {
        write_lifecycle(&records)?;
    }
    guard_regressions(args, &records)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        bench: BenchArgs,
    }

    #[test]
    fn no_suite_means_all_and_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["bench"]).unwrap();
        assert_eq!(cli.bench.suite, None);
        assert!(cli.bench.backends.is_empty());
        let cli = Cli::try_parse_from(["bench", "mlp", "--backend", "cpu", "--no-peers"]).unwrap();
        assert_eq!(cli.bench.backends, [BackendKind::Cpu]);
        assert!(cli.bench.no_peers);
        assert!(matches!(cli.bench.suite, Some(SuiteCommand::Mlp(_))));
    }
}
