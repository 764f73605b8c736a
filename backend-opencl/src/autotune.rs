//! Choosing the GEMM kernel and tile configuration per device: a few candidates are timed once
//! and the winner is cached in memory and on disk.
//!
//! Two kernels of `gemm.cl.c` compete: `gemm` (local-memory tiles, for GPUs) with the shared
//! [`GemmTiles::CANDIDATES`], and `gemm_direct` (register blocks over contiguous columns, no
//! local memory, for CPUs such as PoCL) with [`DIRECT_CANDIDATES`].
//!
//! * `TESSERA_OPENCL_GEMM_TILES=bm,bn,bk,tm,tn[,direct]` forces a configuration.
//! * `TESSERA_OPENCL_AUTOTUNE=0` skips timing and takes the first fitting default.
//! * Otherwise the cache file `opencl-gemm-tiles.txt` in [`cache_dir`] is consulted, keyed by
//!   platform, device, driver version, dtype and a hash of the GEMM source; on a miss every
//!   candidate that fits the device is timed on a 512-cube product (best of three after a
//!   warm-up) and the fastest is recorded.
//!
//! Timing waits for the device, so the first matrix product on a new machine performs a few
//! host synchronisations; later ones perform none.

use crate::ops::matmul::{launch_gemm, GemmProblem};
use crate::ops::transfer::full;
use crate::runtime::Runtime;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tensor_core::kernels::{program_source, Dialect, GemmTiles, Program};
use tensor_core::{DType, Error, Result};

/// Forces a tile configuration: `bm,bn,bk,tm,tn`.
pub const TILES_ENV_VAR: &str = "TESSERA_OPENCL_GEMM_TILES";
/// `0` or `off` disables timing.
pub const AUTOTUNE_ENV_VAR: &str = "TESSERA_OPENCL_AUTOTUNE";
/// Overrides the cache folder.
pub const CACHE_ENV_VAR: &str = "TESSERA_CACHE_DIR";
/// Name of the cache file.
const CACHE_FILE: &str = "opencl-gemm-tiles.txt";
/// Side of the timed product.
const TUNE_SIZE: usize = 512;

/// Tile configurations tried with the `gemm_direct` kernel (`bk` unused).
pub const DIRECT_CANDIDATES: [GemmTiles; 4] = [
    GemmTiles::new(32, 32, 1, 4, 8),
    GemmTiles::new(32, 64, 1, 4, 16),
    GemmTiles::new(64, 64, 1, 8, 8),
    GemmTiles::new(64, 128, 1, 8, 8),
];

/// Which GEMM kernel of `gemm.cl.c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmKernel {
    /// `gemm`: local-memory tiles and register blocking.
    Tiled,
    /// `gemm_direct`: register blocks over contiguous columns, no local memory.
    Direct,
}

impl GemmKernel {
    /// The kernel's name in the program.
    pub fn name(self) -> &'static str {
        match self {
            GemmKernel::Tiled => "gemm",
            GemmKernel::Direct => "gemm_direct",
        }
    }
}

/// A GEMM kernel with its tile configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// The kernel.
    pub kernel: GemmKernel,
    /// Its tiles.
    pub tiles: GemmTiles,
}

impl std::fmt::Display for GemmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = &self.tiles;
        write!(f, "{},{},{},{},{}", t.bm, t.bn, t.bk, t.tm, t.tn)?;
        if self.kernel == GemmKernel::Direct {
            f.write_str(",direct")?;
        }
        Ok(())
    }
}

/// The folder of Tessera's caches: `$TESSERA_CACHE_DIR`, else `$XDG_CACHE_HOME/tessera`, else
/// `$HOME/.cache/tessera`; None when none of them is set.
pub fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let Some(dir) = var(CACHE_ENV_VAR) {
        return Some(PathBuf::from(dir));
    }
    if let Some(dir) = var("XDG_CACHE_HOME") {
        return Some(PathBuf::from(dir).join("tessera"));
    }
    var("HOME").map(|home| PathBuf::from(home).join(".cache").join("tessera"))
}

/// The GEMM configuration for `dtype` on `rt`'s device (tuned on first use).
pub(crate) fn gemm_config(rt: &Arc<Runtime>, dtype: DType) -> Result<GemmConfig> {
    let mut chosen = rt
        .gemm_configs
        .lock()
        .map_err(|_| crate::error::backend_error("matmul", "tile cache poisoned"))?;
    if let Some(config) = chosen.get(&dtype) {
        return Ok(*config);
    }
    let config = choose(rt, dtype)?;
    chosen.insert(dtype, config);
    Ok(config)
}

/// Whether `config` fits the device's work-group and local-memory limits.
fn fits(rt: &Runtime, dtype: DType, config: &GemmConfig) -> bool {
    let tiles = &config.tiles;
    let (wx, wy) = tiles.work_group();
    tiles.is_valid()
        && wx * wy <= rt.info.max_work_group_size
        && tiles.local_bytes(dtype.size_in_bytes()) as u64 <= rt.info.local_mem_bytes
}

/// A configuration small enough for any device.
fn fallback(rt: &Runtime) -> GemmConfig {
    let mut side = 1;
    while (2 * side) * (2 * side) <= rt.info.max_work_group_size && side < 16 {
        side *= 2;
    }
    GemmConfig {
        kernel: GemmKernel::Tiled,
        tiles: GemmTiles::new(side, side, 8, 1, 1),
    }
}

fn choose(rt: &Arc<Runtime>, dtype: DType) -> Result<GemmConfig> {
    if let Ok(text) = std::env::var(TILES_ENV_VAR) {
        let config = parse_config(&text).ok_or_else(|| Error::InvalidArgument {
            op: "matmul",
            msg: format!("{TILES_ENV_VAR}=`{text}` is not bm,bn,bk,tm,tn[,direct]"),
        })?;
        if !fits(rt, dtype, &config) {
            return Err(Error::InvalidArgument {
                op: "matmul",
                msg: format!("{TILES_ENV_VAR}: {config} does not fit {}", rt.info.name),
            });
        }
        return Ok(config);
    }
    let tiled = GemmTiles::CANDIDATES.iter().map(|&tiles| GemmConfig {
        kernel: GemmKernel::Tiled,
        tiles,
    });
    let direct = DIRECT_CANDIDATES.iter().map(|&tiles| GemmConfig {
        kernel: GemmKernel::Direct,
        tiles,
    });
    let candidates: Vec<GemmConfig> = tiled.chain(direct).filter(|c| fits(rt, dtype, c)).collect();
    let Some(&first) = candidates.first() else {
        return Ok(fallback(rt));
    };
    debug_assert!(fits(rt, dtype, &first));
    let tuning_off = std::env::var(AUTOTUNE_ENV_VAR)
        .is_ok_and(|v| matches!(v.trim(), "0" | "off" | "false" | "no"));
    if tuning_off {
        return Ok(first);
    }
    let key = cache_key(rt, dtype);
    if let Some(config) = read_cache(&key).filter(|c| fits(rt, dtype, c)) {
        return Ok(config);
    }
    // A candidate the device rejects (e.g. a work-group too large for the kernel's registers)
    // is skipped; if every one fails, the minimal fallback is used.
    let mut best = (fallback(rt), Duration::MAX);
    for config in candidates {
        if let Ok(time) = time_config(rt, dtype, &config) {
            if time < best.1 {
                best = (config, time);
            }
        }
    }
    write_cache(&key, &best.0);
    Ok(best.0)
}

/// The best of three timed runs of a `TUNE_SIZE`-cube product (after a warm-up run that also
/// compiles the kernel).
pub(crate) fn time_config(
    rt: &Arc<Runtime>,
    dtype: DType,
    config: &GemmConfig,
) -> Result<Duration> {
    let s = TUNE_SIZE;
    let a = full(rt, s * s, dtype, 0.5)?;
    let b = full(rt, s * s, dtype, 0.25)?;
    let c = rt.alloc(dtype, s * s)?;
    let problem = GemmProblem {
        m: s,
        n: s,
        k: s,
        a: [0, s, 1, 0],
        b: [0, s, 1, 0],
        c_offset: 0,
        batch: 1,
    };
    launch_gemm(rt, config, &a, &b, &c, &problem)?;
    rt.finish()?;
    let mut best = Duration::MAX;
    for _ in 0..3 {
        let start = Instant::now();
        launch_gemm(rt, config, &a, &b, &c, &problem)?;
        rt.finish()?;
        best = best.min(start.elapsed());
    }
    Ok(best)
}

/// Parses `bm,bn,bk,tm,tn` with an optional `,direct` (or `,tiled`).
pub(crate) fn parse_config(text: &str) -> Option<GemmConfig> {
    let mut parts: Vec<&str> = text.split(',').map(str::trim).collect();
    let kernel = match parts.last() {
        Some(&"direct") => GemmKernel::Direct,
        Some(&"tiled") => GemmKernel::Tiled,
        _ => GemmKernel::Tiled,
    };
    if matches!(parts.last(), Some(&"direct" | &"tiled")) {
        parts.pop();
    }
    let v: Vec<usize> = parts
        .iter()
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [bm, bn, bk, tm, tn] = v[..] else {
        return None;
    };
    let tiles = GemmTiles::new(bm, bn, bk, tm, tn);
    tiles.is_valid().then_some(GemmConfig { kernel, tiles })
}

/// FNV-1a: a stable hash of the kernel source (so that kernel changes retune).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The cache key of `rt`'s device for `dtype`.
fn cache_key(rt: &Runtime, dtype: DType) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '|'], " ");
    format!(
        "{}|{}|{}|{}|{:016x}",
        clean(&rt.info.platform_name),
        clean(&rt.info.name),
        clean(&rt.info.driver_version),
        dtype,
        fnv1a(&program_source(Dialect::OpenCl, Program::Gemm))
    )
}

fn read_cache(key: &str) -> Option<GemmConfig> {
    let text = std::fs::read_to_string(cache_dir()?.join(CACHE_FILE)).ok()?;
    text.lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| parse_config(v))
}

/// Records `config` under `key` (best effort: a read-only cache folder only loses the record).
fn write_cache(key: &str, config: &GemmConfig) {
    let Some(dir) = cache_dir() else {
        return;
    };
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let path = dir.join(CACHE_FILE);
    let old = std::fs::read_to_string(&path).unwrap_or_default();
    let mut text: String = old
        .lines()
        .filter(|line| line.split_once('\t').is_none_or(|(k, _)| k != key))
        .map(|line| format!("{line}\n"))
        .collect();
    text.push_str(&format!("{key}\t{config}\n"));
    let tmp = dir.join(format!("{CACHE_FILE}.{}", std::process::id()));
    if std::fs::write(&tmp, text).is_ok() {
        let _ = std::fs::rename(&tmp, &path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_from_five_numbers_and_a_kernel() {
        let tiles = GemmTiles::new(64, 64, 16, 4, 4);
        assert_eq!(
            parse_config("64, 64,16,4,4"),
            Some(GemmConfig {
                kernel: GemmKernel::Tiled,
                tiles
            })
        );
        let direct = GemmConfig {
            kernel: GemmKernel::Direct,
            tiles,
        };
        assert_eq!(parse_config("64,64,16,4,4,direct"), Some(direct));
        assert_eq!(parse_config(&direct.to_string()), Some(direct));
        assert_eq!(parse_config("64,64,16,4"), None);
        assert_eq!(parse_config("64,64,16,3,4"), None);
    }

    #[test]
    fn the_source_hash_is_stable() {
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
