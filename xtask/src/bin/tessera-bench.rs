//! `tessera-bench`: runs one benchmark suite on one Tessera backend and prints one JSON record
//! per line on stdout. `cargo xtask bench` builds it in release and runs it; running it by hand
//! works too: `cargo run --release -p xtask --bin tessera-bench -- mlp --reps 20`.

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use xtask::bench::MeasureArgs;

/// Measures one Tessera benchmark suite; prints JSON records, one per line.
#[derive(Debug, Parser)]
#[command(name = "tessera-bench", version)]
struct Cli {
    #[command(flatten)]
    bench: MeasureArgs,
}

/// The threads of rayon's global pool: what the CPU backend runs on.
fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n: &usize| n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

fn main() -> ExitCode {
    // Keep freed tensor memory for reuse: a training program's choice (see tessera_cpu::tune_allocator).
    tessera_cpu::tune_allocator();
    let cli = Cli::parse();
    if cfg!(debug_assertions) {
        eprintln!("tessera-bench: warning: this is a debug build; its numbers mean little");
    }
    let mut stdout = std::io::stdout().lock();
    // What the records depend on besides the code: the CPU backend's GEMM path and threads.
    let info = serde_json::json!({ "tessera_info": {
        "cpu_gemm": tessera_cpu::gemm_description(),
        "rayon_threads": rayon_threads(),
    }});
    if writeln!(stdout, "{info}").is_err() {
        return ExitCode::FAILURE;
    }
    let mut write_error = None;
    let outcome = cli.bench.backend.measure(
        &cli.bench.suite,
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
