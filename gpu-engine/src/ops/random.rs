//! Counter-based random draws: element `i` is `sample_f32/f64(dist, seed, offset + i)`.

use crate::driver::{Driver, ModuleKey};
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use std::sync::Arc;
use tessera_core::{DType, Distribution, Error, Result};

/// `numel` samples of `dist` as `dtype` (f32 or f64).
pub(crate) fn random<D: Driver>(
    rt: &Arc<Runtime<D>>,
    dist: Distribution,
    numel: usize,
    dtype: DType,
    seed: u64,
    offset: u64,
) -> Result<GpuStorage<D>> {
    if !dtype.is_float() {
        return Err(Error::UnsupportedDType {
            op: "random",
            dtype,
        });
    }
    // The parameters as the reference rounds them: f32 draws use `low as f32` and
    // `(high - low) as f32` (or mean and std as f32).
    let (kernel, a, b) = match dist {
        Distribution::Uniform { low, high } => ("random_uniform", low, high - low),
        Distribution::Normal { mean, std } => ("random_normal", mean, std),
    };
    let (a, b) = match dtype {
        DType::F32 => (Arg::F32(a as f32), Arg::F32(b as f32)),
        _ => (Arg::F64(a), Arg::F64(b)),
    };
    let out = rt.alloc(dtype, numel)?;
    let args = [
        Arg::I64(numel as i64),
        Arg::U32(seed as u32),
        Arg::U32((seed >> 32) as u32),
        Arg::U64(offset),
        a,
        b,
        Arg::Buffer(&out),
    ];
    rt.launch_1d(&ModuleKey::tensor(dtype), kernel, &args, numel)?;
    Ok(out)
}
