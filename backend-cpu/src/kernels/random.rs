//! Counter-based random draws, identical on every backend.

use super::fill::counter_based;
use crate::checks::unsupported;
use crate::CpuStorage;
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{DType, Distribution, Result};

/// `numel` samples where element `i` is `sample_*(dist, seed, offset + i)`.
pub(crate) fn random(
    dist: Distribution,
    numel: usize,
    dtype: DType,
    seed: u64,
    offset: u64,
) -> Result<CpuStorage> {
    Ok(match dtype {
        DType::F32 => CpuStorage::F32(counter_based(numel, offset, |i| sample_f32(dist, seed, i))?),
        DType::F64 => CpuStorage::F64(counter_based(numel, offset, |i| sample_f64(dist, seed, i))?),
        _ => return Err(unsupported("random", dtype)),
    })
}
