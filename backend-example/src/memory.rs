//! Memory primitives: filling, in-place assignment and counter-based random draws.

use crate::alloc::{collect, filled};
use tessera_core::dtype::rounding::{f64_to_bf16, f64_to_f16};
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{
    bf16, f16, AssignMode, DType, Distribution, Element, Error, HostData, Layout, Result,
};

/// `numel` copies of `value` converted to `dtype` like [`Element::from_f64`].
pub(crate) fn full(numel: usize, dtype: DType, value: f64) -> Result<HostData> {
    Ok(match dtype {
        DType::F32 => HostData::F32(filled(numel, f32::from_f64(value))?),
        DType::F64 => HostData::F64(filled(numel, value)?),
        // Rounded once, to nearest even (`tessera_core::dtype::rounding`).
        DType::F16 => HostData::F16(filled(numel, <f16 as Element>::from_f64(value))?),
        DType::BF16 => HostData::BF16(filled(numel, <bf16 as Element>::from_f64(value))?),
        DType::I64 => HostData::I64(filled(numel, i64::from_f64(value))?),
        DType::Bool => HostData::Bool(filled(numel, u8::from_f64(value))?),
        other => {
            return Err(Error::UnsupportedDType {
                op: "full",
                dtype: other,
            })
        }
    })
}

/// Writes (or adds: for bool, `or`) the contiguous `src` into the positions `dst_layout`
/// selects in `dst`.
pub(crate) fn assign(
    dst: &mut HostData,
    dst_layout: &Layout,
    src: HostData,
    mode: AssignMode,
) -> Result<()> {
    fn write<T: Copy>(d: &mut [T], layout: &Layout, s: &[T], combine: impl Fn(T, T) -> T) {
        for (p, &v) in layout.offsets().zip(s) {
            d[p] = combine(d[p], v);
        }
    }
    let accumulate = mode == AssignMode::Accumulate;
    match (dst, &src) {
        (HostData::F32(d), HostData::F32(s)) => {
            write(d, dst_layout, s, |a, b| if accumulate { a + b } else { b })
        }
        (HostData::F64(d), HostData::F64(s)) => {
            write(d, dst_layout, s, |a, b| if accumulate { a + b } else { b })
        }
        // 16-bit: the sum of two 16-bit values is exact in f64, then rounded once.
        (HostData::F16(d), HostData::F16(s)) => write(d, dst_layout, s, |a, b| {
            if accumulate {
                f64_to_f16(f64::from(a) + f64::from(b))
            } else {
                b
            }
        }),
        (HostData::BF16(d), HostData::BF16(s)) => write(d, dst_layout, s, |a, b| {
            if accumulate {
                f64_to_bf16(f64::from(a) + f64::from(b))
            } else {
                b
            }
        }),
        (HostData::I64(d), HostData::I64(s)) => write(d, dst_layout, s, |a, b| {
            if accumulate {
                a.wrapping_add(b)
            } else {
                b
            }
        }),
        (HostData::Bool(d), HostData::Bool(s)) => write(d, dst_layout, s, |a, b| {
            u8::from(b != 0 || (accumulate && a != 0))
        }),
        (d, s) => {
            return Err(Error::DTypeMismatch {
                op: "assign",
                lhs: d.dtype(),
                rhs: s.dtype(),
            })
        }
    }
    Ok(())
}

/// `numel` samples where element `i` is `sample_*(dist, seed, offset + i)`: the same numbers
/// on every backend. The counter `offset + i` wraps around at `u64::MAX`, as on every backend.
///
/// The 16-bit floats draw the f32 sample, round it to the format (to nearest even), and step a
/// uniform draw that rounded up to its excluded upper bound `high` down to the next smaller
/// 16-bit value ([`below_high`]): the rule every backend follows, so the draws are identical.
pub(crate) fn random(
    dist: Distribution,
    numel: usize,
    dtype: DType,
    seed: u64,
    offset: u64,
) -> Result<HostData> {
    let counters = (0..numel as u64).map(|i| offset.wrapping_add(i));
    match dtype {
        DType::F32 => Ok(HostData::F32(collect(
            numel,
            counters.map(|i| sample_f32(dist, seed, i)),
        )?)),
        DType::F64 => Ok(HostData::F64(collect(
            numel,
            counters.map(|i| sample_f64(dist, seed, i)),
        )?)),
        DType::F16 => Ok(HostData::F16(collect(
            numel,
            counters.map(|i| {
                let x = sample_f32(dist, seed, i);
                below_high(dist, f16::from_f32(x), f16::to_bits, f16::from_bits)
            }),
        )?)),
        DType::BF16 => Ok(HostData::BF16(collect(
            numel,
            counters.map(|i| {
                let x = sample_f32(dist, seed, i);
                below_high(dist, bf16::from_f32(x), bf16::to_bits, bf16::from_bits)
            }),
        )?)),
        _ => Err(Error::UnsupportedDType {
            op: "random",
            dtype,
        }),
    }
}

/// A 16-bit uniform draw `v` that rounded up to (or past) the excluded bound `high`, stepped down
/// to the next 16-bit value toward `-inf`; every other draw unchanged. The bits of a 16-bit float
/// are sign and magnitude: a positive value steps down by one, a negative one up by one, and `+0`
/// (a bound of 0) becomes the smallest negative subnormal (`0x8001`).
fn below_high<H: Copy + Into<f32>>(
    dist: Distribution,
    v: H,
    to_bits: fn(H) -> u16,
    from_bits: fn(u16) -> H,
) -> H {
    let x: f32 = v.into();
    match dist {
        Distribution::Uniform { low, high } if high > low && f64::from(x) >= high => {
            let bits = to_bits(v);
            from_bits(if x > 0.0 {
                bits - 1
            } else if x == 0.0 {
                0x8001
            } else {
                bits + 1
            })
        }
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_16_bit_uniform_draw_never_reaches_high() {
        // 0.99999 rounds to 1.0 in both formats: stepped down to the value just below 1.
        let uniform = Distribution::Uniform {
            low: 0.0,
            high: 1.0,
        };
        let up = f16::from_f32(0.99999);
        assert_eq!(f32::from(up), 1.0);
        let down = below_high(uniform, up, f16::to_bits, f16::from_bits);
        assert_eq!(down.to_bits(), 0x3bff);
        let up = bf16::from_f32(0.99999);
        let down = below_high(uniform, up, bf16::to_bits, bf16::from_bits);
        assert_eq!(f32::from(down), 1.0 - 2f32.powi(-8));
        // A bound of 0 steps +0 to the smallest negative subnormal; negatives step away from 0.
        let to_zero = Distribution::Uniform {
            low: -1.0,
            high: 0.0,
        };
        let z = below_high(to_zero, f16::ZERO, f16::to_bits, f16::from_bits);
        assert_eq!(z.to_bits(), 0x8001);
        let neg = Distribution::Uniform {
            low: -3.0,
            high: -2.0,
        };
        let v = below_high(neg, f16::from_f32(-2.0), f16::to_bits, f16::from_bits);
        assert!(f32::from(v) < -2.0);
        // Below the bound, and normal draws, are unchanged.
        let half_way = f16::from_f32(0.5);
        assert_eq!(
            below_high(uniform, half_way, f16::to_bits, f16::from_bits),
            half_way
        );
        let normal = Distribution::Normal {
            mean: 0.0,
            std: 1.0,
        };
        let big = f16::from_f32(3.0);
        assert_eq!(below_high(normal, big, f16::to_bits, f16::from_bits), big);
    }
}
