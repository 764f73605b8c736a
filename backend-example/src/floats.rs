//! Float kernels compute in f64 and round once to the output dtype.
//!
//! f32 -> f64 is exact, and one rounding of an f64 result to f32 is as accurate as (for `+`,
//! `-`, `*`, `/`, `sqrt`: identical to) computing in f32. It lets every float kernel be written
//! once, at the cost of speed, which this backend does not care about.
//!
//! The 16-bit floats (`F16`, `BF16`) are storage formats: every 16-bit value is exact in f64,
//! and a result is rounded once, to nearest even, with `tessera_core`'s correctly rounded
//! conversions `tessera_core::dtype::rounding::{f64_to_f16, f64_to_bf16}` (also behind
//! `Element::from_f64`; the `half` crate's own `f16::from_f64` ignores the low bits of the f64
//! and can round the wrong way). The contract asks for f32 arithmetic rounded once; f64
//! arithmetic rounded once is at least as accurate. A device computes in f32 and rounds with
//! `f16::from_f32` / `bf16::from_f32`, which round once, correctly.

use crate::alloc::collect;
use tessera_core::dtype::rounding::{f64_to_bf16, f64_to_f16};
use tessera_core::{DType, Error, HostData, Result};

/// The elements as f64 when they are floats, [`Error::UnsupportedDType`] naming `op` for i64
/// and bool.
pub(crate) fn to_f64s(op: &'static str, data: &HostData) -> Result<Vec<f64>> {
    match data {
        HostData::F32(v) => collect(v.len(), v.iter().map(|&x| x as f64)),
        HostData::F64(v) => collect(v.len(), v.iter().copied()),
        HostData::F16(v) => collect(v.len(), v.iter().map(|&x| f64::from(x))),
        HostData::BF16(v) => collect(v.len(), v.iter().map(|&x| f64::from(x))),
        other => Err(Error::UnsupportedDType {
            op,
            dtype: other.dtype(),
        }),
    }
}

/// f64 results stored as the float `dtype`, each rounded once to nearest even.
pub(crate) fn from_f64s(dtype: DType, values: Vec<f64>) -> Result<HostData> {
    let n = values.len();
    Ok(match dtype {
        DType::F32 => HostData::F32(collect(n, values.into_iter().map(|x| x as f32))?),
        DType::F16 => HostData::F16(collect(n, values.into_iter().map(f64_to_f16))?),
        DType::BF16 => HostData::BF16(collect(n, values.into_iter().map(f64_to_bf16))?),
        _ => HostData::F64(values),
    })
}
