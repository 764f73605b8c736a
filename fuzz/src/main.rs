//! The `fuzz` command: `run` (the parent), `child` (what `run` starts), `show` and `replay`
//! (one program). See the crate docs.

use fuzz::child::{run_child, ChildJob};
use fuzz::driver::{run, Config};
use fuzz::machine::run_program;
use fuzz::ops::{sigs, table, FuzzBackend};
use fuzz::program::{BackendChoice, Program, StepText};
use std::process::ExitCode;
use std::time::Duration;

const USAGE: &str = "usage:
  fuzz run [--programs N | --minutes M] [--seed S] [--jobs J] [--timeout-s T] [--memory-mib MB]
  fuzz show --seed S
  fuzz replay --seed S
  fuzz child --first S --stride J --count N [--deadline-ms MS] [--memory-mib MB]";

/// The value after `--name`, parsed.
fn flag<T: std::str::FromStr>(args: &[String], name: &str) -> Option<T> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("child") => {
            run_child(&ChildJob {
                first: flag(&args, "--first").unwrap_or(0),
                stride: flag(&args, "--stride").unwrap_or(1),
                count: flag(&args, "--count").unwrap_or(1),
                deadline: flag::<u64>(&args, "--deadline-ms").map(Duration::from_millis),
                memory_mib: flag(&args, "--memory-mib").unwrap_or(0),
                join_pool: args.iter().any(|a| a == "--join-pool"),
            });
            ExitCode::SUCCESS
        }
        Some("run") => {
            let minutes: Option<f64> = flag(&args, "--minutes");
            let programs: Option<u64> = flag(&args, "--programs");
            let seed = flag(&args, "--seed").unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() << 20)
            });
            let config = Config {
                exe: std::env::current_exe().expect("the fuzz executable"),
                first_seed: seed,
                programs: programs.or(if minutes.is_some() { None } else { Some(1000) }),
                duration: minutes.map(|m| Duration::from_secs_f64(m * 60.0)),
                jobs: flag(&args, "--jobs").unwrap_or(2),
                timeout: Duration::from_secs(flag(&args, "--timeout-s").unwrap_or(30)),
                memory_mib: flag(&args, "--memory-mib").unwrap_or(3072),
            };
            println!(
                "fuzz: seeds from {seed}, {} children, {} MiB each, timeout {:?}",
                config.jobs, config.memory_mib, config.timeout
            );
            let summary = run(&config);
            print!("{}", summary.report(&sigs()));
            if summary.is_clean() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Some("show") => {
            let Some(seed) = flag(&args, "--seed") else {
                eprintln!("{USAGE}");
                return ExitCode::FAILURE;
            };
            let sigs = sigs();
            print!("{}", Program::generate(seed, &sigs).display(&sigs));
            ExitCode::SUCCESS
        }
        Some("replay") => {
            let Some(seed) = flag(&args, "--seed") else {
                eprintln!("{USAGE}");
                return ExitCode::FAILURE;
            };
            let program = Program::generate(seed, &sigs());
            match program.backend {
                BackendChoice::Cpu => replay::<tessera_cpu::Cpu>(&program),
                BackendChoice::Example => {
                    replay::<tessera_backend_example::ExampleBackend>(&program)
                }
            }
        }
        _ => {
            eprintln!("{USAGE}");
            ExitCode::FAILURE
        }
    }
}

/// Runs one program in this process and prints every step with its outcome.
fn replay<B: FuzzBackend>(program: &Program) -> ExitCode {
    fuzz::panics::install_quiet_hook();
    let sigs = sigs();
    let ops = table::<B>();
    let dir = std::env::temp_dir().join(format!("tessera-fuzz-replay-{}", std::process::id()));
    let report = run_program(program, &ops, dir, &mut |_| {});
    println!("// program {} on {:?}", program.seed, program.backend);
    for (step, result) in program.steps.iter().zip(&report.steps) {
        println!("{}\n    -> {result:?}", StepText(step, &sigs));
    }
    match report.failure {
        None => ExitCode::SUCCESS,
        Some(_) => ExitCode::FAILURE,
    }
}
