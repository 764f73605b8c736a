//! The child process: runs programs one after the other under an address-space limit and
//! reports each on its standard output, one line per event, so that the parent knows which
//! program was running when the child aborted or stopped answering.
//!
//! Protocol (one line each, flushed at once):
//! * `START <seed>` before a program, `STEP <i>` before each of its steps;
//! * `DONE <seed> <ok> <err> <skip>` after a program that found nothing;
//! * `FAIL <seed> <step> <panic|break> <message>` after one that panicked or broke an
//!   invariant (the message on one line);
//! * `STAT <op> <ok> <err> <skip>` per operation of the table, then `EXIT`, at the end.

use crate::machine::{run_program, StepResult};
use crate::ops::table;
use crate::program::{BackendChoice, Program, Sig};
use std::io::Write;
use std::time::{Duration, Instant};
use tessera_backend_example::ExampleBackend;
use tessera_cpu::Cpu;

/// What a child runs: seeds `first, first + stride, ...`, at most `count` of them, stopping
/// early after `deadline`.
#[derive(Clone, Debug)]
pub struct ChildJob {
    /// The first seed.
    pub first: u64,
    /// The step between seeds.
    pub stride: u64,
    /// How many programs at most.
    pub count: u64,
    /// When to stop starting programs.
    pub deadline: Option<Duration>,
    /// The address-space limit in MiB (0: none).
    pub memory_mib: u64,
    /// Whether this process's main thread, which runs the programs, joins rayon's pool first
    /// (`tessera_cpu::join_thread_pool`, as the `train` command does); the driver sets it for
    /// every other job, so both thread set-ups are fuzzed.
    pub join_pool: bool,
}

/// Limits the address space of this process to `mib` MiB and disables core dumps, so that an
/// allocation the machine could not serve fails in the child instead of swapping the machine
/// (an abort, if it happens, is what the fuzzer looks for).
pub fn limit_memory(mib: u64) -> std::io::Result<()> {
    let set = |resource, value: u64| {
        let limit = libc::rlimit {
            rlim_cur: value as libc::rlim_t,
            rlim_max: value as libc::rlim_t,
        };
        // SAFETY: `setrlimit` reads the struct it is given and only changes this process's
        // limits; the pointer is to a live local.
        let rc = unsafe { libc::setrlimit(resource, &limit) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    set(libc::RLIMIT_CORE, 0)?;
    if mib > 0 {
        set(libc::RLIMIT_AS, mib << 20)?;
    }
    Ok(())
}

/// Per-operation counts of one child.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OpStats {
    /// Steps that returned `Ok` and passed every check.
    pub ok: u64,
    /// Steps that returned a typed error.
    pub err: u64,
    /// Steps that did not run.
    pub skip: u64,
}

/// Runs the job, printing the protocol lines; returns when done.
pub fn run_child(job: &ChildJob) {
    crate::panics::install_quiet_hook();
    if job.join_pool {
        tessera_cpu::join_thread_pool();
    }
    if let Err(e) = limit_memory(job.memory_mib) {
        eprintln!("fuzz child: cannot limit memory: {e}");
    }
    let started = Instant::now();
    let sigs: Vec<Sig> = crate::ops::sigs();
    let cpu = table::<Cpu>();
    let example = table::<ExampleBackend>();
    let mut stats = vec![OpStats::default(); sigs.len()];
    let scratch = std::env::temp_dir().join(format!("tessera-fuzz-{}", std::process::id()));
    let out = std::io::stdout();
    for k in 0..job.count {
        if job.deadline.is_some_and(|d| started.elapsed() >= d) {
            break;
        }
        let seed = job.first.wrapping_add(k.wrapping_mul(job.stride));
        line(&out, &format!("START {seed}"));
        let program = Program::generate(seed, &sigs);
        let dir = scratch.join(seed.to_string());
        let mut step_line = |i: usize| line(&out, &format!("STEP {i}"));
        let report = match program.backend {
            BackendChoice::Cpu => run_program(&program, &cpu, dir, &mut step_line),
            BackendChoice::Example => run_program(&program, &example, dir, &mut step_line),
        };
        let (mut ok, mut err, mut skip) = (0, 0, 0);
        for (step, r) in program.steps.iter().zip(&report.steps) {
            let s = &mut stats[step.op];
            match r {
                StepResult::Ok => (ok, s.ok) = (ok + 1, s.ok + 1),
                StepResult::Err(_) => (err, s.err) = (err + 1, s.err + 1),
                StepResult::Skipped(_) => (skip, s.skip) = (skip + 1, s.skip + 1),
                StepResult::Panic(_) | StepResult::Break(_) => {}
            }
        }
        match report.failure {
            None => line(&out, &format!("DONE {seed} {ok} {err} {skip}")),
            Some(i) => {
                let (kind, msg) = match &report.steps[i] {
                    StepResult::Panic(m) => ("panic", m.clone()),
                    StepResult::Break(m) => ("break", m.clone()),
                    _ => unreachable!("failures are panics or breaks"),
                };
                line(&out, &format!("FAIL {seed} {i} {kind} {}", one_line(&msg)));
            }
        }
    }
    for (i, s) in stats.iter().enumerate() {
        line(&out, &format!("STAT {i} {} {} {}", s.ok, s.err, s.skip));
    }
    line(&out, "EXIT");
    let _ = std::fs::remove_dir_all(&scratch);
}

/// Writes and flushes one protocol line.
fn line(out: &std::io::Stdout, text: &str) {
    let mut lock = out.lock();
    let _ = writeln!(lock, "{text}");
    let _ = lock.flush();
}

/// `text` on one line (newlines shown as `⏎`).
fn one_line(text: &str) -> String {
    text.replace('\n', " ⏎ ")
}
