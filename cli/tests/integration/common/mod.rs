//! Helpers shared by the modules of this test binary: running `train` into run folders, reading
//! their final state, and starting `mpirun` jobs.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use tessera_nn::checkpoint;
use tessera_nn::data::FASHION_MNIST_DIR;
use tessera_nn::run::RunDir;

/// The `train` binary of this build.
pub const TRAIN: &str = env!("CARGO_BIN_EXE_train");
/// The exit status of `--halt-after-step`.
pub const HALTED: i32 = tessera_cli::mnist_job::HALT_EXIT_CODE;

/// Whether Fashion-MNIST is installed (printing why a test skips when not).
pub fn data_available() -> bool {
    let ok = Path::new(FASHION_MNIST_DIR)
        .join("train-images-idx3-ubyte.gz")
        .exists();
    if !ok {
        println!("skipped: {FASHION_MNIST_DIR} not found (apt-get install dataset-fashion-mnist)");
    }
    ok
}

/// The arguments of the small run the tests use: 2 epochs of 10 steps (640 samples in
/// batches of 64), checkpoints every 3 steps, into the run folder `dir`; then `extra`, whose
/// options replace these defaults.
pub fn run_args(dir: &Path, extra: &[&str]) -> Vec<String> {
    let defaults = [
        ("--epochs", "2"),
        ("--batch-size", "64"),
        ("--train-limit", "640"),
        ("--test-limit", "200"),
        ("--seed", "3"),
        ("--checkpoint-every", "3"),
    ];
    let mut args = vec!["--save".to_string(), dir.display().to_string()];
    for (flag, value) in defaults {
        if !extra.contains(&flag) {
            args.extend([flag.to_string(), value.to_string()]);
        }
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// `train` with [`run_args`], on 2 threads.
pub fn train_command(dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(TRAIN);
    cmd.args(run_args(dir, extra)).env("RAYON_NUM_THREADS", "2");
    cmd
}

/// Runs [`train_command`] to its end.
pub fn train(dir: &Path, extra: &[&str]) -> std::process::Output {
    train_command(dir, extra).output().expect("train starts")
}

/// The final JSON line of a successful run (panics with its output otherwise).
pub fn summary(out: &std::process::Output) -> Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON line:\n{stdout}\n{stderr}"))
}

/// The bits of every tensor of the run folder's `model.safetensors`, by name.
pub fn model_file(dir: &Path) -> BTreeMap<String, Vec<u64>> {
    let run = RunDir::open(dir).unwrap();
    let file = checkpoint::load(run.model_path(), &tessera_cpu::Cpu::new()).unwrap();
    let bits = |t: &tessera_core::Tensor<tessera_cpu::Cpu>| -> Vec<u64> {
        t.to_vec_f64()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    file.tensors
        .iter()
        .map(|(n, t)| (n.clone(), bits(t)))
        .collect()
}

/// The bits of every tensor of the run's final checkpoint (model and optimizer), and its host
/// state without the timings (f64s are stored by their bits: equal JSON is equal bits).
pub fn final_state(dir: &Path) -> BTreeMap<String, Vec<u64>> {
    let run = RunDir::open(dir).unwrap();
    let last = *run.steps().unwrap().last().expect("a checkpoint");
    let file = checkpoint::load(run.checkpoint_path(last), &tessera_cpu::Cpu::new()).unwrap();
    let mut out: BTreeMap<String, Vec<u64>> = file
        .tensors
        .iter()
        .map(|(name, t)| {
            let bits = t
                .to_vec_f64()
                .unwrap()
                .iter()
                .map(|x| x.to_bits())
                .collect();
            (name.clone(), bits)
        })
        .collect();
    let mut state: Value = serde_json::from_str(&file.metadata["run.state"]).unwrap();
    let state = state.as_object_mut().unwrap();
    state.remove("train_seconds");
    for epoch in state
        .get_mut("epochs")
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
    {
        epoch.as_object_mut().unwrap().remove("samples_per_s");
    }
    for (key, value) in state.iter() {
        // One entry per field, its JSON text as bytes.
        let text = value.to_string().into_bytes();
        out.insert(
            format!("state.{key}"),
            text.into_iter().map(u64::from).collect(),
        );
    }
    out.insert("step".into(), vec![last]);
    out
}

/// Why the MPI tests skip (no data set, no Open MPI), or None; panics instead when
/// `TESSERA_REQUIRE_MPI` is set (CI) and Open MPI is missing.
pub fn skip_reason() -> Option<String> {
    let data = Path::new(FASHION_MNIST_DIR).join("train-images-idx3-ubyte.gz");
    if !data.exists() {
        return Some(format!(
            "{FASHION_MNIST_DIR} not found (apt-get install dataset-fashion-mnist)"
        ));
    }
    match Command::new("mpirun").arg("--version").output() {
        Ok(out) if String::from_utf8_lossy(&out.stdout).contains("Open MPI") => None,
        _ if std::env::var_os("TESSERA_REQUIRE_MPI").is_some() => {
            panic!("TESSERA_REQUIRE_MPI is set but Open MPI's mpirun is not found")
        }
        _ => {
            Some("Open MPI's mpirun not found (apt-get install openmpi-bin libopenmpi-dev)".into())
        }
    }
}

/// `train` built with MPI: this package's own `train` when the tests are built with the `mpi`
/// feature (as CI builds them), otherwise built here with `--features mpi` (a nested cargo
/// sharing this target folder).
pub fn train_with_mpi() -> PathBuf {
    if cfg!(feature = "mpi") {
        return PathBuf::from(TRAIN);
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args([
        "build",
        "-p",
        "tessera-cli",
        "--features",
        "mpi",
        "--bin",
        "train",
    ])
    .args(["--message-format", "json"]);
    let exe = std::env::current_exe().expect("test binary path");
    if exe.components().any(|c| c.as_os_str() == "release") {
        cmd.arg("--release");
    } else {
        cmd.args(["--profile", "test"]);
    }
    let out = cmd.stderr(Stdio::inherit()).output().expect("cargo starts");
    assert!(out.status.success(), "building train --features mpi failed");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["target"]["name"] == "train")
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .expect("cargo reports train's executable")
}

/// A session folder of its own for one `mpirun`: Open MPI 4 creates
/// `<tmpdir>/ompi.<host>.<uid>` on start, and two `mpirun`s starting at once in the same
/// `<tmpdir>` (tests of this binary run in parallel) race on that `mkdir`, one failing with
/// "File exists".
pub fn mpi_session_dir() -> PathBuf {
    static LAUNCHES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // Short: Open MPI puts Unix sockets below it (paths of at most 108 bytes).
    let dir = std::env::temp_dir().join(format!("tsr-mpi-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a session folder for mpirun");
    dir
}

/// `mpirun -np RANKS` (oversubscribed, allowed as root, in a session folder of its own: see
/// [`mpi_session_dir`]), to be followed by the program and its arguments: one thread per rank, a
/// 60 s collective timeout.
pub fn mpirun(ranks: usize) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--oversubscribe", "--allow-run-as-root", "-np"])
        .arg(ranks.to_string())
        .env("OMPI_MCA_orte_tmpdir_base", mpi_session_dir())
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        .env("RAYON_NUM_THREADS", "1")
        .env("TESSERA_DIST_TIMEOUT_S", "60");
    cmd
}

/// `mpirun -np 2 train --distributed` (the MPI build `train`) with [`run_args`] (see
/// [`mpirun`]).
pub fn mpi_train(train: &Path, dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = mpirun(2);
    cmd.arg(train)
        .arg("--distributed")
        .args(run_args(dir, extra));
    cmd
}

/// The committed Hugging Face test folder `name` (`fixtures/hf/`, made by
/// `xtask/peers/make_hf_fixtures.py`).
pub fn hf_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/hf")
        .join(name)
}

/// The arguments of a short fine-tuning run (`train --init-from`) of the fixture `name` on
/// `corpus`: 12 steps of 4 windows of 16 tokens, estimates every 4 steps.
pub fn finetune_args(name: &str, corpus: &str) -> Vec<String> {
    let folder = hf_fixture(name).display().to_string();
    [
        "--init-from",
        &folder,
        "--data",
        corpus,
        "--steps",
        "12",
        "--block-size",
        "16",
        "--batch-size",
        "4",
        "--eval-interval",
        "4",
        "--eval-iters",
        "1",
        "--lr",
        "1e-3",
    ]
    .map(String::from)
    .to_vec()
}

/// Writes `text` as `corpus.txt` in `dir` and returns its path as `--data` takes it.
pub fn write_corpus(dir: &Path, text: &str) -> String {
    let corpus = dir.join("corpus.txt");
    std::fs::write(&corpus, text).unwrap();
    corpus.display().to_string()
}

/// Panics naming every entry where two [`final_state`]s differ.
pub fn assert_same_state(
    want: &BTreeMap<String, Vec<u64>>,
    got: &BTreeMap<String, Vec<u64>>,
    context: &str,
) {
    let names: Vec<&String> = want.keys().chain(got.keys()).collect();
    let differing: Vec<&&String> = names
        .iter()
        .filter(|n| want.get(**n) != got.get(**n))
        .collect();
    assert!(
        differing.is_empty(),
        "{context}: {differing:?} differ after resuming"
    );
}
