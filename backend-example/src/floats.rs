//! Float kernels compute in f64 and round once to the output dtype.
//!
//! f32 -> f64 is exact, and one rounding of an f64 result to f32 is as accurate as (for `+`,
//! `-`, `*`, `/`, `sqrt`: identical to) computing in f32. It lets every float kernel be written
//! once, at the cost of speed, which this backend does not care about.

use tessera_core::{DType, HostData};

/// The elements as f64 when they are floats, `None` for i64 and bool.
pub(crate) fn to_f64s(data: &HostData) -> Option<Vec<f64>> {
    match data {
        HostData::F32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        HostData::F64(v) => Some(v.clone()),
        HostData::I64(_) | HostData::Bool(_) => None,
    }
}

/// f64 results stored as the float `dtype` (rounded to nearest for f32).
pub(crate) fn from_f64s(dtype: DType, values: Vec<f64>) -> HostData {
    match dtype {
        DType::F32 => HostData::F32(values.into_iter().map(|x| x as f32).collect()),
        _ => HostData::F64(values),
    }
}
