//! Float kernels compute in f64 and round once to the output dtype.
//!
//! f32 -> f64 is exact, and one rounding of an f64 result to f32 is as accurate as (for `+`,
//! `-`, `*`, `/`, `sqrt`: identical to) computing in f32. It lets every float kernel be written
//! once, at the cost of speed, which this backend does not care about.

use crate::alloc::collect;
use tessera_core::{DType, Error, HostData, Result};

/// The elements as f64 when they are floats, [`Error::UnsupportedDType`] naming `op` for i64
/// and bool.
pub(crate) fn to_f64s(op: &'static str, data: &HostData) -> Result<Vec<f64>> {
    match data {
        HostData::F32(v) => collect(v.len(), v.iter().map(|&x| x as f64)),
        HostData::F64(v) => collect(v.len(), v.iter().copied()),
        other => Err(Error::UnsupportedDType {
            op,
            dtype: other.dtype(),
        }),
    }
}

/// f64 results stored as the float `dtype` (rounded to nearest for f32).
pub(crate) fn from_f64s(dtype: DType, values: Vec<f64>) -> Result<HostData> {
    Ok(match dtype {
        DType::F32 => HostData::F32(collect(values.len(), values.into_iter().map(|x| x as f32))?),
        _ => HostData::F64(values),
    })
}
