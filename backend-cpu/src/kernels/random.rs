//! Counter-based random draws, identical on every backend.

use super::fill::counter_based;
use crate::checks::unsupported;
use crate::CpuStorage;
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{bf16, f16, DType, Distribution, Result};

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
        DType::F16 => CpuStorage::F16(counter_based(numel, offset, |i| {
            sample_half(dist, seed, i, f16::from_f32, f16::to_bits, f16::from_bits)
        })?),
        DType::BF16 => CpuStorage::BF16(counter_based(numel, offset, |i| {
            sample_half(
                dist,
                seed,
                i,
                bf16::from_f32,
                bf16::to_bits,
                bf16::from_bits,
            )
        })?),
        _ => return Err(unsupported("random", dtype)),
    })
}

/// The f32 sample rounded to a 16-bit float (to nearest even), stepped down to the next
/// smaller value when the rounding reached a uniform's excluded upper bound.
fn sample_half<H: Copy + Into<f32>>(
    dist: Distribution,
    seed: u64,
    index: u64,
    from_f32: fn(f32) -> H,
    to_bits: fn(H) -> u16,
    from_bits: fn(u16) -> H,
) -> H {
    let v = from_f32(sample_f32(dist, seed, index));
    match dist {
        Distribution::Uniform { low, high } if f64::from(v.into()) >= high && high > low => {
            // The next value toward -inf: sign-magnitude bits step down for positives, up for
            // negatives, and +0 steps to the smallest negative subnormal.
            let bits = to_bits(v);
            let x: f32 = v.into();
            let down = if x > 0.0 {
                bits - 1
            } else if x == 0.0 {
                0x8001
            } else {
                bits + 1
            };
            from_bits(down)
        }
        _ => v,
    }
}
