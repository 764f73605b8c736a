//! The parent process: runs children over disjoint seed sequences, watches each with a
//! timeout, restarts a child after it aborted or hung (skipping the program that did it), and
//! collects a [`Summary`] with every failure and the program that caused it.

use crate::child::OpStats;
use crate::program::{Program, Sig, StepText};
use std::fmt;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What to run.
#[derive(Clone, Debug)]
pub struct Config {
    /// The fuzz executable (it runs the children as `<exe> child ...`).
    pub exe: PathBuf,
    /// The first seed.
    pub first_seed: u64,
    /// How many programs (at most), or unbounded when `None` (then `duration` must be set).
    pub programs: Option<u64>,
    /// How long to run (at most).
    pub duration: Option<Duration>,
    /// Children running at once.
    pub jobs: u64,
    /// A program whose child spends more CPU time than this on it is a hang (an endless loop);
    /// one that makes no progress for ten times this wall-clock time too (a deadlock). CPU
    /// time, not wall-clock time, so that a loaded machine does not make slow programs hang.
    pub timeout: Duration,
    /// The address-space limit of each child, in MiB.
    pub memory_mib: u64,
}

/// What kind of failure a program caused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// A public call panicked (caught by `catch_unwind`).
    Panic,
    /// An `Ok` result broke an invariant.
    Break,
    /// The child process died (abort, signal) while running the program.
    Abort,
    /// The program did not finish within the timeout.
    Hang,
}

/// One failure: the program's seed, the step (when known), what happened.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The kind.
    pub kind: FailureKind,
    /// The program's seed.
    pub seed: u64,
    /// The failing step, when the child could say.
    pub step: Option<usize>,
    /// The panic message, the broken invariant, the exit status and the end of the child's
    /// standard error.
    pub message: String,
}

/// The result of a run.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// Programs that ran to their end or to a failure.
    pub programs: u64,
    /// Steps that returned `Ok` and passed their checks.
    pub ok_steps: u64,
    /// Steps that returned a typed error.
    pub err_steps: u64,
    /// Steps that did not run (an input missing, over the work budget).
    pub skipped_steps: u64,
    /// Every failure.
    pub failures: Vec<Failure>,
    /// Per operation of the table (children that died lose theirs).
    pub op_stats: Vec<OpStats>,
    /// Wall-clock time of the run.
    pub elapsed: Duration,
}

impl Summary {
    /// How many failures of `kind` there were.
    pub fn count(&self, kind: FailureKind) -> usize {
        self.failures.iter().filter(|f| f.kind == kind).count()
    }

    /// True when nothing failed.
    pub fn is_clean(&self) -> bool {
        self.failures.is_empty()
    }

    /// The report with the failures' programs printed in full (`sigs` names the operations).
    pub fn report<'a>(&'a self, sigs: &'a [Sig]) -> impl fmt::Display + 'a {
        Report {
            summary: self,
            sigs,
        }
    }
}

struct Report<'a> {
    summary: &'a Summary,
    sigs: &'a [Sig],
}

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.summary;
        writeln!(
            f,
            "fuzz: {} programs in {:.1} s: {} steps Ok, {} typed errors, {} skipped",
            s.programs,
            s.elapsed.as_secs_f64(),
            s.ok_steps,
            s.err_steps,
            s.skipped_steps
        )?;
        writeln!(
            f,
            "fuzz: {} panics, {} aborts, {} hangs, {} invariant breaks",
            s.count(FailureKind::Panic),
            s.count(FailureKind::Abort),
            s.count(FailureKind::Hang),
            s.count(FailureKind::Break)
        )?;
        let stats = |i: usize| s.op_stats.get(i).copied().unwrap_or_default();
        let never_ok: Vec<&str> = (0..self.sigs.len())
            .filter(|&i| stats(i).ok == 0)
            .map(|i| self.sigs[i].name)
            .collect();
        let never_run: Vec<&str> = (0..self.sigs.len())
            .filter(|&i| stats(i).ok + stats(i).err == 0)
            .map(|i| self.sigs[i].name)
            .collect();
        writeln!(
            f,
            "fuzz: {} operations; never ran: {never_run:?}; never Ok: {never_ok:?}",
            self.sigs.len()
        )?;
        for failure in &s.failures {
            writeln!(f)?;
            let step = failure.step.map_or("?".to_string(), |i| i.to_string());
            writeln!(
                f,
                "{:?} in program {} at step {step}: {}",
                failure.kind, failure.seed, failure.message
            )?;
            let program = Program::generate(failure.seed, self.sigs);
            write!(f, "{}", program.display(self.sigs))?;
            if let Some(i) = failure.step {
                if let Some(st) = program.steps.get(i) {
                    writeln!(f, "// failing step: {}", StepText(st, self.sigs))?;
                }
            }
        }
        Ok(())
    }
}

/// Runs the fuzzer and returns its summary.
pub fn run(config: &Config) -> Summary {
    let started = Instant::now();
    let deadline = config.duration.map(|d| started + d);
    let jobs = config.jobs.max(1);
    let summary = Arc::new(Mutex::new(Summary::default()));
    std::thread::scope(|scope| {
        for j in 0..jobs {
            let summary = Arc::clone(&summary);
            scope.spawn(move || {
                let count = config
                    .programs
                    .map(|n| n.saturating_sub(j).div_ceil(jobs))
                    .unwrap_or(u64::MAX);
                supervise(config, j, jobs, count, deadline, &summary);
            });
        }
    });
    let mut summary = Arc::try_unwrap(summary)
        .map(|m| m.into_inner().unwrap_or_default())
        .unwrap_or_default();
    summary.failures.sort_by_key(|f| f.seed);
    summary.elapsed = started.elapsed();
    summary
}

/// A line from a child, or the end of its output.
enum Event {
    Line(String),
    Closed,
}

/// Runs children for the seeds `first + j + k * jobs`, `k < count`, until done or past the
/// deadline, restarting after a child dies or hangs.
fn supervise(
    config: &Config,
    j: u64,
    jobs: u64,
    count: u64,
    deadline: Option<Instant>,
    summary: &Mutex<Summary>,
) {
    let mut k = 0u64;
    while k < count && deadline.is_none_or(|d| Instant::now() < d) {
        let first = config
            .first_seed
            .wrapping_add(j)
            .wrapping_add(k.wrapping_mul(jobs));
        let remaining = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        let mut cmd = Command::new(&config.exe);
        cmd.arg("child")
            .args(["--first", &first.to_string()])
            .args(["--stride", &jobs.to_string()])
            .args(["--count", &(count - k).to_string()])
            .args(["--memory-mib", &config.memory_mib.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(r) = remaining {
            cmd.args(["--deadline-ms", &r.as_millis().to_string()]);
        }
        // Every other job's programs run on a main thread joined to rayon's pool.
        if j % 2 == 1 {
            cmd.arg("--join-pool");
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                record(
                    summary,
                    FailureKind::Abort,
                    first,
                    None,
                    format!("cannot start a child: {e}"),
                );
                return;
            }
        };
        let (tx, rx) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(Event::Line(l)).is_err() {
                            return;
                        }
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send(Event::Closed);
        });
        let stderr_tail = Arc::new(Mutex::new(String::new()));
        let tail = Arc::clone(&stderr_tail);
        let mut stderr = child.stderr.take().expect("piped");
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                if let Ok(mut t) = tail.lock() {
                    t.push_str(&String::from_utf8_lossy(&buf[..n]));
                    let excess = t.len().saturating_sub(2000);
                    if excess > 0 {
                        let cut = (excess..t.len())
                            .find(|&i| t.is_char_boundary(i))
                            .unwrap_or(0);
                        t.drain(..cut);
                    }
                }
            }
        });
        let mut current: Option<u64> = None;
        let mut step: Option<usize> = None;
        let mut exited = false;
        let mut since = (Instant::now(), cpu_time(child.id()));
        loop {
            match rx.recv_timeout(Duration::from_millis(250)) {
                Ok(Event::Line(line)) => {
                    since = (Instant::now(), cpu_time(child.id()));
                    if let Some(i) = line.strip_prefix("STEP ").and_then(|i| i.parse().ok()) {
                        step = Some(i);
                    } else if handle(&line, &mut current, &mut k, summary) {
                        exited = true;
                    }
                    if !line.starts_with("STEP") {
                        step = None;
                    }
                }
                Ok(Event::Closed) => break,
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    let cpu = cpu_time(child.id()).saturating_sub(since.1);
                    let wall = since.0.elapsed();
                    if cpu < config.timeout && wall < 10 * config.timeout {
                        continue;
                    }
                    let _ = child.kill();
                    let seed = current.unwrap_or(first);
                    record(
                        summary,
                        FailureKind::Hang,
                        seed,
                        step,
                        format!("no progress after {cpu:?} of CPU time ({wall:?} wall-clock)"),
                    );
                    let _ = child.wait();
                    k += 1;
                    current = None;
                    exited = true;
                    break;
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            }
        }
        let status = child.wait();
        // A child that died could not remove its scratch folder.
        let _ = std::fs::remove_dir_all(
            std::env::temp_dir().join(format!("tessera-fuzz-{}", child.id())),
        );
        if let Some(seed) = current {
            let tail = stderr_tail.lock().map(|t| t.clone()).unwrap_or_default();
            record(
                summary,
                FailureKind::Abort,
                seed,
                step,
                format!(
                    "the child died ({status:?}); its stderr ends: {}",
                    tail.trim()
                ),
            );
            k += 1;
        } else if !exited {
            let tail = stderr_tail.lock().map(|t| t.clone()).unwrap_or_default();
            record(
                summary,
                FailureKind::Abort,
                first,
                None,
                format!(
                    "the child died between programs ({status:?}): {}",
                    tail.trim()
                ),
            );
            k += 1;
        }
        if exited && current.is_none() && k >= count {
            break;
        }
        if exited && deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
    }
}

/// The CPU time (user and system) process `pid` has used so far; zero where it cannot be read
/// (then only the wall-clock limit applies).
fn cpu_time(pid: u32) -> Duration {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return Duration::ZERO;
    };
    // The command name (field 2) may contain spaces: count fields after its closing paren.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return Duration::ZERO;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    // SAFETY: sysconf only reads a system constant.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let per_second = if per_second > 0 {
        per_second as u64
    } else {
        100
    };
    Duration::from_millis(ticks * 1000 / per_second)
}

/// Handles one protocol line; returns true on `EXIT`.
fn handle(line: &str, current: &mut Option<u64>, k: &mut u64, summary: &Mutex<Summary>) -> bool {
    let mut parts = line.splitn(5, ' ');
    let word = parts.next().unwrap_or("");
    let mut num = || {
        parts
            .next()
            .and_then(|p| p.parse::<u64>().ok())
            .unwrap_or(0)
    };
    match word {
        "START" => *current = Some(num()),
        "DONE" => {
            let (_, ok, err, skip) = (num(), num(), num(), num());
            let mut s = summary.lock().expect("not poisoned");
            s.programs += 1;
            s.ok_steps += ok;
            s.err_steps += err;
            s.skipped_steps += skip;
            *current = None;
            *k += 1;
        }
        "FAIL" => {
            let seed = num();
            let step = num() as usize;
            let kind = match parts.next() {
                Some("panic") => FailureKind::Panic,
                _ => FailureKind::Break,
            };
            let msg = parts.next().unwrap_or("").to_string();
            record(summary, kind, seed, Some(step), msg);
            summary.lock().expect("not poisoned").programs += 1;
            *current = None;
            *k += 1;
        }
        "STAT" => {
            let (op, ok, err, skip) = (num() as usize, num(), num(), num());
            let mut s = summary.lock().expect("not poisoned");
            if s.op_stats.len() <= op {
                s.op_stats.resize(op + 1, OpStats::default());
            }
            let st = &mut s.op_stats[op];
            st.ok += ok;
            st.err += err;
            st.skip += skip;
        }
        "EXIT" => return true,
        _ => {}
    }
    false
}

fn record(
    summary: &Mutex<Summary>,
    kind: FailureKind,
    seed: u64,
    step: Option<usize>,
    message: String,
) {
    summary
        .lock()
        .expect("not poisoned")
        .failures
        .push(Failure {
            kind,
            seed,
            step,
            message,
        });
}
