//! NVIDIA's run-time libraries (`libnvrtc`, `libcublas`, and `libnccl` for
//! `tessera-distributed`) loaded at run time rather than linked, so that a machine without them
//! still builds and runs everything else: one search for a library's file ([`LibrarySpec`]) and
//! one typed symbol lookup ([`DynamicLibrary::symbol`]) for every loader. Also where the tools
//! (`ptxas`) are found.
//!
//! Places searched, in order: an explicit path from an environment variable; the loader's own
//! search (`LD_LIBRARY_PATH`, the ld.so cache) for the bare library names; the CUDA toolkit
//! (`$CUDA_PATH`, `$CUDA_HOME`, `/usr/local/cuda`); and the `nvidia-*-cu12` wheels of PyPI in
//! the site-packages of `python3` (`nvidia/cuda_nvrtc/lib`, `nvidia/cublas/lib`,
//! `nvidia/cuda_nvcc/bin`), then the CUDA 13 wheels' shared folder ([`CUDA13_WHEEL_DIR`]).

use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A library to find: its versioned file names and where its wheel puts it.
#[derive(Clone, Copy, Debug)]
pub struct LibrarySpec {
    /// Environment variable holding an explicit path to the library file.
    pub env_var: &'static str,
    /// File names to try, newest first (`libnvrtc.so.12`, ...).
    pub file_names: &'static [&'static str],
    /// The wheel's folder under site-packages (`nvidia/cuda_nvrtc/lib`).
    pub wheel_dir: &'static str,
}

/// Where PyPI's CUDA 13 wheels (`nvidia-cublas`, `nvidia-cuda-nvrtc` 13.x) put every library.
pub const CUDA13_WHEEL_DIR: &str = "nvidia/cu13/lib";

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
pub fn library_candidates(spec: &LibrarySpec) -> Vec<PathBuf> {
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

/// A loaded library and the file it came from; symbols are read from it with their C type
/// ([`DynamicLibrary::symbol`]). The library stays loaded while this value lives: keep it
/// beside the function pointers read from it (after them, so that it is dropped last).
pub struct DynamicLibrary {
    library: libloading::Library,
    path: PathBuf,
}

impl fmt::Debug for DynamicLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicLibrary")
            .field("path", &self.path)
            .finish()
    }
}

impl DynamicLibrary {
    /// Loads the first candidate of `spec` that opens ([`library_candidates`]'s order): the
    /// library, or every candidate's failure joined, with the variable that names the file.
    ///
    /// # Safety
    /// Loading runs the library's initialisers: whatever `spec` can designate (its file names,
    /// or the file its variable names) must be a library whose initialisers are sound to run,
    /// as NVIDIA's run-time libraries and the C library are.
    pub unsafe fn load(spec: &LibrarySpec) -> Result<DynamicLibrary, String> {
        let mut failures = Vec::new();
        for candidate in library_candidates(spec) {
            // SAFETY: the caller guarantees that the candidates' initialisers are sound.
            match unsafe { libloading::Library::new(&candidate) } {
                Ok(library) => {
                    return Ok(DynamicLibrary {
                        library,
                        path: candidate,
                    })
                }
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

    /// The file (or bare name, resolved by the loader) that was loaded.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Symbol `name` as a value of type `T`, typically `unsafe extern "C" fn(..) -> ..`; the
    /// error names the symbol and the library.
    ///
    /// # Safety
    /// `T` must be the symbol's exact type (for a function, a function pointer with its C
    /// signature), and the value must not be used once this library is dropped.
    pub unsafe fn symbol<T: Copy>(&self, name: &str) -> Result<T, String> {
        let missing = |e: &dyn fmt::Display| {
            format!("symbol `{name}` not found in {}: {e}", self.path.display())
        };
        let Ok(c_name) = std::ffi::CString::new(name) else {
            return Err(missing(&"the name holds a NUL byte"));
        };
        // SAFETY: the caller guarantees the type and that the value does not outlive the
        // library; the value is copied out of the borrow of `self.library`.
        unsafe { self.library.get::<T>(c_name.as_bytes_with_nul()) }
            .map(|symbol| *symbol)
            .map_err(|e| missing(&e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::c_double;

    /// The C math library: on every Linux, with no initialiser to worry about.
    const LIBM: LibrarySpec = LibrarySpec {
        env_var: "TESSERA_TEST_LIBM",
        file_names: &["libm.so.6", "libm.so"],
        wheel_dir: "nvidia/none/lib",
    };

    #[test]
    fn a_symbol_is_read_with_its_c_type_and_called() {
        // SAFETY: libm's initialisers are sound to run.
        let libm = unsafe { DynamicLibrary::load(&LIBM) }.unwrap();
        assert!(libm.path().to_string_lossy().contains("libm"), "{libm:?}");
        type Cos = unsafe extern "C" fn(c_double) -> c_double;
        // SAFETY: `double cos(double)`; used while `libm` is alive.
        let cos: Cos = unsafe { libm.symbol("cos") }.unwrap();
        // SAFETY: `cos` is defined for every double.
        assert_eq!(unsafe { cos(0.0) }, 1.0);
        // SAFETY: as above.
        assert!((unsafe { cos(std::f64::consts::PI) } + 1.0).abs() < 1e-15);
    }

    #[test]
    fn a_missing_symbol_names_itself_and_the_library() {
        // SAFETY: as above.
        let libm = unsafe { DynamicLibrary::load(&LIBM) }.unwrap();
        // SAFETY: never called (the lookup fails).
        let err =
            unsafe { libm.symbol::<unsafe extern "C" fn()>("tessera_no_such_fn") }.unwrap_err();
        assert!(
            err.starts_with("symbol `tessera_no_such_fn` not found in "),
            "{err}"
        );
        assert!(err.contains(&libm.path().display().to_string()), "{err}");
        // SAFETY: as above.
        let err = unsafe { libm.symbol::<unsafe extern "C" fn()>("co\0s") }.unwrap_err();
        assert!(err.contains("NUL"), "{err}");
    }

    #[test]
    fn a_library_found_nowhere_says_where_it_was_looked_for() {
        const NONE: LibrarySpec = LibrarySpec {
            env_var: "TESSERA_TEST_NO_LIBRARY",
            file_names: &["libtessera-no-such-library.so.1"],
            wheel_dir: "nvidia/none/lib",
        };
        // SAFETY: nothing is found, so nothing is loaded.
        let err = unsafe { DynamicLibrary::load(&NONE) }.unwrap_err();
        assert!(
            err.starts_with("none of libtessera-no-such-library.so.1 could be loaded"),
            "{err}"
        );
        assert!(err.contains("set TESSERA_TEST_NO_LIBRARY"), "{err}");
    }
}
