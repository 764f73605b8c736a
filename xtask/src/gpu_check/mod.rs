//! `cargo xtask gpu-check`: builds here, in release, everything that checks the CUDA backend on
//! a real GPU (the conformance test binary, `train` with CUDA and NCCL, the one-rank NCCL test
//! and `tessera-bench` with CUDA), gathers it
//! with precompiled kernels and a slice of Fashion-MNIST in one git-ignored folder, and prints
//! the single command that runs it all on a GPU machine.
//!
//! The script ends with the lifecycle report measured on the GPU machine: every phase on the
//! CPU backend (all cores) and on CUDA in f32, TF32 and bf16, with the speedups
//! ([`script::lifecycle_steps`]).
//!
//! The binaries link against the `libcuda` stub that `backend-cuda` generates where no driver
//! is installed; they carry no rpath, so on the GPU machine they load the real driver, whose
//! folder `run.sh` puts on the loader path after running `nvidia-smi`. Kernels are compiled
//! here with NVRTC (PyPI's `nvidia-cuda-nvrtc-cu12`) because the GPU machine may have no NVRTC.

pub mod artifacts;
pub mod data;
pub mod script;
pub mod text;

use std::path::{Path, PathBuf};

use clap::Args;

use crate::process::{cargo, run_checked, target_dir};
use crate::TaskResult;

/// The bundle's archive must stay under this size (well under the 64 MiB a GPU machine of this
/// workplace receives with the working tree).
const SIZE_LIMIT_BYTES: u64 = 48 << 20;

/// Options of `cargo xtask gpu-check`.
#[derive(Debug, Clone, Args)]
pub struct GpuCheckArgs {
    /// Folder to build the bundle in (default: target/gpu-check/bundle).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Folder with the Fashion-MNIST IDX files (.gz) to take a slice of.
    #[arg(long, default_value = "/usr/share/datasets/fashion-mnist")]
    pub data: PathBuf,
    /// Training images copied into the bundle (and used by its `train` runs).
    #[arg(long, default_value_t = 10_000)]
    pub train_samples: usize,
    /// Test images copied into the bundle.
    #[arg(long, default_value_t = 2_000)]
    pub test_samples: usize,
    /// Text file or folder a slice of which the bundle's GPT training uses.
    #[arg(long, default_value = tessera_nn::data::FORTUNES_DIR)]
    pub text: PathBuf,
    /// Bytes of text copied into the bundle.
    #[arg(long, default_value_t = 200_000)]
    pub text_bytes: usize,
    /// GPU architectures the kernels are precompiled for (sm_XY cubins, compute_XY PTX).
    #[arg(long, default_value = "sm_80,sm_90,compute_80")]
    pub archs: String,
}

/// The default bundle folder.
pub fn default_bundle() -> PathBuf {
    target_dir().join("gpu-check").join("bundle")
}

/// Builds the bundle and prints the command that runs it.
pub fn run(args: &GpuCheckArgs) -> TaskResult<()> {
    let bundle = args.out.clone().unwrap_or_else(default_bundle);
    if bundle.exists() {
        std::fs::remove_dir_all(&bundle)
            .map_err(|e| format!("cannot clear {}: {e}", bundle.display()))?;
    }
    let bin = bundle.join("bin");
    std::fs::create_dir_all(&bin).map_err(|e| format!("cannot create {}: {e}", bin.display()))?;

    let builds: [(&[&str], &[&str]); 4] = [
        (
            &[
                "test",
                "--release",
                "-p",
                "tessera-cuda",
                "--test",
                "gpu_conformance",
                "--test",
                "gpu_index_error",
                "--no-run",
            ],
            &["gpu_conformance", "gpu_index_error"],
        ),
        (
            &[
                "build",
                "--release",
                "-p",
                "tessera-cli",
                "--features",
                "cuda,nccl",
                "--bin",
                "train",
                "--bin",
                "generate",
            ],
            &["train", "generate"],
        ),
        (
            // A one-rank NCCL communicator on the GPU (libnccl.so.2 loaded at run time).
            &[
                "test",
                "--release",
                "-p",
                "tessera-distributed",
                "--features",
                "nccl",
                "--test",
                "nccl_library",
                "--no-run",
            ],
            &["nccl_library"],
        ),
        (
            &[
                "build",
                "--release",
                "-p",
                "xtask",
                "--features",
                "cuda",
                "--bin",
                "tessera-bench",
            ],
            &["tessera-bench"],
        ),
    ];
    for (cargo_args, names) in builds {
        let built = artifacts::build_executables(cargo_args, names)?;
        for (name, path) in names.iter().zip(&built) {
            let size = artifacts::copy_stripped(path, &bin.join(name))?;
            println!("==> gpu-check: bin/{name} ({:.1} MiB)", mib(size));
        }
    }

    precompile_kernels(&bundle.join("kernels"), &args.archs);
    let has_data = copy_data(args, &bundle.join("data"));
    let has_text = copy_text(args, &bundle.join("text").join("corpus.txt"));

    let mut steps = script::steps(has_data, args.train_samples, args.test_samples);
    if has_text {
        steps.extend(script::gpt_steps());
    }
    if copy_hf_fixtures(&bundle.join("hf")) {
        steps.extend(script::pretrained_steps(has_text));
    }
    if copy_gpt_peer(&bundle) {
        steps.push(script::gpt_peer_step());
    }
    // Last: the lifecycle report, measured on the GPU machine itself.
    steps.extend(script::lifecycle_steps(has_data));
    let run_sh = bundle.join("run.sh");
    std::fs::write(&run_sh, script::run_script(&steps))
        .map_err(|e| format!("cannot write {}: {e}", run_sh.display()))?;
    make_executable(&run_sh)?;
    let lifecycle_sh = bundle.join("lifecycle.sh");
    std::fs::write(&lifecycle_sh, script::lifecycle_script())
        .map_err(|e| format!("cannot write {}: {e}", lifecycle_sh.display()))?;
    make_executable(&lifecycle_sh)?;

    let archive = archive_bundle(&bundle)?;
    let size = std::fs::metadata(&archive)
        .map_err(|e| format!("cannot read {}: {e}", archive.display()))?
        .len();
    if size > SIZE_LIMIT_BYTES {
        return Err(format!(
            "the bundle's archive is {:.1} MiB, above the {:.0} MiB budget",
            mib(size),
            mib(SIZE_LIMIT_BYTES)
        )
        .into());
    }
    print_command(&bundle, &archive, artifacts::folder_size(&bundle), size);
    Ok(())
}

/// Packs `bundle` into `bundle.tar.gz` beside it (the file to send: the binaries shrink to about
/// a third) and returns the archive's path.
fn archive_bundle(bundle: &Path) -> TaskResult<PathBuf> {
    let parent = bundle.parent().unwrap_or(Path::new("."));
    let name = bundle
        .file_name()
        .ok_or_else(|| format!("{} has no folder name", bundle.display()))?;
    let archive = parent.join(format!("{}.tar.gz", name.to_string_lossy()));
    let mut tar = std::process::Command::new("tar");
    tar.arg("czf").arg(&archive).arg("-C").arg(parent).arg(name);
    println!("==> gpu-check: packing {}", archive.display());
    run_checked(&mut tar)?;
    Ok(archive)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// Precompiles the kernels with NVRTC into `dir`; without NVRTC, warns that the GPU machine
/// will need its own.
fn precompile_kernels(dir: &Path, archs: &str) {
    let mut cmd = cargo([
        "run",
        "--release",
        "--quiet",
        "-p",
        "tessera-cuda",
        "--example",
        "precompile_kernels",
        "--",
    ]);
    cmd.arg(dir).arg(archs);
    println!("==> gpu-check: precompiling kernels for {archs}");
    if let Err(e) = run_checked(&mut cmd) {
        eprintln!(
            "gpu-check: warning: kernels not precompiled ({e}); the GPU machine will compile \
             them with its own NVRTC (pip install nvidia-cuda-nvrtc-cu12 here to avoid that)"
        );
    }
}

/// Copies a slice of the data set into `dir`; false (after a warning) when it is missing.
fn copy_data(args: &GpuCheckArgs, dir: &Path) -> bool {
    let copy = || -> TaskResult<()> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        for file in data::IDX_FILES {
            let items = if file.starts_with("train") {
                args.train_samples
            } else {
                args.test_samples
            };
            let kept = data::truncate_gz(&args.data.join(file), &dir.join(file), items)?;
            println!("==> gpu-check: data/{file} ({kept} items)");
        }
        Ok(())
    };
    match copy() {
        Ok(()) => true,
        Err(e) => {
            eprintln!(
                "gpu-check: warning: no Fashion-MNIST slice ({e}); the bundle skips `train` \
                 (apt-get install dataset-fashion-mnist, or pass --data DIR)"
            );
            let _ = std::fs::remove_dir_all(dir);
            false
        }
    }
}

/// Copies a slice of the GPT corpus to `file`; false (after a warning) when there is none.
fn copy_text(args: &GpuCheckArgs, file: &Path) -> bool {
    match text::copy_text_slice(&args.text, file, args.text_bytes) {
        Ok(bytes) => {
            println!("==> gpu-check: text/corpus.txt ({bytes} bytes)");
            true
        }
        Err(e) => {
            eprintln!(
                "gpu-check: warning: no text for the GPT steps ({e}); the bundle skips them \
                 (apt-get install fortunes, or pass --text FILE_OR_FOLDER)"
            );
            false
        }
    }
}

/// The Hugging Face fixture folders the pretrained steps use (without their reference
/// outputs, which only the CPU tests read).
const HF_FIXTURES: [&str; 3] = ["gpt2-tiny", "llama-tiny", "llama3-tiny"];

/// Copies the Hugging Face fixtures into `dir`; false (after a warning) when they are missing.
fn copy_hf_fixtures(dir: &Path) -> bool {
    let source = crate::process::workspace_root().join("fixtures/hf");
    let copy = || -> TaskResult<()> {
        for name in HF_FIXTURES {
            let (from, to) = (source.join(name), dir.join(name));
            std::fs::create_dir_all(&to)
                .map_err(|e| format!("cannot create {}: {e}", to.display()))?;
            let entries = std::fs::read_dir(&from)
                .map_err(|e| format!("cannot read {}: {e}", from.display()))?;
            for entry in entries {
                let path = entry.map_err(|e| e.to_string())?.path();
                let file = path.file_name().unwrap_or_default();
                if file == "reference.safetensors" || file == "finetune.json" {
                    continue;
                }
                std::fs::copy(&path, to.join(file))
                    .map_err(|e| format!("cannot copy {}: {e}", path.display()))?;
            }
            println!("==> gpu-check: hf/{name}");
        }
        Ok(())
    };
    match copy() {
        Ok(()) => true,
        Err(e) => {
            eprintln!("gpu-check: warning: no Hugging Face fixtures ({e}); the bundle skips them");
            let _ = std::fs::remove_dir_all(dir);
            false
        }
    }
}

/// The PyTorch GPT peer's files (`xtask/peers`) the bundle's GPT comparison runs.
const GPT_PEER_FILES: [&str; 4] = [
    "gpt_torch.py",
    "gpt_model.py",
    "peer_protocol.py",
    "torch_common.py",
];

/// Writes `gpt_peer.sh` and copies the PyTorch GPT peer into `bundle/peers`; false (after a
/// warning) when a file is missing.
fn copy_gpt_peer(bundle: &Path) -> bool {
    let source = crate::process::workspace_root().join("xtask/peers");
    let copy = || -> TaskResult<()> {
        let peers = bundle.join("peers");
        std::fs::create_dir_all(&peers)
            .map_err(|e| format!("cannot create {}: {e}", peers.display()))?;
        for file in GPT_PEER_FILES {
            std::fs::copy(source.join(file), peers.join(file))
                .map_err(|e| format!("cannot copy {file}: {e}"))?;
        }
        let sh = bundle.join("gpt_peer.sh");
        std::fs::write(&sh, script::GPT_PEER_SCRIPT)
            .map_err(|e| format!("cannot write {}: {e}", sh.display()))?;
        make_executable(&sh)
    };
    match copy() {
        Ok(()) => {
            println!("==> gpu-check: gpt_peer.sh and peers/");
            true
        }
        Err(e) => {
            eprintln!("gpu-check: warning: no PyTorch GPT peer ({e}); the bundle skips it");
            false
        }
    }
}

fn make_executable(path: &Path) -> TaskResult<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755))
        .map_err(|e| format!("cannot make {} executable: {e}", path.display()).into())
}

/// Prints where the bundle and its archive are and the commands that run it on a GPU machine.
fn print_command(bundle: &Path, archive: &Path, size: u64, archive_size: u64) {
    let root = crate::process::workspace_root();
    let shown = bundle.strip_prefix(root).unwrap_or(bundle);
    let shown_archive = archive.strip_prefix(root).unwrap_or(archive);
    println!(
        "\n==> gpu-check: bundle ready: {} ({:.1} MiB), packed as {} ({:.1} MiB), git-ignored",
        shown.display(),
        mib(size),
        shown_archive.display(),
        mib(archive_size)
    );
    println!(
        "Copy the archive to a machine with an NVIDIA GPU and driver and run, from the folder \
         it is in:\n"
    );
    println!(
        "    tar xzf {} -C /tmp && bash /tmp/{}/run.sh RESULTS_DIR\n",
        shown_archive
            .file_name()
            .unwrap_or_default()
            .to_string_lossy(),
        bundle.file_name().unwrap_or_default().to_string_lossy()
    );
    println!(
        "It runs nvidia-smi, puts the driver's library folder on the loader path, then the \
         conformance suite (f32, f64, f16, bf16), train (f32 and bf16) and the benchmarks, \
         writing each one's output and a summary.txt into RESULTS_DIR; it ends with the \
         lifecycle report (CPU, CUDA f32, TF32 and bf16) in RESULTS_DIR/lifecycle/."
    );
}
