//! How matrix products run: [`GemmEngine`] (vendor BLAS or the shared tiled kernel) and
//! [`GemmConfig`] (which kernel of `gemm.cl.c` and its tile sizes), together a handle's
//! [`GemmOptions`].

use crate::kernels::GemmTiles;
use std::fmt;
use tessera_core::{Error, Result};

/// Which GEMM implementation matrix products use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GemmEngine {
    /// The driver's BLAS ([`crate::Driver::blas_gemm`]) when it has one, the kernel otherwise.
    #[default]
    Auto,
    /// The driver's BLAS; a matrix product fails with a typed error when it has none. Operands
    /// BLAS cannot read in place (no unit stride) still go to the kernel.
    Blas,
    /// The shared GEMM kernel only.
    Tiled,
}

impl GemmEngine {
    /// Parses `auto`, `blas` or `tiled` (any case).
    pub fn parse(text: &str) -> Result<Self> {
        match text.trim().to_ascii_lowercase().as_str() {
            "auto" | "" => Ok(GemmEngine::Auto),
            "blas" => Ok(GemmEngine::Blas),
            "tiled" => Ok(GemmEngine::Tiled),
            other => Err(Error::InvalidArgument {
                op: "gemm engine",
                msg: format!("`{other}` is not auto, blas or tiled"),
            }),
        }
    }
}

/// Which GEMM kernel of `gemm.cl.c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GemmKernel {
    /// `gemm`: local-memory tiles and register blocking (GPUs).
    Tiled,
    /// `gemm_direct`: register blocks over contiguous columns, no local memory (CPUs).
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

impl GemmConfig {
    /// The `gemm` kernel with `tiles`.
    pub const fn tiled(tiles: GemmTiles) -> Self {
        GemmConfig {
            kernel: GemmKernel::Tiled,
            tiles,
        }
    }

    /// Parses `bm,bn,bk,tm,tn` with an optional `,direct` (or `,tiled`); None unless the tiles
    /// are valid ([`GemmTiles::is_valid`]).
    pub fn parse(text: &str) -> Option<GemmConfig> {
        let mut parts: Vec<&str> = text.split(',').map(str::trim).collect();
        let kernel = match parts.last() {
            Some(&"direct") => GemmKernel::Direct,
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
}

impl fmt::Display for GemmConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.tiles;
        write!(f, "{},{},{},{},{}", t.bm, t.bn, t.bk, t.tm, t.tn)?;
        if self.kernel == GemmKernel::Direct {
            f.write_str(",direct")?;
        }
        Ok(())
    }
}

/// How a [`crate::Gpu`] handle computes matrix products. The configuration is a request: a
/// driver that tunes its tiles per device answers with its own choice
/// ([`crate::Driver::gemm_config`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmOptions {
    /// BLAS or kernel.
    pub engine: GemmEngine,
    /// The kernel and tiles requested.
    pub config: GemmConfig,
    /// Whether f32 matrix products may run on TF32 tensor cores (inputs rounded to a 10-bit
    /// mantissa, f32 accumulation) where the driver's BLAS has them: cuBLAS's
    /// `CUBLAS_COMPUTE_32F_FAST_TF32`. Off by default, as PyTorch's
    /// `torch.backends.cuda.matmul.allow_tf32`; the tiled kernel and other dtypes ignore it.
    pub allow_tf32: bool,
}

impl Default for GemmOptions {
    /// [`GemmEngine::Auto`] and the `gemm` kernel with 64 x 64 outputs per block of 16 x 16
    /// work-items and 16-deep tiles, TF32 off.
    fn default() -> Self {
        GemmOptions {
            engine: GemmEngine::Auto,
            config: GemmConfig::tiled(GemmTiles::new(64, 64, 16, 4, 4)),
            allow_tf32: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse_from_five_numbers_and_a_kernel() {
        let tiles = GemmTiles::new(64, 64, 16, 4, 4);
        assert_eq!(
            GemmConfig::parse("64, 64,16,4,4"),
            Some(GemmConfig::tiled(tiles))
        );
        let direct = GemmConfig {
            kernel: GemmKernel::Direct,
            tiles,
        };
        assert_eq!(GemmConfig::parse("64,64,16,4,4,direct"), Some(direct));
        assert_eq!(GemmConfig::parse(&direct.to_string()), Some(direct));
        assert_eq!(GemmConfig::parse("64,64,16,4"), None);
        assert_eq!(GemmConfig::parse("64,64,16,3,4"), None);
    }

    #[test]
    fn engines_parse() {
        assert_eq!(GemmEngine::parse("BLAS").unwrap(), GemmEngine::Blas);
        assert_eq!(GemmEngine::parse("tiled").unwrap(), GemmEngine::Tiled);
        assert!(GemmEngine::parse("fast").is_err());
    }
}
