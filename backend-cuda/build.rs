//! Generates the `libcuda` link stub so that the crate builds, and its tests start, on a machine
//! without the CUDA driver.
//!
//! * `OUT_DIR/link/libcuda.so` (soname `libcuda.so.1`) is always generated and put on the link
//!   search path: `-lcuda` resolves against it, exactly like NVIDIA's `stubs/libcuda.so`. The
//!   dynamic loader never loads it, because at run time it looks for `libcuda.so.1`.
//! * `OUT_DIR/run/libcuda.so.1`, the same library under its run-time name, is generated and put on
//!   the search path only when no real `libcuda.so.1` is installed here. Cargo adds such folders
//!   (inside `target/`) to `LD_LIBRARY_PATH` for `cargo test`/`cargo run`, so the test binaries
//!   start and `cust::init` answers `CUDA_ERROR_NO_DEVICE`. Where a driver is installed the folder
//!   is not created, so the stub can never shadow it; binaries run outside Cargo (the gpu-check
//!   bundle) carry no rpath and load the driver from the loader path.
//!
//! The stub defines every `cu*` function of `cust_raw`'s bindings, found in Cargo's registry
//! (override with `TESSERA_CUST_RAW_BINDINGS=/path/to/cuda.rs`).

#[path = "build/stub_source.rs"]
mod stub_source;

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The `cust_raw` version whose bindings the stub is generated from (the one `cust` 0.3.2 uses).
const CUST_RAW_PREFIX: &str = "cust_raw-0.11.";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=build/stub_source.rs");
    println!("cargo:rerun-if-env-changed=TESSERA_CUST_RAW_BINDINGS");
    println!("cargo:rerun-if-env-changed=CARGO_HOME");
    println!("cargo:rerun-if-env-changed=CC");

    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    match generate(&out_dir) {
        Ok(()) => {}
        Err(reason) if toolkit_stub_exists() => {
            println!(
                "cargo:warning=no libcuda link stub generated ({reason}); linking against the \
                 CUDA toolkit's libcuda instead"
            );
        }
        Err(reason) => panic!(
            "backend-cuda: cannot generate the libcuda link stub: {reason}. Install a C compiler \
             (gcc) or the CUDA toolkit, or set TESSERA_CUST_RAW_BINDINGS to cust_raw's src/cuda.rs"
        ),
    }
}

/// Writes, compiles and registers the stub; see the module docs.
fn generate(out_dir: &Path) -> Result<(), String> {
    let bindings_path = cust_raw_bindings()?;
    let bindings = fs::read_to_string(&bindings_path)
        .map_err(|e| format!("cannot read {}: {e}", bindings_path.display()))?;
    let functions = stub_source::driver_functions(&bindings);
    let codes = stub_source::error_codes(&bindings);
    if functions.len() < 100 || codes.is_empty() {
        return Err(format!(
            "{} declares {} driver functions and {} error codes; expected cust_raw's bindings",
            bindings_path.display(),
            functions.len(),
            codes.len()
        ));
    }
    let source_path = out_dir.join("libcuda_stub.c");
    fs::write(&source_path, stub_source::stub_c_source(&functions, &codes))
        .map_err(|e| format!("cannot write {}: {e}", source_path.display()))?;

    let link_dir = out_dir.join("link");
    fs::create_dir_all(&link_dir).map_err(|e| format!("cannot create {link_dir:?}: {e}"))?;
    let library = link_dir.join("libcuda.so");
    compile(&source_path, &library)?;
    println!("cargo:rustc-link-search=native={}", link_dir.display());

    let run_dir = out_dir.join("run");
    // A stale run-time copy from an earlier build (before a driver was installed) must go.
    let _ = fs::remove_dir_all(&run_dir);
    if real_driver().is_none() {
        fs::create_dir_all(&run_dir).map_err(|e| format!("cannot create {run_dir:?}: {e}"))?;
        fs::copy(&library, run_dir.join("libcuda.so.1"))
            .map_err(|e| format!("cannot copy the stub into {}: {e}", run_dir.display()))?;
        println!("cargo:rustc-link-search=native={}", run_dir.display());
    }
    Ok(())
}

/// Compiles the C source into a shared library with soname `libcuda.so.1`.
fn compile(source: &Path, library: &Path) -> Result<(), String> {
    let compiler = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let output = Command::new(&compiler)
        .args([
            "-shared",
            "-fPIC",
            "-O1",
            "-w",
            "-Wl,-soname,libcuda.so.1",
            "-o",
        ])
        .arg(library)
        .arg(source)
        .output()
        .map_err(|e| format!("cannot run the C compiler `{compiler}`: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "`{compiler}` failed on {}: {}",
            source.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    Ok(())
}

/// `cust_raw`'s `src/cuda.rs`: `TESSERA_CUST_RAW_BINDINGS`, else the newest 0.11 release in
/// Cargo's registry sources.
fn cust_raw_bindings() -> Result<PathBuf, String> {
    if let Some(path) = env::var_os("TESSERA_CUST_RAW_BINDINGS") {
        return Ok(PathBuf::from(path));
    }
    let cargo_home = env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .ok_or("neither CARGO_HOME nor HOME is set")?;
    let registry = cargo_home.join("registry").join("src");
    let mut found: Vec<PathBuf> = fs::read_dir(&registry)
        .map_err(|e| format!("cannot list {}: {e}", registry.display()))?
        .flatten()
        .flat_map(|index| fs::read_dir(index.path()).into_iter().flatten().flatten())
        .filter(|krate| {
            krate
                .file_name()
                .to_string_lossy()
                .starts_with(CUST_RAW_PREFIX)
        })
        .map(|krate| krate.path().join("src").join("cuda.rs"))
        .filter(|path| path.is_file())
        .collect();
    found.sort();
    found
        .pop()
        .ok_or_else(|| format!("no {CUST_RAW_PREFIX}* sources under {}", registry.display()))
}

/// The folders where a CUDA driver installs `libcuda.so.1`, plus `LD_LIBRARY_PATH`.
fn driver_folders() -> Vec<PathBuf> {
    let mut folders: Vec<PathBuf> = env::var_os("LD_LIBRARY_PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    for folder in [
        "/usr/lib/x86_64-linux-gnu",
        "/usr/lib/aarch64-linux-gnu",
        "/usr/lib64",
        "/usr/lib",
        "/lib/x86_64-linux-gnu",
        "/lib64",
        "/usr/local/nvidia/lib64",
        "/usr/lib/wsl/lib",
    ] {
        folders.push(PathBuf::from(folder));
    }
    folders
}

/// A real `libcuda.so.1` installed on this machine (never one of our own stubs), if any.
fn real_driver() -> Option<PathBuf> {
    let ours = env::var_os("OUT_DIR").map(PathBuf::from);
    let in_target = |p: &Path| {
        ours.as_deref()
            .and_then(|o| o.ancestors().nth(3))
            .is_some_and(|target_profile| p.starts_with(target_profile))
    };
    let from_folders = driver_folders()
        .into_iter()
        .map(|f| f.join("libcuda.so.1"))
        .find(|p| p.exists() && !in_target(p));
    from_folders.or_else(|| {
        let listing = Command::new("ldconfig").arg("-p").output().ok()?;
        String::from_utf8_lossy(&listing.stdout)
            .lines()
            .filter(|line| line.trim_start().starts_with("libcuda.so.1 "))
            .filter_map(|line| line.rsplit("=> ").next())
            .map(|p| PathBuf::from(p.trim()))
            .find(|p| p.exists())
    })
}

/// Whether a CUDA toolkit's own `libcuda.so` (or its stub) is where `cust_raw` looks.
fn toolkit_stub_exists() -> bool {
    let mut bases: Vec<PathBuf> = env::var_os("CUDA_LIBRARY_PATH")
        .map(|p| env::split_paths(&p).collect())
        .unwrap_or_default();
    bases.push(PathBuf::from("/usr/local/cuda"));
    bases.push(PathBuf::from("/opt/cuda"));
    bases.iter().any(|base| {
        base.join("lib64/libcuda.so").exists() || base.join("lib64/stubs/libcuda.so").exists()
    })
}
