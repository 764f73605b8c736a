//! The chaos test: a training run killed with SIGKILL at random moments (during steps, saves
//! and evaluations; here a checkpoint follows every step, so many kills land in a save), then
//! resumed with `--resume` after each kill, ends bit for bit where the same run ends
//! uninterrupted; and the same for a 2-rank `mpirun` job one of whose ranks is killed (the job
//! then stops, and is relaunched with `--resume`). `TESSERA_CHAOS_KILLS=N` and
//! `TESSERA_CHAOS_MPI_KILLS=N` set the numbers of kills (default 10 and 3; `cargo xtask chaos
//! --kills N` runs the long version). Skips, printing why, without Fashion-MNIST (or, for the
//! MPI case, Open MPI).

use crate::common;

use common::{
    assert_same_state, data_available, final_state, mpi_train, skip_reason, summary, train,
    train_command, train_with_mpi,
};
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use tessera_nn::data::SplitMix64;
use tessera_nn::run::RunDir;

/// The run: the small MLP of [`common::run_args`], checkpointing after every step.
const EXTRA: [&str; 2] = ["--checkpoint-every", "1"];

#[test]
fn a_run_killed_at_random_moments_and_resumed_each_time_ends_bit_for_bit() {
    if !data_available() {
        return;
    }
    let kills = kills_from_env("TESSERA_CHAOS_KILLS", 10);
    let tmp = tempfile::tempdir().unwrap();
    let (whole, chaos) = (tmp.path().join("whole"), tmp.path().join("chaos"));
    let started = Instant::now();
    let reference = summary(&train(&whole, &EXTRA));
    let duration = started.elapsed();

    let mut rng = SplitMix64::new(2026);
    let mut extra = EXTRA.to_vec();
    extra.push("--resume");
    let (mut killed, mut finished_early) = (0, 0);
    let mut resumed_steps = Vec::new();
    while killed < kills {
        // Somewhere in the first 90% of a whole run (a resumed one has less left to do, so
        // some of these land after its end: it then finishes, and we start over).
        let delay = duration.mul_f64(0.9 * rng.below(1000) as f64 / 1000.0);
        let mut child = train_command(&chaos, &extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("train starts");
        std::thread::sleep(delay.max(Duration::from_millis(20)));
        match child.try_wait().unwrap() {
            Some(status) => {
                // It ended before the kill: it must have succeeded; start the run over.
                assert!(
                    status.success(),
                    "a run ended with {status} before its kill"
                );
                finished_early += 1;
                std::fs::remove_dir_all(&chaos).unwrap();
                continue;
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                killed += 1;
            }
        }
        let steps = RunDir::open(&chaos).unwrap().steps().unwrap();
        resumed_steps.push(steps.last().copied().unwrap_or(0));
    }
    let last = summary(&train(&chaos, &extra));
    println!(
        "chaos: {killed} kills (newest checkpoint after each: {resumed_steps:?}), {finished_early} \
         runs ended before their kill; resumed from {}",
        last["resumed_from_step"]
    );
    assert_eq!(last["test_accuracy"], reference["test_accuracy"]);
    let context = format!("after {killed} kills");
    assert_same_state(&final_state(&whole), &final_state(&chaos), &context);
}

/// The kill count from the environment variable `name`, else `default`.
fn kills_from_env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// The pids of the processes whose parent is `parent` (Linux: from `/proc/<pid>/stat`).
fn children_of(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // "pid (comm) state ppid ...": the fields after the last ')'.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse::<u32>().ok());
        if ppid == Some(parent) {
            out.push(pid);
        }
    }
    out
}

/// Waits for `child` to end, at most `limit`.
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn a_two_rank_job_with_one_rank_killed_resumes_bit_for_bit() {
    if let Some(reason) = skip_reason() {
        println!("skipped: {reason}");
        return;
    }
    if !Path::new("/proc/self/stat").exists() {
        println!("skipped: no /proc to find the ranks of a job");
        return;
    }
    let kills = kills_from_env("TESSERA_CHAOS_MPI_KILLS", 3);
    let train = train_with_mpi();
    let tmp = tempfile::tempdir().unwrap();
    let (whole, chaos) = (tmp.path().join("whole"), tmp.path().join("chaos"));
    let started = Instant::now();
    let reference = summary(&mpi_train(&train, &whole, &EXTRA).output().unwrap());
    let duration = started.elapsed();

    let mut rng = SplitMix64::new(27);
    let mut extra = EXTRA.to_vec();
    extra.push("--resume");
    let (mut killed, mut finished_early) = (0, 0);
    while killed < kills {
        let delay = duration.mul_f64(0.9 * rng.below(1000) as f64 / 1000.0);
        let mut job = mpi_train(&train, &chaos, &extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mpirun starts");
        std::thread::sleep(delay.max(Duration::from_millis(200)));
        let ranks = children_of(job.id());
        if ranks.len() < 2 || job.try_wait().unwrap().is_some() {
            // Not yet started or already done: let it finish and start over.
            let status = wait_at_most(&mut job, Duration::from_secs(120)).expect("job ends");
            assert!(
                status.success(),
                "a job ended with {status} before its kill"
            );
            finished_early += 1;
            std::fs::remove_dir_all(&chaos).unwrap();
            continue;
        }
        let victim = ranks[rng.below(ranks.len() as u64) as usize];
        let _ = std::process::Command::new("kill")
            .args(["-9", &victim.to_string()])
            .status();
        // mpirun stops the other rank and exits (the collective timeout bounds a hang).
        if wait_at_most(&mut job, Duration::from_secs(120)).is_none() {
            let _ = job.kill();
            panic!("mpirun did not end after rank {victim} was killed");
        }
        killed += 1;
    }
    let last = summary(&mpi_train(&train, &chaos, &extra).output().unwrap());
    println!(
        "chaos (2 ranks): {killed} rank kills, {finished_early} jobs ended before their kill; \
         resumed from {}",
        last["resumed_from_step"]
    );
    assert_eq!(last["test_accuracy"], reference["test_accuracy"]);
    let context = format!("2 ranks, after {killed} kills");
    assert_same_state(&final_state(&whole), &final_state(&chaos), &context);
}
