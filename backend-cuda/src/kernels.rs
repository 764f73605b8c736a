//! The shared kernels of [`tessera_gpu::kernels`] as this backend compiles them: the modules it
//! loads, their NVRTC options, and the tools to check them without a GPU ([`compile`],
//! [`ptxas_check`]) or to compile them ahead of time for a machine without NVRTC
//! ([`precompile`], read back through [`KERNELS_DIR_ENV_VAR`]).
//!
//! At run time a module is taken, in order, from the folder [`KERNELS_DIR_ENV_VAR`] names (a
//! cubin for the device's exact architecture, else PTX for the highest virtual architecture not
//! above it, which the driver compiles) and otherwise compiled by NVRTC for the device's
//! architecture. Precompiled files carry a hash of the source and defines in their names, so a
//! stale folder is never used for changed kernels.

use crate::cuda::nvrtc::{Nvrtc, NvrtcOutput};
use crate::dynamic_library::find_executable;
use crate::options::DEFAULT_TILES;
use std::path::{Path, PathBuf};
use std::process::Command;
use tessera_core::{DType, Error, Result};
use tessera_gpu::kernels::{program_source, Dialect, GemmTiles, Program};
use tessera_gpu::ModuleKey;

pub use crate::cuda::nvrtc::NvrtcError;

/// Environment variable naming a folder of precompiled kernels (see [`precompile`]).
pub const KERNELS_DIR_ENV_VAR: &str = "TESSERA_CUDA_KERNELS";

/// Environment variable naming the `ptxas` executable (else `PATH`, the CUDA toolkit and PyPI's
/// `nvidia-cuda-nvcc-cu12` wheel are searched).
pub const PTXAS_ENV_VAR: &str = "TESSERA_PTXAS";

/// A GPU architecture to compile for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Arch {
    /// `compute_XY`: PTX, compiled by the driver when loaded (any device of that capability or
    /// newer).
    Virtual(u32),
    /// `sm_XY`: a cubin for devices of exactly that capability.
    Real(u32),
}

impl Arch {
    /// NVRTC's `--gpu-architecture` value: `compute_80`, `sm_90`, ...
    pub fn name(self) -> String {
        match self {
            Arch::Virtual(cc) => format!("compute_{cc}"),
            Arch::Real(cc) => format!("sm_{cc}"),
        }
    }

    /// What NVRTC produces for it.
    pub fn output(self) -> NvrtcOutput {
        match self {
            Arch::Virtual(_) => NvrtcOutput::Ptx,
            Arch::Real(_) => NvrtcOutput::Cubin,
        }
    }

    /// The file extension of its images.
    fn extension(self) -> &'static str {
        match self {
            Arch::Virtual(_) => "ptx",
            Arch::Real(_) => "cubin",
        }
    }
}

/// One module: a kernel program built for one dtype (and tile configuration).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelModule {
    pub(crate) key: ModuleKey,
}

impl KernelModule {
    pub(crate) fn new(key: ModuleKey) -> Self {
        KernelModule { key }
    }

    /// `tensor-f32`, `gemm-f64-TS_BM=64-...`.
    pub fn label(&self) -> String {
        self.key.label()
    }

    /// The complete CUDA C++ source (prelude included).
    pub fn source(&self) -> String {
        program_source(Dialect::Cuda, self.key.program)
    }

    /// The `NAME=VALUE` defines.
    pub fn defines(&self) -> Vec<String> {
        self.key.defines(crate::cuda::driver::BLOCK)
    }

    /// NVRTC's options for `arch`: the architecture, `--fmad=false` (random numbers are
    /// bit-exact only without contraction) and the defines.
    pub fn nvrtc_options(&self, arch: Arch) -> Vec<String> {
        let mut options = vec![
            format!("--gpu-architecture={}", arch.name()),
            "--fmad=false".to_string(),
        ];
        options.extend(self.defines().iter().map(|d| format!("-D{d}")));
        options
    }

    /// 64-bit FNV-1a of the source and the defines: changes whenever the compiled code would.
    pub fn content_hash(&self) -> u64 {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        let mut feed = |bytes: &[u8]| {
            for &b in bytes {
                hash ^= u64::from(b);
                hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
            }
        };
        feed(self.source().as_bytes());
        for d in self.defines() {
            feed(b"\0");
            feed(d.as_bytes());
        }
        hash
    }

    /// The file name of its image for `arch` in a precompiled folder.
    pub fn file_name(&self, arch: Arch) -> String {
        format!(
            "{}-{:016x}.{}.{}",
            self.label(),
            self.content_hash(),
            arch.name(),
            arch.extension()
        )
    }
}

/// The GEMM tile configurations a module exists for: the default and every candidate.
fn all_tiles() -> Vec<GemmTiles> {
    let mut tiles = vec![DEFAULT_TILES];
    for t in GemmTiles::CANDIDATES {
        if !tiles.contains(&t) {
            tiles.push(t);
        }
    }
    tiles
}

/// Every module this backend may load: the tensor program for each dtype, the GEMM program
/// for each float dtype (the 16-bit ones included) with each tile configuration of
/// [`GemmTiles::CANDIDATES`] and the default, and the attention program for f32 and f64 (16-bit
/// attention runs it in f32, see [`Program::has_dtype`]).
pub fn modules() -> Vec<KernelModule> {
    let mut modules = Vec::new();
    for &dtype in DType::ALL.iter().filter(|&&d| tessera_gpu::has_kernels(d)) {
        modules.push(KernelModule::new(ModuleKey::tensor(dtype)));
        if Program::Attention.has_dtype(dtype) {
            modules.push(KernelModule::new(ModuleKey {
                program: Program::Attention,
                dtype,
                extra_defines: Vec::new(),
            }));
        }
        if Program::Gemm.has_dtype(dtype) {
            for tiles in all_tiles() {
                modules.push(KernelModule::new(ModuleKey {
                    program: Program::Gemm,
                    dtype,
                    extra_defines: tiles.defines(),
                }));
            }
        }
    }
    modules
}

/// The modules a default handle loads (the GEMM with [`DEFAULT_TILES`] only): what
/// [`precompile`] writes.
pub fn default_modules() -> Vec<KernelModule> {
    let default_gemm = DEFAULT_TILES.defines();
    modules()
        .into_iter()
        .filter(|m| m.key.program != Program::Gemm || m.key.extra_defines == default_gemm)
        .collect()
}

/// The error of a compilation step, as a Tessera error naming the module.
fn compile_error(module: &KernelModule, arch: Arch, message: impl std::fmt::Display) -> Error {
    Error::Backend {
        backend: "cuda",
        op: "compile kernels",
        msg: format!("{} for {}: {message}", module.label(), arch.name()),
    }
}

/// Compiles `module` for `arch` with NVRTC: the PTX text or the cubin. A compile error carries
/// NVRTC's log.
pub fn compile(module: &KernelModule, arch: Arch) -> Result<Vec<u8>> {
    let nvrtc = Nvrtc::get().map_err(|e| Error::Backend {
        backend: "cuda",
        op: "compile kernels",
        msg: format!("NVRTC is not available: {e}"),
    })?;
    nvrtc
        .compile(
            &module.source(),
            &format!("{}.cu", module.label()),
            &module.nvrtc_options(arch),
            arch.output(),
        )
        .map_err(|e| compile_error(module, arch, e))
}

/// The NVRTC that [`compile`] uses: `Ok((version, library))` or why it is unavailable.
pub fn nvrtc_status() -> std::result::Result<((i32, i32), PathBuf), String> {
    Nvrtc::get().map(|n| (n.version(), n.path().to_path_buf()))
}

/// The `ptxas` executable, if one is found (see [`PTXAS_ENV_VAR`]).
pub fn find_ptxas() -> Option<PathBuf> {
    find_executable("ptxas", PTXAS_ENV_VAR, "nvidia/cuda_nvcc/bin")
}

/// Assembles `ptx` for the real architecture `sm` with `ptxas` (output discarded); the error
/// holds ptxas's diagnostics.
pub fn ptxas_check(ptxas: &Path, ptx: &[u8], sm: u32, name: &str) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("tessera-ptxas-{}", std::process::id()));
    let fail = |msg: String| Error::Backend {
        backend: "cuda",
        op: "ptxas",
        msg: format!("{name} for sm_{sm}: {msg}"),
    };
    std::fs::create_dir_all(&dir).map_err(|e| fail(format!("cannot create {dir:?}: {e}")))?;
    let input = dir.join(format!("{name}.ptx"));
    let output = dir.join(format!("{name}.sm_{sm}.cubin"));
    std::fs::write(&input, ptx).map_err(|e| fail(format!("cannot write {input:?}: {e}")))?;
    let result = Command::new(ptxas)
        .arg(format!("-arch=sm_{sm}"))
        .arg(&input)
        .arg("-o")
        .arg(&output)
        .output();
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&output);
    let out = result.map_err(|e| fail(format!("cannot run {}: {e}", ptxas.display())))?;
    if !out.status.success() {
        return Err(fail(format!(
            "{} failed: {}{}",
            ptxas.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(())
}

/// Compiles [`default_modules`] for every architecture of `archs` into `dir` (created if
/// needed) and returns the files written. Point [`KERNELS_DIR_ENV_VAR`] at `dir` on a machine
/// without NVRTC.
pub fn precompile(dir: &Path, archs: &[Arch]) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).map_err(|e| Error::Backend {
        backend: "cuda",
        op: "precompile kernels",
        msg: format!("cannot create {}: {e}", dir.display()),
    })?;
    let mut written = Vec::new();
    for module in default_modules() {
        for &arch in archs {
            let image = compile(&module, arch)?;
            let path = dir.join(module.file_name(arch));
            std::fs::write(&path, image).map_err(|e| Error::Backend {
                backend: "cuda",
                op: "precompile kernels",
                msg: format!("cannot write {}: {e}", path.display()),
            })?;
            written.push(path);
        }
    }
    Ok(written)
}

/// The precompiled image of `module` in `dir` for a device of compute capability `cc`
/// (`major * 10 + minor`): the cubin for `sm_cc`, else the PTX of the highest `compute_XY`
/// with `XY <= cc`. Returns the bytes and whether they are PTX.
pub(crate) fn find_precompiled(
    dir: &Path,
    module: &KernelModule,
    cc: u32,
) -> Option<(Vec<u8>, bool)> {
    let cubin = dir.join(module.file_name(Arch::Real(cc)));
    if let Ok(bytes) = std::fs::read(&cubin) {
        return Some((bytes, false));
    }
    let prefix = format!("{}-{:016x}.compute_", module.label(), module.content_hash());
    let best = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let arch: u32 = name
                .strip_prefix(&prefix)?
                .strip_suffix(".ptx")?
                .parse()
                .ok()?;
            (arch <= cc).then_some((arch, entry.path()))
        })
        .max_by_key(|(arch, _)| *arch)?;
    std::fs::read(best.1).ok().map(|bytes| (bytes, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_and_dtype_has_a_module_with_distinct_files() {
        let modules = modules();
        assert_eq!(
            modules.len(),
            6 + 2 + 4 * all_tiles().len(),
            "tensor x 6 dtypes, attention x f32/f64, gemm x tiles x 4 float dtypes"
        );
        let mut names: Vec<String> = modules
            .iter()
            .map(|m| m.file_name(Arch::Real(90)))
            .collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), modules.len());
        assert_eq!(default_modules().len(), 6 + 2 + 4);
    }

    #[test]
    fn options_disable_contraction_and_carry_the_defines() {
        let m = KernelModule::new(ModuleKey::tensor(DType::F64));
        let options = m.nvrtc_options(Arch::Virtual(80));
        assert_eq!(options[0], "--gpu-architecture=compute_80");
        assert!(options.contains(&"--fmad=false".to_string()));
        assert!(options.contains(&"-DT=f64".to_string()));
        assert!(options.contains(&"-DTS_F64=1".to_string()));
        assert!(options.iter().any(|o| o.starts_with("-DTS_REDUCE_WG=")));
        assert!(m.source().starts_with("/* Tessera kernel prelude for CUDA"));
    }

    #[test]
    fn precompiled_lookup_prefers_the_exact_cubin_then_the_best_ptx() {
        let dir = std::env::temp_dir().join(format!("tessera-precompiled-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let m = KernelModule::new(ModuleKey::tensor(DType::F32));
        std::fs::write(dir.join(m.file_name(Arch::Virtual(70))), b"ptx70").unwrap();
        std::fs::write(dir.join(m.file_name(Arch::Virtual(80))), b"ptx80").unwrap();
        std::fs::write(dir.join(m.file_name(Arch::Virtual(90))), b"ptx90").unwrap();
        std::fs::write(dir.join(m.file_name(Arch::Real(86))), b"cubin86").unwrap();
        assert_eq!(
            find_precompiled(&dir, &m, 86),
            Some((b"cubin86".to_vec(), false))
        );
        assert_eq!(
            find_precompiled(&dir, &m, 89),
            Some((b"ptx80".to_vec(), true))
        );
        assert_eq!(find_precompiled(&dir, &m, 60), None);
        let other = KernelModule::new(ModuleKey::tensor(DType::I64));
        assert_eq!(find_precompiled(&dir, &other, 90), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
