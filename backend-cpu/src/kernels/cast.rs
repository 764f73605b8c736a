//! Dtype conversion.
//!
//! Rust's `as` gives exactly Tessera's rules: float to integer truncates toward zero, saturates
//! at the integer range and maps NaN to 0; integer and float widen or round to nearest. Anything
//! converts to bool as `x != 0` (so NaN is true), and bool converts to 0 or 1.

use super::copy::copy_strided;
use super::map::map1;
use crate::CpuStorage;
use tessera_core::{DType, Layout, Result};

/// Converts every element of `x` to `dtype`; the output is contiguous.
pub(crate) fn cast(x: &CpuStorage, layout: &Layout, dtype: DType) -> Result<CpuStorage> {
    macro_rules! from_numeric {
        ($v:expr, $t:ty) => {
            match dtype {
                DType::F32 => CpuStorage::F32(map1($v, layout, |x: $t| x as f32)?),
                DType::F64 => CpuStorage::F64(map1($v, layout, |x: $t| x as f64)?),
                DType::I64 => CpuStorage::I64(map1($v, layout, |x: $t| x as i64)?),
                DType::Bool => {
                    CpuStorage::Bool(map1($v, layout, |x: $t| u8::from(x != (0 as $t)))?)
                }
            }
        };
    }
    Ok(match x {
        CpuStorage::F32(v) if dtype == DType::F32 => CpuStorage::F32(copy_strided(v, layout)?),
        CpuStorage::F64(v) if dtype == DType::F64 => CpuStorage::F64(copy_strided(v, layout)?),
        CpuStorage::I64(v) if dtype == DType::I64 => CpuStorage::I64(copy_strided(v, layout)?),
        CpuStorage::F32(v) => from_numeric!(v, f32),
        CpuStorage::F64(v) => from_numeric!(v, f64),
        CpuStorage::I64(v) => from_numeric!(v, i64),
        CpuStorage::Bool(v) => {
            let truth = |b: u8| b != 0;
            match dtype {
                DType::F32 => {
                    CpuStorage::F32(map1(v, layout, move |b| f32::from(u8::from(truth(b))))?)
                }
                DType::F64 => {
                    CpuStorage::F64(map1(v, layout, move |b| f64::from(u8::from(truth(b))))?)
                }
                DType::I64 => CpuStorage::I64(map1(v, layout, move |b| i64::from(truth(b)))?),
                DType::Bool => CpuStorage::Bool(map1(v, layout, move |b| u8::from(truth(b)))?),
            }
        }
    })
}
