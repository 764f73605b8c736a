//! Finding NVIDIA's run-time libraries (`libnvrtc`, `libcublas`) and tools (`ptxas`), which
//! this backend loads at run time rather than links, so that a machine without them still
//! builds and runs everything else.
//!
//! Places searched, in order: an explicit path from an environment variable; the loader's own
//! search (`LD_LIBRARY_PATH`, the ld.so cache) for the bare library names; the CUDA toolkit
//! (`$CUDA_PATH`, `$CUDA_HOME`, `/usr/local/cuda`); and the `nvidia-*-cu12` wheels of PyPI in
//! the site-packages of `python3` (`nvidia/cuda_nvrtc/lib`, `nvidia/cublas/lib`,
//! `nvidia/cuda_nvcc/bin`), then the CUDA 13 wheels' shared folder ([`CUDA13_WHEEL_DIR`]).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A library to find: its versioned file names and where its wheel puts it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LibrarySpec {
    /// Environment variable holding an explicit path to the library file.
    pub(crate) env_var: &'static str,
    /// File names to try, newest first (`libnvrtc.so.12`, ...).
    pub(crate) file_names: &'static [&'static str],
    /// The wheel's folder under site-packages (`nvidia/cuda_nvrtc/lib`).
    pub(crate) wheel_dir: &'static str,
}

/// Where PyPI's CUDA 13 wheels (`nvidia-cublas`, `nvidia-cuda-nvrtc` 13.x) put every library.
pub(crate) const CUDA13_WHEEL_DIR: &str = "nvidia/cu13/lib";

/// The site-packages folders of `python3` (computed once; empty without Python).
fn site_packages() -> &'static [PathBuf] {
    static SITE: OnceLock<Vec<PathBuf>> = OnceLock::new();
    SITE.get_or_init(|| {
        let script = "import site, sys\n\
                      paths = list(getattr(site, 'getsitepackages', lambda: [])())\n\
                      paths.append(site.getusersitepackages())\n\
                      paths.extend(p for p in sys.path if p.endswith('site-packages'))\n\
                      print('\\n'.join(paths))";
        Command::new("python3")
            .args(["-c", script])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(PathBuf::from)
                    .filter(|p| p.is_dir())
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// The CUDA toolkit roots that exist: `$CUDA_PATH`, `$CUDA_HOME`, `/usr/local/cuda`.
fn toolkit_roots() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_PATH", "CUDA_HOME", "CUDA_ROOT"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.retain(|r| r.is_dir());
    roots
}

/// Candidate files or bare names for `spec`, in the order they should be tried. Bare names
/// (no folder) are resolved by the dynamic loader itself.
pub(crate) fn library_candidates(spec: &LibrarySpec) -> Vec<PathBuf> {
    let mut candidates: Vec<PathBuf> = Vec::new();
    if let Some(explicit) = std::env::var_os(spec.env_var) {
        candidates.push(PathBuf::from(explicit));
    }
    candidates.extend(spec.file_names.iter().map(PathBuf::from));
    let mut folders: Vec<PathBuf> = toolkit_roots()
        .into_iter()
        .flat_map(|r| [r.join("lib64"), r.join("lib")])
        .collect();
    folders.extend(site_packages().iter().map(|s| s.join(spec.wheel_dir)));
    folders.extend(site_packages().iter().map(|s| s.join(CUDA13_WHEEL_DIR)));
    for folder in folders.into_iter().filter(|f| f.is_dir()) {
        for name in spec.file_names {
            let file = folder.join(name);
            if file.exists() {
                candidates.push(file);
            }
        }
    }
    candidates
}

/// An executable named `name`: `$env_var`, then `PATH`, the toolkit's `bin` folders and the
/// wheel folder `wheel_dir` of site-packages.
pub(crate) fn find_executable(name: &str, env_var: &str, wheel_dir: &str) -> Option<PathBuf> {
    if let Some(explicit) = std::env::var_os(env_var) {
        let path = PathBuf::from(explicit);
        return path.is_file().then_some(path);
    }
    let path_dirs: Vec<PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    let toolkit = toolkit_roots().into_iter().map(|r| r.join("bin"));
    let wheels = site_packages().iter().map(|s| s.join(wheel_dir));
    path_dirs
        .into_iter()
        .chain(toolkit)
        .chain(wheels)
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Loads the first candidate of `spec` that opens: the library and what was loaded, or every
/// failure's reason joined.
pub(crate) fn load_library(
    spec: &LibrarySpec,
) -> std::result::Result<(libloading::Library, PathBuf), String> {
    let mut failures = Vec::new();
    for candidate in library_candidates(spec) {
        // SAFETY: loading NVIDIA's libnvrtc/libcublas runs their initialisers, which have no
        // preconditions; symbols are only used through the signatures of their C headers.
        match unsafe { libloading::Library::new(&candidate) } {
            Ok(library) => return Ok((library, candidate)),
            Err(e) => failures.push(format!("{}: {e}", candidate.display())),
        }
    }
    Err(format!(
        "none of {} could be loaded (set {} to the library file; tried {})",
        spec.file_names.join(", "),
        spec.env_var,
        failures.join("; ")
    ))
}
