//! `MpiCommunicator` and `DistributedDataParallel` across real processes: runs
//! `examples/mpi_check.rs` (built by `cargo test` itself when the tests have the `mpi` feature,
//! as in CI; otherwise by a nested cargo sharing this target folder) under
//! `mpirun --oversubscribe -np 2` (and 3).
//!
//! * 2 ranks at batch B/2 end every step with the parameters of 1 process at batch B (f64,
//!   1e-12) and bit-identical to each other;
//! * every collective and dtype agrees with values computed independently, and mismatched
//!   calls give typed errors;
//! * killing one rank (SIGKILL) makes the others fail with a typed timeout within the limit,
//!   and under a default `mpirun` the whole job ends within a bounded time (no hang).
//!
//! Skipped, printing why, when `mpirun` (Open MPI) is absent, unless `TESSERA_REQUIRE_MPI` is
//! set (CI sets it, after installing `openmpi-bin`, `libopenmpi-dev` and `libclang-dev`).

#[allow(dead_code)]
mod common;

use common::problem;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Why the tests cannot run here, if they cannot; with `TESSERA_REQUIRE_MPI=1` (CI) a
/// missing Open MPI fails instead.
fn missing_mpirun() -> Option<String> {
    let reason = mpirun_problem();
    if let (Some(reason), Some(_)) = (&reason, std::env::var_os("TESSERA_REQUIRE_MPI")) {
        panic!("TESSERA_REQUIRE_MPI is set but {reason}");
    }
    reason
}

fn mpirun_problem() -> Option<String> {
    match Command::new("mpirun").arg("--version").output() {
        Err(e) => Some(format!(
            "mpirun not found ({e}): apt-get install openmpi-bin libopenmpi-dev libclang-dev"
        )),
        Ok(out) if !String::from_utf8_lossy(&out.stdout).contains("Open MPI") => Some(format!(
            "mpirun is not Open MPI's ({}); these tests use Open MPI's options",
            String::from_utf8_lossy(&out.stdout).trim()
        )),
        Ok(_) => None,
    }
}

/// The example built with MPI: the one `cargo test` built beside this test when the tests are
/// built with the `mpi` feature (as CI builds them), otherwise built here once per test binary
/// (a nested cargo sharing this target folder).
fn mpi_check() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| built_example("mpi_check"))
}

/// Example `name` built with MPI (see [`mpi_check`]).
fn built_example(name: &str) -> PathBuf {
    if cfg!(feature = "mpi") {
        // target/<profile>/deps/mpi_ranks-<hash> -> target/<profile>/examples/<name>
        let exe = std::env::current_exe().expect("test binary path");
        let built = exe
            .parent()
            .and_then(Path::parent)
            .map(|profile_dir| profile_dir.join("examples").join(name))
            .expect("the test binary lies in target/<profile>/deps");
        assert!(built.exists(), "{} was not built", built.display());
        return built;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "tessera-distributed", "--features", "mpi"])
        .args(["--example", name, "--message-format", "json"]);
    // The profile this test was built with, so that the dependencies already built are
    // reused.
    let exe = std::env::current_exe().expect("test binary path");
    if exe.components().any(|c| c.as_os_str() == "release") {
        cmd.arg("--release");
    } else {
        cmd.args(["--profile", "test"]);
    }
    let out = cmd.stderr(Stdio::inherit()).output().expect("cargo starts");
    assert!(out.status.success(), "building examples/{name} failed");
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["target"]["name"] == name)
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports the example's executable")
}

/// A session folder of its own for one `mpirun`: two `mpirun`s starting at once (the tests run
/// in parallel) in the same temporary folder race on creating Open MPI 4's
/// `ompi.<host>.<uid>` there, one failing with "File exists".
fn session_dir() -> std::path::PathBuf {
    static LAUNCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Short: Open MPI puts Unix sockets below it (paths of at most 108 bytes).
    let dir = std::env::temp_dir().join(format!("tsr-mpi-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a session folder for mpirun");
    dir
}

/// Runs `mpi_check ARGS` on `ranks` processes with extra `mpirun` options and environment.
fn mpirun(ranks: usize, options: &[&str], env: &[(&str, &str)], args: &[&str]) -> Output {
    mpirun_program(mpi_check(), ranks, options, env, args)
}

/// Runs `program ARGS` on `ranks` processes with extra `mpirun` options and environment.
fn mpirun_program(
    program: &Path,
    ranks: usize,
    options: &[&str],
    env: &[(&str, &str)],
    args: &[&str],
) -> Output {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "--allow-run-as-root", "-np"])
        .arg(ranks.to_string())
        .env("OMPI_MCA_orte_tmpdir_base", session_dir())
        .args(options)
        .arg(program)
        .args(args)
        // CI runs as root; Open MPI refuses that without both variables (or the option).
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // One compute thread per rank: the ranks share the machine's cores.
        .env("RAYON_NUM_THREADS", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    // A hang is exactly what these tests exist to catch: never wait forever for mpirun.
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mpirun starts");
    let started = Instant::now();
    while child.try_wait().expect("mpirun status").is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            let _ = child.kill();
            panic!("mpirun {args:?} still running after 120 s: a hang");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("mpirun output")
}

fn text(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Reads a rank's parameters: `STEPS` rows of little-endian f64.
fn read_trajectory(path: &Path, per_step: usize) -> Vec<Vec<f64>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        bytes.len(),
        problem::STEPS * per_step * 8,
        "{}",
        path.display()
    );
    bytes
        .chunks(per_step * 8)
        .map(|step| {
            step.chunks(8)
                .map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")))
                .collect()
        })
        .collect()
}

#[test]
fn two_ranks_at_half_the_batch_train_like_one_process_and_stay_identical() {
    if let Some(reason) = missing_mpirun() {
        println!("skipped: {reason}");
        return;
    }
    let reference = problem::single_process_reference();
    let per_step = reference[0].len();
    // 256-byte buckets: the model's gradients travel in several all-reduces.
    for bucket_bytes in ["256", "26214400"] {
        let dir = tempfile::tempdir().unwrap();
        let out_dir = dir.path().to_str().unwrap();
        let out = mpirun(2, &[], &[], &["train", out_dir, bucket_bytes]);
        assert!(out.status.success(), "{}", text(&out));
        let rank0 = read_trajectory(&dir.path().join("rank0.f64"), per_step);
        let rank1 = read_trajectory(&dir.path().join("rank1.f64"), per_step);
        for step in 0..problem::STEPS {
            let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&rank0[step]),
                bits(&rank1[step]),
                "buckets of {bucket_bytes} B: the ranks differ after step {step}"
            );
            let diff = rank0[step]
                .iter()
                .zip(&reference[step])
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            assert!(
                diff < 1e-12,
                "buckets of {bucket_bytes} B, step {step}: {diff:e} from the single process"
            );
        }
        // The parameters moved: the comparison above compared trained models.
        let moved = rank0[problem::STEPS - 1]
            .iter()
            .zip(&problem::model_start())
            .any(|(a, b)| (a - b).abs() > 1e-3);
        assert!(moved, "training did not change the parameters");
    }
}

/// Reads `state.f64` and the names of `state.txt` of a sharded run.
fn read_state(dir: &Path) -> (String, Vec<u64>) {
    let names = std::fs::read_to_string(dir.join("state.txt")).expect("state names");
    let bytes = std::fs::read(dir.join("state.f64")).expect("state values");
    let bits = bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (names, bits)
}

#[test]
fn sharded_levels_train_bit_for_bit_like_plain_data_parallelism() {
    if let Some(reason) = missing_mpirun() {
        println!("skipped: {reason}");
        return;
    }
    let reference = problem::single_process_adamw_reference();
    let per_step = reference[0].len();
    let bits = |v: &[f64]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for ranks in [2, 4] {
        // 256-byte buckets: several buckets, each padded to a multiple of the world size.
        for bucket_bytes in ["256", "26214400"] {
            let mut runs = Vec::new();
            for level in ["0", "1", "2"] {
                let dir = tempfile::tempdir().unwrap();
                let out_dir = dir.path().to_str().unwrap();
                let out = mpirun(ranks, &[], &[], &["sharded", out_dir, level, bucket_bytes]);
                assert!(out.status.success(), "{}", text(&out));
                let mut trajectories: Vec<_> = (0..ranks)
                    .map(|r| read_trajectory(&dir.path().join(format!("rank{r}.f64")), per_step))
                    .collect();
                for (r, t) in trajectories.iter().enumerate() {
                    for step in 0..problem::STEPS {
                        assert_eq!(
                            bits(&t[step]),
                            bits(&trajectories[0][step]),
                            "level {level}, {ranks} ranks: rank {r} differs after step {step}"
                        );
                    }
                }
                runs.push((level, trajectories.swap_remove(0), read_state(dir.path())));
            }
            let (_, plain, plain_state) = &runs[0];
            for (level, trajectory, state) in &runs[1..] {
                for step in 0..problem::STEPS {
                    assert_eq!(
                        bits(&trajectory[step]),
                        bits(&plain[step]),
                        "level {level}, {ranks} ranks, buckets of {bucket_bytes} B: parameters \
                         differ from plain data parallelism after step {step}"
                    );
                }
                assert_eq!(
                    state, plain_state,
                    "level {level}, {ranks} ranks: the consolidated optimizer state differs \
                     from plain data parallelism's"
                );
            }
            // And like one process at the whole batch, to rounding.
            for step in 0..problem::STEPS {
                let diff = plain[step]
                    .iter()
                    .zip(&reference[step])
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                assert!(
                    diff < 1e-10,
                    "{ranks} ranks, step {step}: {diff:e} from one process"
                );
            }
            let moved = plain[problem::STEPS - 1]
                .iter()
                .zip(&problem::model_start())
                .any(|(a, b)| (a - b).abs() > 1e-3);
            assert!(moved, "training did not change the parameters");
        }
    }
}

#[test]
fn every_sharding_level_trains_a_gpt_with_dropout_bit_for_bit_like_plain_data_parallelism() {
    if let Some(reason) = missing_mpirun() {
        println!("skipped: {reason}");
        return;
    }
    let read = |path: &Path| -> Vec<u64> {
        std::fs::read(path)
            .expect("trajectory")
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    for ranks in [2, 4] {
        let mut plain: Option<Vec<u64>> = None;
        // "3p": level 3 with the gathers prefetched.
        for level in ["0", "1", "2", "3", "3p"] {
            let dir = tempfile::tempdir().unwrap();
            let out = mpirun(
                ranks,
                &[],
                &[],
                &["gpt", dir.path().to_str().unwrap(), level],
            );
            assert!(out.status.success(), "{}", text(&out));
            let rank0 = read(&dir.path().join("rank0.f64"));
            for r in 1..ranks {
                assert_eq!(read(&dir.path().join(format!("rank{r}.f64"))), rank0);
            }
            match &plain {
                None => plain = Some(rank0),
                Some(want) => assert!(
                    *want == rank0,
                    "level {level}, {ranks} ranks: the GPT's parameters differ from plain data \
                     parallelism's"
                ),
            }
        }
    }
}

#[test]
fn every_collective_agrees_with_independent_values_and_mismatches_are_typed() {
    if let Some(reason) = missing_mpirun() {
        println!("skipped: {reason}");
        return;
    }
    for ranks in [2, 3] {
        let out = mpirun(ranks, &[], &[], &["collectives"]);
        let all = text(&out);
        assert!(out.status.success(), "{all}");
        for rank in 0..ranks {
            assert!(
                all.contains(&format!("collectives ok (rank {rank} of {ranks})")),
                "{all}"
            );
        }
    }
}

#[test]
fn killing_a_rank_makes_the_others_fail_with_a_typed_error_in_bounded_time() {
    if let Some(reason) = missing_mpirun() {
        println!("skipped: {reason}");
        return;
    }
    const LIMIT_S: f64 = 2.0;
    // The launcher lets the survivors run on: each reports the timeout, as a typed error,
    // after the limit (and not much later), and its communicator refuses further calls; the
    // same when the survivors wait for gathers started on a thread of their own.
    for mode in [&["die", "1"][..], &["die", "1", "gather"]] {
        let started = Instant::now();
        let out = mpirun(
            2,
            &["--enable-recovery"],
            &[("TESSERA_DIST_TIMEOUT_S", "2")],
            mode,
        );
        let all = text(&out);
        let line = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find(|l| l.starts_with("survivor 0 "))
            .unwrap_or_else(|| panic!("{mode:?}: rank 0 reported nothing\n{all}"))
            .to_string();
        let fields: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(fields[2], "Timeout", "{line}");
        let waited: f64 = fields[3].parse().unwrap();
        // Bounded, not precise: on a loaded 2-core machine (the other tests of this file run
        // their own ranks meanwhile) the survivor may notice the limit some seconds late.
        assert!(
            (LIMIT_S..LIMIT_S + 30.0).contains(&waited),
            "waited {waited} s\n{all}"
        );
        assert_eq!(fields[5], "Broken:", "{line}");
        assert!(line.contains("rank 0 of 2"), "{line}");
        assert!(started.elapsed() < Duration::from_secs(120), "{all}");
    }

    // A default mpirun tears the job down itself as soon as a process dies: bounded too.
    let started = Instant::now();
    let out = mpirun(2, &[], &[("TESSERA_DIST_TIMEOUT_S", "30")], &["die", "1"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "the job outlived its dead rank by {:?}\n{}",
        started.elapsed(),
        text(&out)
    );
}

#[test]
fn a_users_own_model_built_deferred_trains_at_level_three_as_the_plain_build() {
    if let Some(reason) = missing_mpirun() {
        println!("skipped: {reason}");
        return;
    }
    let program = built_example("own_model_sharded");
    let small = ["--blocks", "3", "--width", "24", "--steps", "3"];
    for ranks in [2, 3] {
        let runs: Vec<Vec<serde_json::Value>> = [&[][..], &["--plain"][..]]
            .iter()
            .map(|extra| {
                let args: Vec<&str> = small.iter().chain(extra.iter()).copied().collect();
                let out = mpirun_program(&program, ranks, &[], &[], &args);
                assert!(out.status.success(), "{}", text(&out));
                let mut rows: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
                    .lines()
                    .filter_map(|l| serde_json::from_str(l).ok())
                    .collect();
                rows.sort_by_key(|r| r["rank"].as_u64());
                assert_eq!(rows.len(), ranks, "{}", text(&out));
                rows
            })
            .collect();
        let (deferred, plain) = (&runs[0], &runs[1]);
        for (d, p) in deferred.iter().zip(plain) {
            assert_eq!(d["deferred"], true);
            assert_eq!(p["deferred"], false);
            // Every rank ends with the same parameters, bit for bit, in both builds, and each
            // rank's losses are the same.
            assert_eq!(
                d["parameter_hash"], plain[0]["parameter_hash"],
                "{d} vs {p}"
            );
            assert_eq!(d["last_loss"], p["last_loss"], "{d} vs {p}");
        }
    }
}
