//! Memory primitives: filling, in-place assignment and counter-based random draws.

use crate::alloc::{collect, filled};
use tessera_core::random::{sample_f32, sample_f64};
use tessera_core::{AssignMode, DType, Distribution, Element, Error, HostData, Layout, Result};

/// `numel` copies of `value` converted to `dtype` like [`Element::from_f64`].
pub(crate) fn full(numel: usize, dtype: DType, value: f64) -> Result<HostData> {
    Ok(match dtype {
        DType::F32 => HostData::F32(filled(numel, f32::from_f64(value))?),
        DType::F64 => HostData::F64(filled(numel, value)?),
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
        _ => Err(Error::UnsupportedDType {
            op: "random",
            dtype,
        }),
    }
}
