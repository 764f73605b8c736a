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

use crate::device::DeviceInfo;
use crate::driver::{lock, OpenClDriver};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tessera_core::{DType, Error, Result};
use tessera_gpu::kernels::{program_source, Dialect, GemmTiles, Program};
use tessera_gpu::tuning::time_gemm;
use tessera_gpu::Runtime;

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

pub use tessera_gpu::{GemmConfig, GemmKernel};

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

/// The GEMM configuration for `dtype` on `rt`'s device (tuned on first use; what
/// `OpenCl::gemm_config` answers).
pub(crate) fn gemm_config(rt: &Arc<Runtime<OpenClDriver>>, dtype: DType) -> Result<GemmConfig> {
    let mut chosen = lock(rt.driver().gemm_configs(), "matmul")?;
    if let Some(config) = chosen.get(&dtype) {
        return Ok(*config);
    }
    let config = choose(rt, dtype)?;
    chosen.insert(dtype, config);
    Ok(config)
}

/// Whether `config` fits the device's work-group and local-memory limits.
fn fits(info: &DeviceInfo, dtype: DType, config: &GemmConfig) -> bool {
    let tiles = &config.tiles;
    let (wx, wy) = tiles.work_group();
    tiles.is_valid()
        && wx * wy <= info.max_work_group_size
        && tiles.local_bytes(tessera_gpu::kernels::compute_size(dtype)) as u64
            <= info.local_mem_bytes
}

/// A configuration small enough for any device.
fn fallback(info: &DeviceInfo) -> GemmConfig {
    let mut side = 1;
    while (2 * side) * (2 * side) <= info.max_work_group_size && side < 16 {
        side *= 2;
    }
    GemmConfig {
        kernel: GemmKernel::Tiled,
        tiles: GemmTiles::new(side, side, 8, 1, 1),
    }
}

fn choose(rt: &Arc<Runtime<OpenClDriver>>, dtype: DType) -> Result<GemmConfig> {
    let info = rt.driver().device_info();
    if let Ok(text) = std::env::var(TILES_ENV_VAR) {
        let config = GemmConfig::parse(&text).ok_or_else(|| Error::InvalidArgument {
            op: "matmul",
            msg: format!("{TILES_ENV_VAR}=`{text}` is not bm,bn,bk,tm,tn[,direct]"),
        })?;
        if !fits(info, dtype, &config) {
            return Err(Error::InvalidArgument {
                op: "matmul",
                msg: format!("{TILES_ENV_VAR}: {config} does not fit {}", info.name),
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
    let candidates: Vec<GemmConfig> = tiled
        .chain(direct)
        .filter(|c| fits(info, dtype, c))
        .collect();
    let Some(&first) = candidates.first() else {
        return Ok(fallback(info));
    };
    debug_assert!(fits(info, dtype, &first));
    let tuning_off = std::env::var(AUTOTUNE_ENV_VAR)
        .is_ok_and(|v| matches!(v.trim(), "0" | "off" | "false" | "no"));
    if tuning_off {
        return Ok(first);
    }
    let key = cache_key(info, dtype);
    if let Some(config) = read_cache(&key).filter(|c| fits(info, dtype, c)) {
        return Ok(config);
    }
    // A candidate the device rejects (e.g. a work-group too large for the kernel's registers)
    // is skipped; if every one fails, the minimal fallback is used.
    let mut best = (fallback(info), Duration::MAX);
    for config in candidates {
        if let Ok(time) = time_gemm(rt, dtype, &config, TUNE_SIZE) {
            if time < best.1 {
                best = (config, time);
            }
        }
    }
    write_cache(&key, &best.0);
    Ok(best.0)
}

/// FNV-1a: a stable hash of the kernel source (so that kernel changes retune).
fn fnv1a(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The cache key of `rt`'s device for `dtype`.
fn cache_key(info: &DeviceInfo, dtype: DType) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '|'], " ");
    format!(
        "{}|{}|{}|{}|{:016x}",
        clean(&info.platform_name),
        clean(&info.name),
        clean(&info.driver_version),
        dtype,
        fnv1a(&program_source(Dialect::OpenCl, Program::Gemm))
    )
}

fn read_cache(key: &str) -> Option<GemmConfig> {
    let text = std::fs::read_to_string(cache_dir()?.join(CACHE_FILE)).ok()?;
    text.lines()
        .filter_map(|line| line.split_once('\t'))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| GemmConfig::parse(v))
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
    fn the_source_hash_is_stable() {
        assert_eq!(fnv1a(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a("a"), 0xaf63_dc4c_8601_ec8c);
    }
}
