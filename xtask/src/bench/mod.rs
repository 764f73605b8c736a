//! `cargo xtask bench <suite>`: measures Tessera and, where it can, numpy on the same workload,
//! prints a comparison table and writes `target/bench/<suite>.json`. Nothing asserts speed.
//!
//! Tessera's side runs in the `tessera-bench` binary, built in release (see [`tessera`]); the
//! peer is a Python script under `xtask/peers/` (see [`numpy`]). Both print one [`record::Record`]
//! per line as JSON and follow the same [`timing::Protocol`].

pub mod backend;
pub mod collect;
pub mod numpy;
pub mod record;
pub mod report;
pub mod suites;
pub mod tessera;
pub mod timing;

use clap::Args;

use crate::TaskResult;
use backend::BackendKind;
use numpy::PeerRun;
use suites::SuiteCommand;

/// Arguments of `cargo xtask bench` (and of `tessera-bench`).
#[derive(Debug, Clone, PartialEq, Args)]
pub struct BenchArgs {
    /// The Tessera backend to measure.
    #[arg(long, value_enum, default_value_t, global = true)]
    pub backend: BackendKind,
    /// The suite to run.
    #[command(subcommand)]
    pub suite: SuiteCommand,
}

/// Runs the benchmark: Tessera in release, then the numpy peer, then the table and the file.
pub fn run(args: &BenchArgs) -> TaskResult<()> {
    let suite = args.suite.name();
    println!(
        "==> bench {suite}: Tessera on {} (release build of tessera-bench)",
        args.backend.name()
    );
    let ours = tessera::measure(args.backend, &args.suite)?;
    println!("==> bench {suite}: numpy peer");
    let peer = numpy::measure(&args.suite)?;
    let peer_records = match &peer {
        PeerRun::Ran(out) => {
            for info in &out.info {
                println!("    numpy: {}", info.get("peer_info").unwrap_or(info));
            }
            out.records.as_slice()
        }
        PeerRun::Skipped(reason) => {
            println!("    numpy skipped: {reason}");
            &[]
        }
    };
    println!();
    match &args.suite {
        SuiteCommand::Gemm(_) => {
            println!("gemm: C = A·B, square n×n f32; GFLOP/s = 2·n³ / median time");
            println!(
                "{}",
                report::throughput_table(&ours.records, "numpy", peer_records)
            );
        }
    }
    let results = report::results_json(suite, &args.suite.to_cli_args(), &ours.records, &peer);
    let path = report::write_results(suite, &results)?;
    println!("\nresults written to {}", path.display());
    Ok(())
}
