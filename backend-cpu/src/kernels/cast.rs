//! Dtype conversion.
//!
//! Rust's `as` gives exactly Tessera's rules: float to integer truncates toward zero, saturates
//! at the integer range and maps NaN to 0; integer and float widen or round to nearest. Anything
//! converts to bool as `x != 0` (so NaN is true), and bool converts to 0 or 1. Conversions to
//! the 16-bit floats round once, to nearest with ties to even, from every source
//! ([`tessera_core::dtype::rounding`]); from them, every value is exact in f32 first.

use super::copy::copy_strided;
use super::map::map1;
use crate::alloc::Zeroable;
use crate::checks::unsupported;
use crate::storage::map_storage;
use crate::CpuStorage;
use tessera_core::dtype::rounding;
use tessera_core::{bf16, f16, BackendStorage, DType, Layout, Result};

/// Converts every element of `x` to `dtype`; the output is contiguous.
pub(crate) fn cast(x: &CpuStorage, layout: &Layout, dtype: DType) -> Result<CpuStorage> {
    if x.dtype() == dtype {
        return Ok(map_storage!(x, v => copy_strided(v, layout)?));
    }
    match x {
        CpuStorage::F32(v) => cast_from(v, layout, dtype),
        CpuStorage::F64(v) => cast_from(v, layout, dtype),
        CpuStorage::F16(v) => cast_from(v, layout, dtype),
        CpuStorage::BF16(v) => cast_from(v, layout, dtype),
        CpuStorage::I64(v) => cast_from(v, layout, dtype),
        CpuStorage::Bool(v) => cast_from(v, layout, dtype),
    }
}

fn cast_from<T: CastSource>(v: &[T], layout: &Layout, dtype: DType) -> Result<CpuStorage> {
    Ok(match dtype {
        DType::F32 => CpuStorage::F32(map1(v, layout, T::to_f32)?),
        DType::F64 => CpuStorage::F64(map1(v, layout, T::to_f64)?),
        DType::F16 => CpuStorage::F16(map1(v, layout, T::to_f16)?),
        DType::BF16 => CpuStorage::BF16(map1(v, layout, T::to_bf16)?),
        DType::I64 => CpuStorage::I64(map1(v, layout, T::to_i64)?),
        DType::Bool => CpuStorage::Bool(map1(v, layout, |x: T| u8::from(x.is_nonzero()))?),
        other => return Err(unsupported("cast", other)),
    })
}

/// `x` rounded to bf16, nearest with ties to even, NaN kept as a quiet NaN of the same sign:
/// what `bf16::from_f32` returns, written without branches so that loops over it vectorise.
#[inline(always)]
pub(crate) fn f32_to_bf16(x: f32) -> bf16 {
    let bits = x.to_bits();
    let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
    let quiet_nan = (bits >> 16) | 0x40;
    bf16::from_bits((if x.is_nan() { quiet_nan } else { rounded }) as u16)
}

/// An element type with a conversion to every dtype.
trait CastSource: Copy + Sync + Zeroable {
    fn to_f32(self) -> f32;
    fn to_f64(self) -> f64;
    fn to_f16(self) -> f16;
    fn to_bf16(self) -> bf16;
    fn to_i64(self) -> i64;
    fn is_nonzero(self) -> bool;
}

/// The floats that are exact in f32 (f32 itself and the 16-bit ones): one rounding from f32.
macro_rules! cast_via_f32 {
    ($t:ty, $to_f32:expr) => {
        impl CastSource for $t {
            fn to_f32(self) -> f32 {
                $to_f32(self)
            }
            fn to_f64(self) -> f64 {
                f64::from($to_f32(self))
            }
            fn to_f16(self) -> f16 {
                f16::from_f32($to_f32(self))
            }
            fn to_bf16(self) -> bf16 {
                f32_to_bf16($to_f32(self))
            }
            fn to_i64(self) -> i64 {
                $to_f32(self) as i64
            }
            fn is_nonzero(self) -> bool {
                $to_f32(self) != 0.0
            }
        }
    };
}
cast_via_f32!(f32, |x: f32| x);
cast_via_f32!(f16, f16::to_f32);
cast_via_f32!(bf16, bf16::to_f32);

impl CastSource for f64 {
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn to_f16(self) -> f16 {
        rounding::f64_to_f16(self)
    }
    fn to_bf16(self) -> bf16 {
        rounding::f64_to_bf16(self)
    }
    fn to_i64(self) -> i64 {
        self as i64
    }
    fn is_nonzero(self) -> bool {
        self != 0.0
    }
}

impl CastSource for i64 {
    fn to_f32(self) -> f32 {
        self as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn to_f16(self) -> f16 {
        rounding::i64_to_f16(self)
    }
    fn to_bf16(self) -> bf16 {
        rounding::i64_to_bf16(self)
    }
    fn to_i64(self) -> i64 {
        self
    }
    fn is_nonzero(self) -> bool {
        self != 0
    }
}

/// Booleans: any nonzero byte is true and converts to 1.
impl CastSource for u8 {
    fn to_f32(self) -> f32 {
        f32::from(u8::from(self != 0))
    }
    fn to_f64(self) -> f64 {
        f64::from(u8::from(self != 0))
    }
    fn to_f16(self) -> f16 {
        f16::from_f32(self.to_f32())
    }
    fn to_bf16(self) -> bf16 {
        f32_to_bf16(self.to_f32())
    }
    fn to_i64(self) -> i64 {
        i64::from(self != 0)
    }
    fn is_nonzero(self) -> bool {
        self != 0
    }
}

#[cfg(test)]
mod tests {
    use super::f32_to_bf16;
    use tessera_core::bf16;

    #[test]
    fn the_branch_free_rounding_equals_the_half_crates_on_a_sweep_of_all_bit_patterns() {
        // Every 4099th pattern (all exponents, both signs, NaNs and infinities included), and
        // the patterns around each rounding boundary: low halves 0x7fff, 0x8000 and 0x8001
        // below even and odd upper halves.
        let sweep = (0..=u32::MAX / 4099).map(|i| i * 4099);
        let boundaries = (0..=0xffffu32)
            .step_by(7)
            .flat_map(|hi| [0x7fff, 0x8000, 0x8001].map(|lo| (hi << 16) | lo));
        for bits in sweep
            .chain(boundaries)
            .chain([0x7f7f_ffff, 0xff7f_ffff, 0x7f80_0000])
        {
            let x = f32::from_bits(bits);
            assert_eq!(
                f32_to_bf16(x).to_bits(),
                bf16::from_f32(x).to_bits(),
                "{bits:#010x}"
            );
        }
    }
}
