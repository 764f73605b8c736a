//! Counter-based random draws: element `i` is `sample_f32/f64(dist, seed, offset + i)`, rounded
//! to nearest even for the 16-bit floats.

use crate::driver::{Driver, ModuleKey};
use crate::runtime::{Arg, Runtime};
use crate::storage::GpuStorage;
use std::sync::Arc;
use tessera_core::{DType, Distribution, Error, Result};

/// `numel` samples of `dist` as `dtype` (a float dtype).
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
    // The parameters as the reference rounds them: f32 draws (and the 16-bit ones, rounded
    // from an f32 draw) use `low as f32` and `(high - low) as f32` (or mean and std as f32).
    let f32_draw = dtype != DType::F64;
    let scalar = |v: f64| {
        if f32_draw {
            Arg::F32(v as f32)
        } else {
            Arg::F64(v)
        }
    };
    let out = rt.alloc(dtype, numel)?;
    let mut args = vec![
        Arg::I64(numel as i64),
        Arg::U32(seed as u32),
        Arg::U32((seed >> 32) as u32),
        Arg::U64(offset),
    ];
    let kernel = match dist {
        Distribution::Uniform { low, high } => {
            // Only 16-bit draws read the bound (see `random.cl.c`).
            let bound = if high > low {
                least_f32_at_or_above(high)
            } else {
                f32::INFINITY
            };
            args.extend([scalar(low), scalar(high - low), scalar(f64::from(bound))]);
            "random_uniform"
        }
        Distribution::Normal { mean, std } => {
            args.extend([scalar(mean), scalar(std)]);
            "random_normal"
        }
    };
    args.push(Arg::Buffer(&out));
    rt.launch_1d(&ModuleKey::tensor(dtype), kernel, &args, numel)?;
    Ok(out)
}

/// The least f32 that is not below `x` (a 16-bit value, exactly an f32, is `>= x` exactly when
/// it is `>=` this); infinity above f32's range.
fn least_f32_at_or_above(x: f64) -> f32 {
    let nearest = x as f32;
    if f64::from(nearest) >= x || nearest == f32::INFINITY {
        return nearest;
    }
    // `nearest` lies below `x`: step one f32 up (toward +inf).
    if nearest == 0.0 {
        f32::from_bits(1)
    } else if nearest > 0.0 {
        f32::from_bits(nearest.to_bits() + 1)
    } else {
        f32::from_bits(nearest.to_bits() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::least_f32_at_or_above;

    #[test]
    fn the_bound_is_the_least_f32_not_below_high() {
        for x in [
            1.0,
            1.0 + 1e-12,
            -1.0 - 1e-12,
            -1.0 + 1e-12,
            1e-50,
            -1e-50,
            3.4e38,
            1e39,
        ] {
            let b = least_f32_at_or_above(x);
            assert!(f64::from(b) >= x, "{x}");
            // The f32 just below is below x.
            let below = if b > 0.0 {
                f32::from_bits(b.to_bits() - 1)
            } else if b == 0.0 {
                -f32::from_bits(1)
            } else {
                f32::from_bits(b.to_bits() + 1)
            };
            assert!(f64::from(below) < x || b.is_infinite(), "{x}");
        }
    }
}
