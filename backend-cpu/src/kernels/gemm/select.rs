//! Which GEMM path runs: the fastest one this CPU supports (detected at run time), unless
//! [`GEMM_ENV_VAR`] asks for another.

use std::sync::OnceLock;

/// The environment variable that picks the GEMM path: `auto` (the default: the fastest one
/// this CPU supports), `avx512`, `avx2` or `portable` (`matrixmultiply`). A path the CPU or the
/// build does not support falls back to the best one that it does, with a note on stderr.
pub const GEMM_ENV_VAR: &str = "TESSERA_CPU_GEMM";

/// A way of computing a GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemmPath {
    /// `matrixmultiply` (and portable GEMV loops): any CPU, and Miri.
    Portable,
    /// The blocked path with AVX2 + FMA micro-kernels.
    Avx2,
    /// The blocked path with AVX-512F micro-kernels.
    Avx512,
}

impl GemmPath {
    /// Every path, fastest first.
    pub(crate) const ALL: [GemmPath; 3] = [GemmPath::Avx512, GemmPath::Avx2, GemmPath::Portable];

    /// The name used in [`GEMM_ENV_VAR`] and in reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            GemmPath::Portable => "portable",
            GemmPath::Avx2 => "avx2",
            GemmPath::Avx512 => "avx512",
        }
    }

    /// Whether this build has the path and this CPU can run it (the portable path always).
    pub(crate) fn is_supported(self) -> bool {
        match self {
            GemmPath::Portable => true,
            GemmPath::Avx2 => avx2_supported(),
            GemmPath::Avx512 => avx512_supported(),
        }
    }

    /// The fastest supported path.
    pub(crate) fn best() -> GemmPath {
        GemmPath::ALL
            .into_iter()
            .find(|p| p.is_supported())
            .unwrap_or(GemmPath::Portable)
    }
}

#[cfg(all(target_arch = "x86_64", not(miri)))]
fn avx2_supported() -> bool {
    std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma")
}

#[cfg(not(all(target_arch = "x86_64", not(miri))))]
fn avx2_supported() -> bool {
    false
}

#[cfg(all(target_arch = "x86_64", tessera_avx512, not(miri)))]
fn avx512_supported() -> bool {
    std::is_x86_feature_detected!("avx512f")
}

#[cfg(not(all(target_arch = "x86_64", tessera_avx512, not(miri))))]
fn avx512_supported() -> bool {
    false
}

/// The path every GEMM of this process takes: chosen once, from [`GEMM_ENV_VAR`] and the CPU.
pub(crate) fn chosen_path() -> GemmPath {
    static CHOSEN: OnceLock<GemmPath> = OnceLock::new();
    *CHOSEN.get_or_init(|| {
        let wanted = std::env::var(GEMM_ENV_VAR).unwrap_or_default();
        let (path, note) = choose(&wanted);
        if let Some(note) = note {
            eprintln!("backend-cpu: {note}");
        }
        path
    })
}

/// The path for a [`GEMM_ENV_VAR`] value, and a note when the value could not be honoured.
pub(crate) fn choose(wanted: &str) -> (GemmPath, Option<String>) {
    let best = GemmPath::best();
    let wanted = wanted.trim().to_ascii_lowercase();
    if wanted.is_empty() || wanted == "auto" {
        return (best, None);
    }
    match GemmPath::ALL.into_iter().find(|p| p.name() == wanted) {
        Some(p) if p.is_supported() => (p, None),
        Some(p) => (
            best,
            Some(format!(
                "{GEMM_ENV_VAR}={}: not supported by this CPU or build; using {}",
                p.name(),
                best.name()
            )),
        ),
        None => (
            best,
            Some(format!(
                "{GEMM_ENV_VAR}={wanted}: unknown (auto, avx512, avx2, portable); using {}",
                best.name()
            )),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_and_empty_pick_the_best_path_and_portable_is_always_honoured() {
        assert_eq!(choose(""), (GemmPath::best(), None));
        assert_eq!(choose(" Auto "), (GemmPath::best(), None));
        assert_eq!(choose("portable"), (GemmPath::Portable, None));
        assert!(GemmPath::best().is_supported());
    }

    #[test]
    fn unknown_or_unsupported_values_fall_back_with_a_note() {
        let (path, note) = choose("sse9");
        assert_eq!(path, GemmPath::best());
        assert!(note.unwrap().contains("unknown"));
        for p in GemmPath::ALL {
            let (got, note) = choose(p.name());
            if p.is_supported() {
                assert_eq!((got, note), (p, None));
            } else {
                assert_eq!(got, GemmPath::best());
                assert!(note.unwrap().contains("not supported"));
            }
        }
    }
}
