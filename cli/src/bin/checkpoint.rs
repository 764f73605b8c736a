//! `checkpoint`: the run checkpoints of a `train --save` folder. `list` shows them;
//! `consolidate` rewrites a sharded one (one file per rank, `train --sharded-checkpoints`) as
//! the ordinary one-file checkpoint, which any tool that reads run checkpoints takes.
//!
//! ```text
//! cargo run --release -p tessera-cli --bin checkpoint -- list runs/gpt
//! cargo run --release -p tessera-cli --bin checkpoint -- consolidate runs/gpt --all
//! ```

use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use tessera_core::{Error, Result};
use tessera_cpu::Cpu;
use tessera_nn::run::{self, Manifest, RunDir};

/// List the run checkpoints of a `train --save` folder, or consolidate sharded ones.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// One line per checkpoint: its step, whether it is one file or one file per rank, and
    /// its size.
    List {
        /// The run folder (`train --save`).
        dir: PathBuf,
    },
    /// Rewrites sharded checkpoints as ordinary one-file checkpoints (in place: the ranks'
    /// files are removed once the new file and its manifest are written). Needs the memory of
    /// the whole state in this one process.
    Consolidate {
        /// The run folder (`train --save`).
        dir: PathBuf,
        /// The step to consolidate [default: the newest checkpoint].
        #[arg(long)]
        step: Option<u64>,
        /// Consolidate every sharded checkpoint of the folder.
        #[arg(long, conflicts_with = "step")]
        all: bool,
    },
}

/// Opens `dir`, which must exist and hold a `checkpoints` folder.
fn open(dir: &Path) -> Result<RunDir> {
    if !dir.join("checkpoints").is_dir() {
        return Err(Error::checkpoint(format!(
            "{} is not a run folder (it has no `checkpoints` folder)",
            dir.display()
        )));
    }
    RunDir::open(dir)
}

fn list(dir: &Path) -> Result<()> {
    let dir = open(dir)?;
    for step in dir.steps()? {
        let manifest = Manifest::read(&dir.manifest_path(step))?;
        let (kind, bytes) = match manifest.is_sharded() {
            true => (
                format!("sharded over {} ranks", manifest.shards.len()),
                manifest.shards.iter().map(|s| s.bytes).sum::<u64>(),
            ),
            false => ("one file".to_string(), manifest.bytes),
        };
        println!("step {step}: {kind}, {bytes} bytes");
    }
    Ok(())
}

fn consolidate(dir: &Path, step: Option<u64>, all: bool) -> Result<()> {
    let dir = open(dir)?;
    let steps = dir.steps()?;
    let chosen: Vec<u64> = match (step, all) {
        (_, true) => steps,
        (Some(step), false) if steps.contains(&step) => vec![step],
        (Some(step), false) => {
            return Err(Error::checkpoint(format!(
                "{} has no checkpoint of step {step} (it has {steps:?})",
                dir.root().display()
            )))
        }
        (None, false) => steps.last().copied().into_iter().collect(),
    };
    for step in chosen {
        let sharded = Manifest::read(&dir.manifest_path(step))?.is_sharded();
        let path = run::consolidate_checkpoint(&dir, step, &Cpu::new())?;
        match sharded {
            true => println!("step {step}: consolidated into {}", path.display()),
            false => println!("step {step}: already one file ({})", path.display()),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let outcome = match &args.command {
        Command::List { dir } => list(dir),
        Command::Consolidate { dir, step, all } => consolidate(dir, *step, *all),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
