//! Tessera's backends by name, in one table: what `train --backend NAME`, `generate --backend
//! NAME` and `cargo xtask bench --backend NAME` choose from.
//!
//! Each entry says how the backend is spelled on the command line, which Cargo features of this
//! crate compile it in, whether it is a checked backend (`Checked<B, Cpu>`: every op also runs on
//! the CPU and a divergence is an error), whether it can run f32 matrix products on TF32, and how
//! it is opened from [`DeviceOptions`]. A program finds an entry by name ([`lookup`], or
//! [`value_parser`] for clap with the `clap` feature) and runs its generic code on the device
//! with one call, [`BackendEntry::open`], which hands the device to a [`BackendJob`]: a trait
//! with a generic method, since a closure cannot be generic over the backend type.
//!
//! ```
//! use tessera::prelude::*;
//! use tessera::registry::{self, BackendJob, DeviceOptions};
//!
//! /// The sum of four ones, on whichever backend the job is given.
//! struct SumOfOnes;
//!
//! impl BackendJob for SumOfOnes {
//!     type Output = tessera::Result<Vec<f32>>;
//!     fn run<B: Backend>(self, dev: B) -> Self::Output {
//!         Tensor::<B>::ones([4], DType::F32, &dev)?.sum_all()?.to_vec::<f32>()
//!     }
//! }
//!
//! # fn main() -> tessera::Result<()> {
//! let cpu = registry::lookup("cpu")?;
//! assert_eq!(cpu.open(&DeviceOptions::default(), SumOfOnes)??, vec![4.0]);
//! let unknown = registry::lookup("tpu").unwrap_err().to_string();
//! assert!(unknown.contains("unknown backend `tpu`; available: cpu"), "{unknown}");
//! # Ok(()) }
//! ```
//!
//! ## Adding a backend
//!
//! One entry in the `registry!` table of this file (its name, help line, features, whether it
//! is checked or takes TF32, and how it is opened: for a `tessera_gpu::Gpu<D>` backend,
//! `gpu::<MyDriver>`) and its Cargo feature in this crate's `Cargo.toml`. `train`, `generate` and
//! `cargo xtask bench` then accept it; `tessera-cli` and `xtask` forward a feature that is not
//! always on under the same name (`--features cuda`).

use std::fmt;
use tessera_core::{Backend, Error, Result};

#[cfg(feature = "clap")]
mod clap_arg;
#[cfg(feature = "clap")]
pub use clap_arg::{value_parser, BackendParser};

/// How to open a backend's device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DeviceOptions {
    /// The device at this position among the backend's devices (`train --device-per-rank`);
    /// `None`: the backend's default device (OpenCL: `TESSERA_OPENCL_DEVICE`, else the first
    /// GPU, else the first device; CUDA: device 0). Backends with one device ignore it.
    pub ordinal: Option<usize>,
    /// TF32 for f32 matrix products: `Some(true)` requires them (an error where the backend
    /// cannot compute them: see [`BackendEntry::supports_tf32`], and on a GPU without its
    /// vendor BLAS or with the tiled GEMM chosen), `Some(false)` forbids them, `None` keeps the
    /// backend's default (CUDA: `TESSERA_CUDA_TF32`, else off).
    pub tf32: Option<bool>,
}

/// Generic code to run on whichever backend the registry opens ([`BackendEntry::open`]).
pub trait BackendJob {
    /// What the job returns.
    type Output;

    /// Runs the job on `device`.
    fn run<B: Backend>(self, device: B) -> Self::Output;
}

/// One row of the table (see [`BackendEntry`] for the meaning of each field).
struct Entry {
    name: &'static str,
    about: &'static str,
    /// Every Cargo feature the backend needs, with whether this build has it.
    features: &'static [(&'static str, bool)],
    checked: bool,
    tf32: bool,
}

/// Builds the table (`ENTRIES`) and the dispatch from name to type (`dispatch`) out of one list,
/// so that a backend is one entry. An entry's arm in `dispatch` exists only when all its
/// features are on.
macro_rules! registry {
    ($(
        $name:literal {
            about: $about:literal,
            features: [$($feature:literal),+ $(,)?],
            checked: $checked:literal,
            tf32: $tf32:literal,
            open: $open:expr $(,)?
        }
    ),+ $(,)?) => {
        /// Every backend, in the order of the table (which orders [`BackendEntry`] values).
        static ENTRIES: &[Entry] = &[$(
            Entry {
                name: $name,
                about: $about,
                features: &[$(($feature, cfg!(feature = $feature))),+],
                checked: $checked,
                tf32: $tf32,
            }
        ),+];

        /// Opens the backend called `name` with `options` and runs `job` on it.
        fn dispatch<J: BackendJob>(
            name: &'static str,
            options: &DeviceOptions,
            job: J,
        ) -> Result<J::Output> {
            match name {
                $(
                    #[cfg(all($(feature = $feature),+))]
                    $name => {
                        let open: fn(&DeviceOptions) -> Result<_> = $open;
                        Ok(job.run(open(options)?))
                    }
                )+
                _ => {
                    let _ = (options, job);
                    Err(not_compiled(name).into())
                }
            }
        }
    };
}

registry! {
    "cpu" {
        about: "The multi-threaded CPU backend",
        features: ["cpu"],
        checked: false,
        tf32: false,
        open: |_| Ok(tessera_cpu::Cpu::new()),
    },
    "opencl" {
        about: "The default OpenCL device (`TESSERA_OPENCL_DEVICE=platform:device`; `TESSERA_OPENCL_GEMM=clblast|tiled|auto`)",
        features: ["opencl"],
        checked: false,
        tf32: false,
        open: gpu::<tessera_opencl::OpenClDriver>,
    },
    "cuda" {
        about: "CUDA device 0 (`TESSERA_CUDA_GEMM=cublas|tiled|auto`)",
        features: ["cuda"],
        checked: false,
        tf32: true,
        open: gpu::<tessera_cuda::CudaDriver>,
    },
    "checked-cpu" {
        about: "The CPU backend checked op by op against a second one (debugging the checker)",
        features: ["checked", "cpu"],
        checked: true,
        tf32: false,
        open: |_| checked(tessera_cpu::Cpu::new()),
    },
    "checked-opencl" {
        about: "OpenCL checked op by op against the CPU: stops at the first op that diverges",
        features: ["checked", "opencl", "cpu"],
        checked: true,
        tf32: false,
        open: |options| checked(gpu::<tessera_opencl::OpenClDriver>(options)?),
    },
    "checked-cuda" {
        about: "CUDA checked op by op against the CPU: stops at the first op that diverges",
        features: ["checked", "cuda", "cpu"],
        checked: true,
        tf32: false,
        open: |options| checked(gpu::<tessera_cuda::CudaDriver>(options)?),
    },
}

/// `under_test` checked op by op against the CPU backend.
#[cfg(all(feature = "checked", feature = "cpu"))]
fn checked<B: Backend>(under_test: B) -> Result<tessera_checked::Checked<B, tessera_cpu::Cpu>> {
    Ok(tessera_checked::Checked::new(
        under_test,
        tessera_cpu::Cpu::new(),
    ))
}

/// A device of a GPU backend (`tessera_gpu::Gpu<D>`): device `options.ordinal`, else the
/// driver's default, with the TF32 choice of `options` (checked: TF32 products go through the
/// driver's vendor BLAS only, so a handle that would run them on the tiled kernel, or without
/// the library, would be an f32 one under another name).
#[cfg(any(feature = "opencl", feature = "cuda"))]
fn gpu<D: tessera_gpu::DeviceRegistry>(options: &DeviceOptions) -> Result<tessera_gpu::Gpu<D>> {
    use tessera_gpu::{GemmEngine, Gpu};
    let dev = match options.ordinal {
        Some(ordinal) => Gpu::<D>::from_ordinal(ordinal)?,
        None => Gpu::<D>::new()?,
    };
    let Some(tf32) = options.tf32 else {
        return Ok(dev);
    };
    if tf32 {
        let backend = dev.driver().info().backend;
        let refuse = |why: String| Error::InvalidArgument {
            op: "tf32",
            msg: format!("TF32 products need the {backend} backend's BLAS library, {why}"),
        };
        if dev.options().engine == GemmEngine::Tiled {
            return Err(refuse("but this handle uses the tiled GEMM".into()));
        }
        if let Some(reason) = dev.driver().blas_unavailable() {
            return Err(refuse(format!("which is unavailable: {reason}")));
        }
    }
    Ok(dev.with_tf32(tf32))
}

/// A backend of the registry (cheap to copy; ordered as in the table, the CPU first).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BackendEntry {
    index: usize,
}

impl BackendEntry {
    fn entry(self) -> &'static Entry {
        &ENTRIES[self.index]
    }

    /// The name on the command line and in reports: `cpu`, `opencl`, `checked-opencl`, ...
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// One line saying what the backend is (the help of `--backend`; no final period, as clap
    /// writes help lines).
    pub fn about(self) -> &'static str {
        self.entry().about
    }

    /// The Cargo features of this crate the backend needs.
    pub fn features(self) -> impl Iterator<Item = &'static str> {
        self.entry().features.iter().map(|&(feature, _)| feature)
    }

    /// The features the backend needs that this build lacks (empty when it is compiled in).
    pub fn missing_features(self) -> Vec<&'static str> {
        let missing = self.entry().features.iter().filter(|(_, on)| !on);
        missing.map(|&(feature, _)| feature).collect()
    }

    /// Whether this build has the backend (every feature it needs is on).
    pub fn is_enabled(self) -> bool {
        self.entry().features.iter().all(|&(_, on)| on)
    }

    /// Whether it is a checked backend (`Checked<B, Cpu>`): for debugging, not for speed.
    pub fn is_checked(self) -> bool {
        self.entry().checked
    }

    /// Whether it can run f32 matrix products on TF32 ([`DeviceOptions::tf32`]).
    pub fn supports_tf32(self) -> bool {
        self.entry().tf32
    }

    /// Opens the backend's device as `options` say and runs `job` on it.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when the backend is not compiled in (naming the missing
    /// features) or cannot honour `options` (TF32); the backend's own error when the device
    /// cannot be opened ([`Error::NoDevice`] without its driver or device).
    pub fn open<J: BackendJob>(self, options: &DeviceOptions, job: J) -> Result<J::Output> {
        if options.tf32 == Some(true) && !self.supports_tf32() {
            let with_tf32: Vec<&str> = all()
                .filter(|b| b.supports_tf32())
                .map(BackendEntry::name)
                .collect();
            return Err(Error::InvalidArgument {
                op: "tf32",
                msg: format!(
                    "the {} backend has no TF32 matrix products (backends with them: {})",
                    self.name(),
                    with_tf32.join(", ")
                ),
            });
        }
        dispatch(self.name(), options, job)
    }

    /// Whether the backend is compiled in and its default device opens on this machine (the
    /// CPU always does).
    pub fn is_present(self) -> bool {
        /// Opens and does nothing.
        struct Probe;
        impl BackendJob for Probe {
            type Output = ();
            fn run<B: Backend>(self, _device: B) {}
        }
        self.is_enabled() && self.open(&DeviceOptions::default(), Probe).is_ok()
    }
}

impl fmt::Debug for BackendEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("BackendEntry").field(&self.name()).finish()
    }
}

impl fmt::Display for BackendEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Every backend of the table, compiled in or not, in its order.
pub fn all() -> impl Iterator<Item = BackendEntry> + Clone {
    (0..ENTRIES.len()).map(|index| BackendEntry { index })
}

/// The backends this build has, in the table's order.
pub fn enabled() -> impl Iterator<Item = BackendEntry> + Clone {
    all().filter(|b| b.is_enabled())
}

/// The backend called `name`.
///
/// # Errors
/// [`RegistryError::Unknown`] (listing the names this build accepts) for a name not in the
/// table; [`RegistryError::NotCompiled`] (naming the features to enable) for a backend of the
/// table this build lacks.
pub fn lookup(name: &str) -> std::result::Result<BackendEntry, RegistryError> {
    lookup_among(name, true)
}

/// [`lookup`] among the compiled-in backends, checked ones included or not
/// ([`RegistryError::Excluded`] for a checked one left out).
pub(crate) fn lookup_among(
    name: &str,
    with_checked: bool,
) -> std::result::Result<BackendEntry, RegistryError> {
    let accepted = || -> Vec<&'static str> {
        enabled()
            .filter(|b| with_checked || !b.is_checked())
            .map(BackendEntry::name)
            .collect()
    };
    let Some(found) = all().find(|b| b.name() == name) else {
        return Err(RegistryError::Unknown {
            name: name.to_string(),
            available: accepted(),
        });
    };
    if !found.is_enabled() {
        return Err(not_compiled(found.name()));
    }
    if found.is_checked() && !with_checked {
        return Err(RegistryError::Excluded {
            name: found.name(),
            available: accepted(),
        });
    }
    Ok(found)
}

/// The error for a backend of the table this build lacks.
fn not_compiled(name: &'static str) -> RegistryError {
    let features = all()
        .find(|b| b.name() == name)
        .map(BackendEntry::missing_features)
        .unwrap_or_default();
    RegistryError::NotCompiled { name, features }
}

/// A backend name that cannot be used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegistryError {
    /// No backend has this name.
    Unknown {
        /// The name asked for.
        name: String,
        /// The names that would be accepted.
        available: Vec<&'static str>,
    },
    /// The backend exists but this build does not have it.
    NotCompiled {
        /// The backend.
        name: &'static str,
        /// The Cargo features that compile it in.
        features: Vec<&'static str>,
    },
    /// A checked backend where only unchecked ones are accepted (benchmarks).
    Excluded {
        /// The backend.
        name: &'static str,
        /// The names that would be accepted.
        available: Vec<&'static str>,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegistryError::Unknown { name, available } => {
                write!(f, "unknown backend `{name}`; available: ")?;
                write!(f, "{}", available.join(", "))?;
                let absent: Vec<&str> = all()
                    .filter(|b| !b.is_enabled())
                    .map(BackendEntry::name)
                    .collect();
                if !absent.is_empty() {
                    write!(f, " (not in this build: {})", absent.join(", "))?;
                }
                Ok(())
            }
            RegistryError::NotCompiled { name, features } => {
                let quoted: Vec<String> = features.iter().map(|f| format!("`{f}`")).collect();
                let plural = if features.len() == 1 { "" } else { "s" };
                write!(
                    f,
                    "the `{name}` backend is not in this build: rebuild with the Cargo \
                     feature{plural} {} (`--features {}`)",
                    quoted.join(", "),
                    features.join(",")
                )
            }
            RegistryError::Excluded { name, available } => write!(
                f,
                "`{name}` is a checked backend (every op also on the CPU), not accepted here; \
                 available: {}",
                available.join(", ")
            ),
        }
    }
}

impl std::error::Error for RegistryError {}

impl From<RegistryError> for Error {
    fn from(e: RegistryError) -> Error {
        Error::InvalidArgument {
            op: "backend",
            msg: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_the_cpu_comes_first() {
        let names: Vec<&str> = all().map(BackendEntry::name).collect();
        let mut unique = names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        assert_eq!(names[0], "cpu");
        assert!(all().all(|b| !b.about().is_empty() && b.features().count() > 0));
    }

    #[test]
    fn every_existing_spelling_is_in_the_table() {
        for name in [
            "cpu",
            "opencl",
            "cuda",
            "checked-cpu",
            "checked-opencl",
            "checked-cuda",
        ] {
            let entry = all().find(|b| b.name() == name).expect(name);
            assert_eq!(entry.is_checked(), name.starts_with("checked-"), "{name}");
            assert_eq!(entry.supports_tf32(), name == "cuda", "{name}");
        }
    }

    #[test]
    fn lookup_finds_a_compiled_in_backend_by_its_name() {
        let cpu = lookup("cpu").unwrap();
        assert_eq!((cpu.name(), cpu.to_string()), ("cpu", "cpu".to_string()));
        assert!(cpu.is_enabled() && !cpu.is_checked());
        assert!(cpu.missing_features().is_empty());
        assert_eq!(format!("{cpu:?}"), "BackendEntry(\"cpu\")");
        assert_eq!(enabled().next(), Some(cpu));
        assert!(cpu.is_present());
    }

    #[test]
    fn an_unknown_name_lists_the_available_ones() {
        let err = lookup("tpu").unwrap_err();
        let available: Vec<&str> = enabled().map(BackendEntry::name).collect();
        assert_eq!(
            err,
            RegistryError::Unknown {
                name: "tpu".into(),
                available: available.clone()
            }
        );
        let message = err.to_string();
        assert!(
            message.starts_with(&format!(
                "unknown backend `tpu`; available: {}",
                available.join(", ")
            )),
            "{message}"
        );
        // The names are exact: no case folding, no prefixes.
        assert!(lookup("CPU").is_err() && lookup("open").is_err());
    }

    #[test]
    fn a_backend_without_its_feature_names_the_feature() {
        // `cuda` is off in the workspace's test build; should it be on, any other absent entry
        // makes the same point.
        let Some(absent) = all().find(|b| !b.is_enabled()) else {
            return;
        };
        let err = lookup(absent.name()).unwrap_err();
        let RegistryError::NotCompiled { name, features } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(*name, absent.name());
        assert_eq!(*features, absent.missing_features());
        let message = err.to_string();
        for feature in features {
            assert!(message.contains(&format!("`{feature}`")), "{message}");
        }
        assert!(message.contains("not in this build"), "{message}");
        assert!(!absent.is_present());
        // Opening it anyway is the same error, as a tessera error.
        let opened = absent.open(&DeviceOptions::default(), Nothing).unwrap_err();
        assert!(
            matches!(&opened, Error::InvalidArgument { op: "backend", msg } if *msg == message),
            "{opened:?}"
        );
        // An unknown name says which backends this build lacks.
        assert!(lookup("tpu")
            .unwrap_err()
            .to_string()
            .contains(&format!("not in this build: {}", absent.name())));
    }

    #[cfg(not(feature = "cuda"))]
    #[test]
    fn cuda_without_its_feature_says_to_build_with_it() {
        let message = lookup("cuda").unwrap_err().to_string();
        assert!(message.contains("feature `cuda`"), "{message}");
        assert!(message.contains("`--features cuda`"), "{message}");
        // A checked CUDA needs `checked` too: the message names whichever of them is off.
        let message = lookup("checked-cuda").unwrap_err().to_string();
        assert!(message.contains("`cuda`"), "{message}");
        assert_eq!(
            message.contains("`checked`"),
            cfg!(not(feature = "checked")),
            "{message}"
        );
    }

    #[test]
    fn checked_backends_can_be_left_out() {
        let err = lookup_among("checked-cpu", false);
        if cfg!(all(feature = "checked", feature = "cpu")) {
            let message = err.unwrap_err().to_string();
            assert!(
                message.contains("`checked-cpu` is a checked backend"),
                "{message}"
            );
            assert!(message.contains("available: cpu"), "{message}");
            assert!(!message.contains("checked-opencl"), "{message}");
        }
        assert_eq!(lookup_among("cpu", false).unwrap().name(), "cpu");
    }

    /// Opens and returns the backend's name.
    struct Nothing;
    impl BackendJob for Nothing {
        type Output = &'static str;
        fn run<B: Backend>(self, device: B) -> &'static str {
            device.name()
        }
    }

    #[test]
    fn open_hands_the_device_to_the_job() {
        let cpu = lookup("cpu").unwrap();
        assert_eq!(cpu.open(&DeviceOptions::default(), Nothing).unwrap(), "cpu");
        // An ordinal is meaningless on the CPU and ignored; TF32 is refused, naming who has it.
        let one = DeviceOptions {
            ordinal: Some(1),
            tf32: Some(false),
        };
        assert_eq!(cpu.open(&one, Nothing).unwrap(), "cpu");
        let tf32 = DeviceOptions {
            tf32: Some(true),
            ..DeviceOptions::default()
        };
        let err = cpu.open(&tf32, Nothing).unwrap_err().to_string();
        assert!(err.contains("the cpu backend has no TF32"), "{err}");
        assert!(err.contains("backends with them: cuda"), "{err}");
    }

    #[cfg(all(feature = "checked", feature = "cpu"))]
    #[test]
    fn a_checked_backend_opens_as_checked() {
        let checked = lookup("checked-cpu").unwrap();
        assert!(checked.is_checked());
        let name = checked.open(&DeviceOptions::default(), Nothing).unwrap();
        assert_eq!(name, "checked");
    }
}
