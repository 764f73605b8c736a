//! `tessera-bench`: runs one benchmark suite on one Tessera backend (in one precision) and
//! prints one JSON record per line on stdout. `cargo xtask bench` builds it in release and runs
//! it; running it by hand works too:
//! `cargo run --release -p xtask --bin tessera-bench -- --precision bf16 mlp --reps 20`.
//!
//! `tessera-bench lifecycle-report DIR [--machine TEXT] [--gpu NAME]` instead renders the lifecycle report
//! (`lifecycle.{md,json,svg}`) of the record files `DIR/*.jsonl` that earlier runs wrote: the
//! gpu-check bundle's last step, on a machine without `cargo xtask`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use xtask::bench::MeasureArgs;

/// The word that selects the report mode instead of a measurement.
const REPORT_COMMAND: &str = "lifecycle-report";

/// Measures one Tessera benchmark suite; prints JSON records, one per line.
#[derive(Debug, Parser)]
#[command(name = "tessera-bench", version)]
struct Cli {
    #[command(flatten)]
    bench: MeasureArgs,
}

/// `tessera-bench lifecycle-report DIR`: the lifecycle report of the records in DIR/*.jsonl.
#[derive(Debug, Parser)]
#[command(name = "tessera-bench lifecycle-report")]
struct ReportCli {
    /// Folder of `*.jsonl` files of `tessera-bench` output; the report is written there.
    dir: PathBuf,
    /// The machine, for the report's heading [default: this CPU and its core count].
    #[arg(long)]
    machine: Option<String>,
    /// The accelerator, added to the heading (e.g. `NVIDIA H200`; empty: none).
    #[arg(long)]
    gpu: Option<String>,
}

/// Renders the lifecycle report of `cli.dir` and prints it.
fn report(cli: ReportCli) -> ExitCode {
    let mut machine = cli
        .machine
        .unwrap_or_else(xtask::bench::machine_description);
    if let Some(gpu) = cli.gpu.filter(|g| !g.trim().is_empty()) {
        machine = format!("{machine}; GPU: {}", gpu.trim());
    }
    match xtask::bench::lifecycle_files::report_folder(&cli.dir, &machine) {
        Ok(markdown) => {
            println!("{markdown}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tessera-bench {REPORT_COMMAND}: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    if std::env::args().nth(1).as_deref() == Some(REPORT_COMMAND) {
        let words = std::env::args().skip(1);
        return report(ReportCli::parse_from(words));
    }
    // Keep freed tensor memory for reuse: a training program's choice (see tessera_cpu::tune_allocator).
    tessera_cpu::tune_allocator();
    let cli = Cli::parse();
    // A training suite computes on this thread as one of the pool's, as a training program
    // does (`train`); the inference suites keep rayon's default pool, as an inference program
    // that does not opt in (at batch 1 on two cores, joining made the CNN's latency worse).
    let pool = if cli.bench.suite.is_inference() {
        "rayon's default pool (an inference suite)".to_string()
    } else {
        tessera_cpu::join_thread_pool().to_string()
    };
    if cfg!(debug_assertions) {
        eprintln!("tessera-bench: warning: this is a debug build; its numbers mean little");
    }
    let mut stdout = std::io::stdout().lock();
    // What the records depend on besides the code: the CPU backend's GEMM path and threads.
    let info = serde_json::json!({ "tessera_info": {
        "cpu_gemm": tessera_cpu::gemm_description(),
        "rayon_threads": tessera_cpu::default_pool_threads(),
        "thread_pool": pool,
    }});
    if writeln!(stdout, "{info}").is_err() {
        return ExitCode::FAILURE;
    }
    let mut write_error = None;
    let outcome = xtask::bench::backend::measure(
        cli.bench.backend,
        &cli.bench.suite,
        cli.bench.precision,
        &cli.bench.suite.protocol(),
        &mut |record| {
            // Flush each record at once so a long run shows progress to whoever reads the pipe.
            let written =
                writeln!(stdout, "{}", record.to_json_line()).and_then(|()| stdout.flush());
            if let Err(e) = written {
                write_error.get_or_insert(e);
            }
        },
    );
    if let Some(e) = write_error {
        eprintln!("tessera-bench: could not write a record: {e}");
        return ExitCode::FAILURE;
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tessera-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
