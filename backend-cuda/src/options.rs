//! [`CudaOptions`]: how a [`crate::Cuda`] handle computes matrix products.

use tessera_core::kernels::GemmTiles;
use tessera_core::{Error, Result};
use tessera_gpu::{GemmConfig, GemmEngine, GemmOptions};

/// Environment variable read by [`CudaOptions::from_env`]: `auto`, `cublas` (or `blas`) or
/// `tiled`.
pub const GEMM_ENV_VAR: &str = "TESSERA_CUDA_GEMM";

/// Environment variable read by [`CudaOptions::from_env`]: the tiled kernel's tile sizes as
/// `bm,bn,bk,tm,tn`.
pub const TILES_ENV_VAR: &str = "TESSERA_CUDA_GEMM_TILES";

/// The tile configuration of the tiled GEMM unless told otherwise: 64 x 64 outputs per block of
/// 16 x 16 threads, 16-deep shared tiles (16 KiB of shared memory in f64).
pub const DEFAULT_TILES: GemmTiles = GemmTiles::new(64, 64, 16, 4, 4);

/// Options of a [`crate::Cuda`] handle. Handles with different options on one device share
/// its memory, stream and kernels; their tensors can meet in one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CudaOptions {
    /// The GEMM implementation ([`GemmEngine::Blas`] is cuBLAS).
    pub gemm: GemmEngine,
    /// The tiled kernel's configuration (must satisfy [`GemmTiles::is_valid`] and use at most
    /// 1024 threads and 48 KiB of shared memory per block).
    pub tiles: GemmTiles,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            gemm: GemmEngine::Auto,
            tiles: DEFAULT_TILES,
        }
    }
}

impl CudaOptions {
    /// The defaults, overridden by [`GEMM_ENV_VAR`] and [`TILES_ENV_VAR`] when set.
    pub fn from_env() -> Result<Self> {
        let mut options = CudaOptions::default();
        if let Ok(text) = std::env::var(GEMM_ENV_VAR) {
            options.gemm = parse_engine(&text)?;
        }
        if let Ok(text) = std::env::var(TILES_ENV_VAR) {
            options.tiles = parse_tiles(&text)?;
        }
        options.check()?;
        Ok(options)
    }

    /// Errors unless the tile configuration can run on every CUDA device.
    pub fn check(&self) -> Result<()> {
        let t = &self.tiles;
        let (wx, wy) = if t.is_valid() { t.work_group() } else { (0, 0) };
        if !t.is_valid() || wx * wy == 0 || wx * wy > 1024 || t.local_bytes(8) > 48 * 1024 {
            return Err(Error::InvalidArgument {
                op: "cuda gemm tiles",
                msg: format!(
                    "{t:?} needs tm | bm, tn | bn, at most 1024 threads and 48 KiB of shared \
                     memory in f64"
                ),
            });
        }
        Ok(())
    }
}

/// Parses `auto`, `cublas`, `blas` or `tiled`.
fn parse_engine(text: &str) -> Result<GemmEngine> {
    if text.trim().eq_ignore_ascii_case("cublas") {
        return Ok(GemmEngine::Blas);
    }
    GemmEngine::parse(text)
}

impl From<CudaOptions> for GemmOptions {
    fn from(options: CudaOptions) -> Self {
        GemmOptions {
            engine: options.gemm,
            config: GemmConfig::tiled(options.tiles),
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
}
