//! `cargo xtask bench [suite]`: measures Tessera on every backend present and, where they can
//! run, its peers (numpy, PyTorch) on the same workloads; prints comparison tables and writes
//! `target/bench/<suite>.json`. Without a suite it runs them all and also writes the lifecycle
//! report (`target/bench/lifecycle.{md,json,svg}`). Nothing asserts speed; a saved baseline,
//! when there is one, is compared and regressions beyond the noise are printed.
//!
//! Tessera's side runs in the `tessera-bench` binary, built in release (see [`tessera`]); the
//! peers are Python scripts under `xtask/peers/` (see [`peer`]). Both print one
//! [`record::Record`] per line as JSON and follow the same [`timing::Protocol`], with the same
//! threads and CPUs (`--threads`, `--pin`, see [`run_env`]). Each suite alternates the sides
//! over `--pairs` rounds and reports the median of the per-round ratios (see [`pairs`]).

pub mod backend;
pub mod baseline;
pub mod collect;
pub mod ddp;
pub mod ddp_shard;
pub mod lifecycle;
pub mod lifecycle_files;
pub mod numpy;
pub mod pairs;
pub mod peer;
pub mod plot;
pub mod precision;
pub mod precision_ratios;
pub mod record;
pub mod report;
pub mod resident;
pub mod run_env;
pub mod suites;
pub mod tessera;
pub mod timing;

use std::path::PathBuf;

use clap::Args;

use crate::process::target_dir;
use crate::TaskResult;
use ::tessera::registry::BackendEntry;
use lifecycle::Lifecycle;
use pairs::Round;
use peer::{PeerKind, PeerRun};
use record::{Output, Record};
use run_env::RunEnv;
use suites::SuiteCommand;

/// Arguments of `cargo xtask bench`.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct BenchArgs {
    /// Tessera backends to measure, comma-separated (`tessera::registry`'s unchecked backends)
    /// [default: every backend present].
    #[arg(
        long = "backend",
        value_delimiter = ',',
        global = true,
        value_parser = backend::value_parser()
    )]
    pub backends: Vec<BackendEntry>,
    /// Measure Tessera only, without the Python peers.
    #[arg(long, global = true)]
    pub no_peers: bool,
    /// Baseline to compare with [default: target/bench/baseline.json, when it exists].
    #[arg(long, global = true)]
    pub baseline: Option<PathBuf>,
    /// Save this run's records as the baseline (at --baseline, or the default path).
    #[arg(long, global = true)]
    pub save_baseline: bool,
    /// Threads for each side: rayon's for Tessera; OpenMP, OpenBLAS, MKL and
    /// torch.set_num_threads for the peers [default: each side's own, every core].
    #[arg(long, global = true, value_parser = clap::value_parser!(u64).range(1..))]
    pub threads: Option<u64>,
    /// Pin both sides to the same CPUs (the first --threads of them, or all) with taskset.
    #[arg(long, global = true)]
    pub pin: bool,
    /// Alternating rounds per suite (Tessera, peers, Tessera, peers, ...); the ratios are the
    /// median of the per-round ratios, with min and max. The `mem` suite runs once.
    #[arg(long, global = true, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..))]
    pub pairs: u64,
    /// The suite to run [default: all of them, then the lifecycle report].
    #[command(subcommand)]
    pub suite: Option<SuiteCommand>,
}

/// Arguments of `tessera-bench`: one suite on one backend in one precision.
#[derive(Debug, Clone, PartialEq, Args)]
pub struct MeasureArgs {
    /// The Tessera backend to measure.
    #[arg(long, default_value = "cpu", value_parser = backend::value_parser())]
    pub backend: BackendEntry,
    /// The precision: f32, tf32 (CUDA: f32 matrix products on TF32 tensor cores) or bf16
    /// (the models' bf16 mixed-precision policy; the model suites only).
    #[arg(long, value_enum, default_value_t)]
    pub precision: precision::BenchPrecision,
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
        SuiteCommand::Mem(_) => {
            "mem: resident memory of training, MiB: before the unit, its peak above that, after"
        }
        SuiteCommand::Ddp(_) => "ddp: data-parallel training steps on 1 and 2 ranks",
        SuiteCommand::Precision(_) => {
            "precision: 16-bit compute against f32 (f32 master weights; peer: PyTorch's \
             torch.autocast on the CPU); gemm = C = A·B of n×n operands in that dtype, train = \
             one training step, *-memory = resident MiB of one product / step"
        }
        SuiteCommand::Decode(_) => {
            "decode: batch 1 from a Hugging Face folder; prefill = the prompt's forward pass, n = \
             prompt tokens; decode = greedy KV-cached tokens after it, n = new tokens; \
             decode-memory = resident MiB of one prefill + decode (the model loaded before)"
        }
        SuiteCommand::Gpt(_) => {
            "gpt: train = one step (forward, loss, backward, clip, AdamW), n = tokens; \
             generate = greedy KV-cached decoding at batch 1, n = new tokens (ms/token = median / n)"
        }
    }
}

/// What every suite of a run shares: the conditions and the `tessera-bench` binary.
struct RunContext {
    env: RunEnv,
    binary: PathBuf,
    backends: Vec<BackendEntry>,
    no_peers: bool,
    pairs: usize,
}

/// Runs one suite: rounds of Tessera on each backend, then each available peer; prints the
/// table of the median round, the per-pair ratios, and writes its results file. Returns the
/// aggregated records (one per side and case).
fn run_suite(suite: &SuiteCommand, ctx: &RunContext) -> TaskResult<Vec<Record>> {
    let name = suite.name();
    let rounds_wanted = match suite {
        // Resident memory is no timing: one round says it.
        SuiteCommand::Mem(_) => 1,
        _ => ctx.pairs,
    };
    let mut peers: Vec<(PeerKind, PeerRun)> = Vec::new();
    for kind in PeerKind::ALL.into_iter().filter(|k| k.covers(suite)) {
        let reason = if ctx.no_peers {
            Some("--no-peers".to_string())
        } else {
            kind.unavailable_reason()
        };
        if let Some(reason) = reason {
            println!("==> bench {name}: {} peer skipped: {reason}", kind.name());
            peers.push((kind, PeerRun::Skipped(reason)));
        } else {
            peers.push((kind, PeerRun::Ran(Output::default())));
        }
    }
    let mut rounds: Vec<Round> = Vec::new();
    for round in 1..=rounds_wanted {
        let mut records = Vec::new();
        for &backend in &ctx.backends {
            println!(
                "==> bench {name} [{round}/{rounds_wanted}]: Tessera on {} ({})",
                backend.name(),
                ctx.env.describe()
            );
            for (part, process) in suite.processes().iter().enumerate() {
                let out = tessera::measure(&ctx.binary, &ctx.env, backend, process)?;
                if round == 1 && part == 0 {
                    for info in &out.info {
                        println!("    tessera: {}", info.get("tessera_info").unwrap_or(info));
                    }
                }
                records.extend(out.records);
            }
        }
        for (kind, run) in peers.iter_mut() {
            let PeerRun::Ran(all) = run else { continue };
            println!(
                "==> bench {name} [{round}/{rounds_wanted}]: {} peer ({})",
                kind.name(),
                ctx.env.describe()
            );
            for (part, process) in suite.processes().iter().enumerate() {
                if let PeerRun::Ran(out) = kind.measure(process, &ctx.env)? {
                    if round == 1 && part == 0 {
                        for info in &out.info {
                            println!(
                                "    {}: {}",
                                kind.name(),
                                info.get("peer_info").unwrap_or(info)
                            );
                        }
                        all.info = out.info.clone();
                    }
                    records.extend(out.records.iter().cloned());
                }
            }
        }
        rounds.push(records);
    }
    let records = pairs::aggregate(&rounds);
    for (kind, run) in peers.iter_mut() {
        if let PeerRun::Ran(out) = run {
            out.records = records
                .iter()
                .filter(|r| r.framework == kind.name())
                .cloned()
                .collect();
        }
    }
    let ours: Vec<Record> = records
        .iter()
        .filter(|r| r.framework == "tessera")
        .cloned()
        .collect();
    println!("\n{} ({})", suite_caption(suite), ctx.env.describe());
    let ratios = pairs::pair_ratios(&rounds);
    let mut results = report::suite_results_json(name, &suite.to_cli_args(), &ours, &peers);
    if matches!(suite, SuiteCommand::Mem(_)) {
        println!("{}\n", report::memory_table(&records));
    } else if matches!(suite, SuiteCommand::Precision(_)) {
        print_precision_tables(&records, &ratios, &rounds);
        results["speedups_over_f32"] = serde_json::to_value(precision_ratios::speedups(&rounds))?;
        results["memory_ratios"] = serde_json::to_value(precision_ratios::memory_ratios(&rounds))?;
    } else {
        // Memory records (the decode suite's) are no throughput: they get the memory table.
        let timed: Vec<Record> = records
            .iter()
            .filter(|r| r.memory.is_none())
            .cloned()
            .collect();
        let memory_cases: Vec<String> = records
            .iter()
            .filter(|r| r.memory.is_some())
            .map(Record::case_label)
            .collect();
        let timed_ratios: Vec<pairs::PairRatio> = ratios
            .iter()
            .filter(|r| !memory_cases.iter().any(|c| r.case.starts_with(c.as_str())))
            .cloned()
            .collect();
        println!("{}\n", report::comparison_table(&timed));
        if !timed_ratios.is_empty() {
            println!("{}\n", pairs::ratio_table(&timed_ratios, rounds.len()));
        }
        if !memory_cases.is_empty() {
            println!("{}\n", report::memory_table(&records));
        }
    }
    results["conditions"] = serde_json::json!({
        "threads": ctx.env.threads,
        "pinned_cpus": ctx.env.cpus,
        "rounds": rounds.len(),
    });
    results["pair_ratios"] = serde_json::to_value(&ratios)?;
    results["rounds"] = serde_json::to_value(&rounds)?;
    let path = report::write_results(name, &results)?;
    println!("results written to {}\n", path.display());
    Ok(records)
}

/// The `precision` suite's tables: throughput (GEMM and training steps apart, their units
/// differ), Tessera / peer at the same precision, each side's 16-bit / f32, and memory.
fn print_precision_tables(records: &[Record], ratios: &[pairs::PairRatio], rounds: &[Round]) {
    let timed: Vec<Record> = records
        .iter()
        .filter(|r| r.memory.is_none())
        .cloned()
        .collect();
    let (gemm, train): (Vec<Record>, Vec<Record>) =
        timed.into_iter().partition(|r| r.samples_per_s.is_none());
    for table in [gemm, train] {
        if !table.is_empty() {
            println!("{}\n", report::comparison_table(&table));
        }
    }
    if !ratios.is_empty() {
        println!("{}\n", pairs::ratio_table(ratios, rounds.len()));
    }
    let speedups = precision_ratios::speedups(rounds);
    if !speedups.is_empty() {
        let title = format!(
            "16-bit / f32 throughput of each side, median [min, max] of {} round(s); above 1: \
             16-bit is faster",
            rounds.len()
        );
        println!("{}\n", precision_ratios::ratio_table(&title, &speedups));
    }
    if records.iter().any(|r| r.memory.is_some()) {
        println!("{}\n", report::memory_table(records));
        let title = format!(
            "peak memory above the resident set before, median [min, max] of {} round(s); \
             below 1: less memory",
            rounds.len()
        );
        let memory = precision_ratios::memory_ratios(rounds);
        println!("{}\n", precision_ratios::ratio_table(&title, &memory));
    }
}

/// Writes the lifecycle report of `records` (Markdown, JSON, SVG) and prints the Markdown.
fn write_lifecycle(records: &[Record]) -> TaskResult<()> {
    let report = Lifecycle::from_records(records);
    let machine = machine_description();
    let dir = target_dir().join("bench");
    let (markdown, [md, json, svg]) = lifecycle_files::write_files(&report, &machine, &dir)?;
    println!("==> lifecycle report\n\n{markdown}");
    println!(
        "written to {}, {} and {}",
        md.display(),
        json.display(),
        svg.display()
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
    // Runs under mpirun, not in tessera-bench: see `ddp`.
    if let Some(SuiteCommand::Ddp(ddp_args)) = &args.suite {
        let ddp_args = ddp::DdpArgs {
            pairs: args.pairs as usize,
            ..ddp_args.clone()
        };
        return ddp::run(&ddp_args);
    }
    let backends = if args.backends.is_empty() {
        backend::present()
    } else {
        args.backends.clone()
    };
    let suites = match &args.suite {
        Some(suite) => vec![suite.clone()],
        None => SuiteCommand::all_defaults(),
    };
    let env = RunEnv::for_this_machine(args.threads.map(|t| t as usize), args.pin)?;
    println!("==> bench: building tessera-bench (release)");
    let ctx = RunContext {
        env,
        binary: tessera::build()?,
        backends,
        no_peers: args.no_peers,
        pairs: args.pairs as usize,
    };
    let mut records = Vec::new();
    for suite in &suites {
        if let Some(reason) = suite.unavailable_reason() {
            println!("==> bench {}: skipped: {reason}\n", suite.name());
            continue;
        }
        records.extend(run_suite(suite, &ctx)?);
    }
    if args.suite.is_none() {
        // The lifecycle report is of f32 runs: the precision suite's cases have their own tables.
        let timed: Vec<Record> = records
            .iter()
            // The precision suite's records compare precisions, not lifecycle phases.
            .filter(|r| r.memory.is_none() && r.suite != suites::precision::NAME)
            .cloned()
            .collect();
        write_lifecycle(&timed)?;
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
    fn the_ddp_suite_parses_with_the_global_pairs() {
        // Two arguments named `pairs` (the global u64, the suite's usize) made clap panic here.
        let cli = Cli::try_parse_from(["bench", "ddp", "--shards", "--pairs", "2"]).unwrap();
        assert_eq!(cli.bench.pairs, 2);
        match cli.bench.suite {
            Some(SuiteCommand::Ddp(ddp)) => assert!(ddp.shards),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn no_suite_means_all_and_flags_go_anywhere() {
        let cli = Cli::try_parse_from(["bench"]).unwrap();
        assert_eq!(cli.bench.suite, None);
        assert!(cli.bench.backends.is_empty());
        let cli = Cli::try_parse_from(["bench", "mlp", "--backend", "cpu", "--no-peers"]).unwrap();
        let cpu = ::tessera::registry::lookup("cpu").unwrap();
        assert_eq!(cli.bench.backends, [cpu]);
        assert!(cli.bench.no_peers);
        assert!(matches!(cli.bench.suite, Some(SuiteCommand::Mlp(_))));
        assert_eq!(
            (cli.bench.threads, cli.bench.pin, cli.bench.pairs),
            (None, false, 3)
        );
    }

    #[test]
    fn threads_pin_and_pairs_parse_before_or_after_the_suite() {
        let cli = Cli::try_parse_from(["bench", "--threads", "1", "gemm", "--pin", "--pairs", "5"])
            .unwrap();
        assert_eq!(
            (cli.bench.threads, cli.bench.pin, cli.bench.pairs),
            (Some(1), true, 5)
        );
        assert!(Cli::try_parse_from(["bench", "--pairs", "0"]).is_err());
        assert!(Cli::try_parse_from(["bench", "--threads", "0"]).is_err());
    }
}
