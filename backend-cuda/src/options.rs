//! [`CudaOptions`]: how a [`crate::Cuda`] handle computes matrix products, as the environment
//! or a caller states it (`dev.with_options(options.into())`).

use tessera_core::{Error, Result};
use tessera_gpu::kernels::GemmTiles;
use tessera_gpu::{GemmConfig, GemmEngine, GemmOptions};

/// Environment variable read by [`CudaOptions::from_env`]: `auto`, `cublas` (or `blas`) or
/// `tiled`.
pub const GEMM_ENV_VAR: &str = "TESSERA_CUDA_GEMM";

/// Environment variable read by [`CudaOptions::from_env`]: the tiled kernel's tile sizes as
/// `bm,bn,bk,tm,tn`.
pub const TILES_ENV_VAR: &str = "TESSERA_CUDA_GEMM_TILES";

/// Environment variable read by [`CudaOptions::from_env`]: `1`/`true`/`on` lets f32 matrix
/// products use TF32 tensor cores through cuBLAS ([`CudaOptions::allow_tf32`]); `0`/`false`/
/// `off` (or unset) keeps full f32 precision.
pub const TF32_ENV_VAR: &str = "TESSERA_CUDA_TF32";

/// The tile configuration of the tiled GEMM unless told otherwise: 64 x 64 outputs per block of
/// 16 x 16 threads, 16-deep shared tiles (16 KiB of shared memory in f64).
pub const DEFAULT_TILES: GemmTiles = GemmTiles::new(64, 64, 16, 4, 4);

/// Options of a [`crate::Cuda`] handle, converted into the engine's
/// [`GemmOptions`] (`Cuda::with_options(options.into())`). Handles with different options on
/// one device share its memory, stream and kernels; their tensors can meet in one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CudaOptions {
    /// The GEMM implementation ([`GemmEngine::Blas`] is cuBLAS).
    pub gemm: GemmEngine,
    /// The tiled kernel's configuration (must satisfy [`GemmTiles::is_valid`] and use at most
    /// 1024 threads and 48 KiB of shared memory per block).
    pub tiles: GemmTiles,
    /// Whether f32 matrix products may use TF32 tensor cores (cuBLAS
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`: inputs rounded to 10 mantissa bits, f32 accumulation;
    /// about 8x the f32 throughput on an H100/H200, relative error around 1e-3). Off by
    /// default, as in PyTorch (`torch.backends.cuda.matmul.allow_tf32 = False`). Only cuBLAS
    /// products are affected, never the tiled kernel, f64 or 16-bit dtypes.
    pub allow_tf32: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            gemm: GemmEngine::Auto,
            tiles: DEFAULT_TILES,
            allow_tf32: false,
        }
    }
}

impl CudaOptions {
    /// The defaults, overridden by [`GEMM_ENV_VAR`], [`TILES_ENV_VAR`] and [`TF32_ENV_VAR`]
    /// when set.
    pub fn from_env() -> Result<Self> {
        let mut options = CudaOptions::default();
        if let Ok(text) = std::env::var(GEMM_ENV_VAR) {
            options.gemm = parse_engine(&text)?;
        }
        if let Ok(text) = std::env::var(TILES_ENV_VAR) {
            options.tiles = parse_tiles(&text)?;
        }
        if let Ok(text) = std::env::var(TF32_ENV_VAR) {
            options.allow_tf32 = parse_switch(TF32_ENV_VAR, &text)?;
        }
        options.check()?;
        Ok(options)
    }

    /// Errors unless the tile configuration can run on every CUDA device.
    pub fn check(&self) -> Result<()> {
        check_tiles(&self.tiles)
    }
}

/// Errors unless `tiles` can run on every CUDA device: valid, at most 1024 threads and 48 KiB of
/// shared memory (in f64) per block.
pub(crate) fn check_tiles(tiles: &GemmTiles) -> Result<()> {
    let (wx, wy) = if tiles.is_valid() {
        tiles.work_group()
    } else {
        (0, 0)
    };
    if wx * wy == 0 || wx * wy > 1024 || tiles.local_bytes(8) > 48 * 1024 {
        return Err(Error::InvalidArgument {
            op: "cuda gemm tiles",
            msg: format!(
                "{tiles:?} needs tm | bm, tn | bn, at most 1024 threads and 48 KiB of shared \
                 memory in f64"
            ),
        });
    }
    Ok(())
}

/// Parses `auto`, `cublas`, `blas` or `tiled`.
fn parse_engine(text: &str) -> Result<GemmEngine> {
    if text.trim().eq_ignore_ascii_case("cublas") {
        return Ok(GemmEngine::Blas);
    }
    GemmEngine::parse(text)
}

/// Parses an on/off switch: `1`, `true`, `on`, `yes` or `0`, `false`, `off`, `no`, `` (any
/// case).
fn parse_switch(name: &'static str, text: &str) -> Result<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "on" | "yes" => Ok(true),
        "0" | "false" | "off" | "no" | "" => Ok(false),
        other => Err(Error::InvalidArgument {
            op: name,
            msg: format!("`{other}` is not 1/true/on or 0/false/off"),
        }),
    }
}

impl From<CudaOptions> for GemmOptions {
    fn from(options: CudaOptions) -> Self {
        GemmOptions {
            engine: options.gemm,
            config: GemmConfig::tiled(options.tiles),
            allow_tf32: options.allow_tf32,
        }
    }
}

/// Parses `bm,bn,bk,tm,tn`.
fn parse_tiles(text: &str) -> Result<GemmTiles> {
    let values: Vec<usize> = text
        .split(',')
        .map(|v| v.trim().parse::<usize>())
        .collect::<std::result::Result<_, _>>()
        .map_err(|e| Error::InvalidArgument {
            op: "cuda gemm tiles",
            msg: format!("`{text}` is not bm,bn,bk,tm,tn: {e}"),
        })?;
    let [bm, bn, bk, tm, tn] = values[..] else {
        return Err(Error::InvalidArgument {
            op: "cuda gemm tiles",
            msg: format!("`{text}` does not have five values bm,bn,bk,tm,tn"),
        });
    };
    Ok(GemmTiles::new(bm, bn, bk, tm, tn))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_and_tiles_parse() {
        assert_eq!(parse_engine("CUBLAS").unwrap(), GemmEngine::Blas);
        assert_eq!(parse_engine("tiled").unwrap(), GemmEngine::Tiled);
        assert!(parse_engine("fast").is_err());
        assert_eq!(
            parse_tiles("32, 32, 16, 4, 4").unwrap(),
            GemmTiles::CANDIDATES[0]
        );
        assert!(parse_tiles("1,2,3").is_err());
        assert!(CudaOptions::default().check().is_ok());
        let too_big = CudaOptions {
            tiles: GemmTiles::new(256, 256, 32, 1, 1),
            ..CudaOptions::default()
        };
        assert!(too_big.check().is_err());
    }

    #[test]
    fn tf32_is_off_by_default_and_reaches_the_engine_options() {
        assert!(!CudaOptions::default().allow_tf32);
        assert!(!GemmOptions::from(CudaOptions::default()).allow_tf32);
        let on = CudaOptions {
            allow_tf32: true,
            ..CudaOptions::default()
        };
        assert!(GemmOptions::from(on).allow_tf32);
    }

    #[test]
    fn switches_parse() {
        for on in ["1", "true", "ON", " yes "] {
            assert!(parse_switch(TF32_ENV_VAR, on).unwrap(), "{on}");
        }
        for off in ["0", "false", "Off", "no", ""] {
            assert!(!parse_switch(TF32_ENV_VAR, off).unwrap(), "{off}");
        }
        let err = parse_switch(TF32_ENV_VAR, "fast").unwrap_err().to_string();
        assert!(err.contains("fast"), "{err}");
    }
}
