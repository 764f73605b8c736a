//! Reductions over sets of axes and arg-reductions over one axis, on contiguous data.

use crate::alloc::{collect, filled};
use crate::floats::{from_f64s, to_f64s};
use crate::strided::{ravel, unravel};
use tessera_core::{ArgReduceOp, DType, Error, HostData, ReduceOp, Result};

/// `dims` with every axis in `axes` set to 1: the shape of a reduction's output.
pub(crate) fn kept_dims(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    let mut out = dims.to_vec();
    for &a in axes {
        out[a] = 1;
    }
    out
}

/// For every input element (row-major), the position of the output element it reduces into.
fn output_positions(dims: &[usize], axes: &[usize]) -> Result<Vec<usize>> {
    let out_dims = kept_dims(dims, axes);
    let numel: usize = dims.iter().product();
    let positions = (0..numel).map(|flat| {
        let mut index = unravel(flat, dims);
        for &a in axes {
            index[a] = 0;
        }
        ravel(&index, &out_dims)
    });
    collect(numel, positions)
}

/// One float accumulator. Max and min propagate NaN.
fn fold_float(op: ReduceOp, acc: f64, x: f64) -> f64 {
    match op {
        ReduceOp::Sum => acc + x,
        ReduceOp::Prod => acc * x,
        _ if acc.is_nan() || x.is_nan() => f64::NAN,
        ReduceOp::Max => acc.max(x),
        ReduceOp::Min => acc.min(x),
    }
}

/// One i64 accumulator (wrapping).
fn fold_int(op: ReduceOp, acc: i64, x: i64) -> i64 {
    match op {
        ReduceOp::Sum => acc.wrapping_add(x),
        ReduceOp::Prod => acc.wrapping_mul(x),
        ReduceOp::Max => acc.max(x),
        ReduceOp::Min => acc.min(x),
    }
}

/// The starting value of an accumulator (max/min of an empty set never happens: `tensor-core`
/// rejects it).
fn identity_float(op: ReduceOp) -> f64 {
    match op {
        ReduceOp::Sum => 0.0,
        ReduceOp::Prod => 1.0,
        ReduceOp::Max => f64::NEG_INFINITY,
        ReduceOp::Min => f64::INFINITY,
    }
}

fn identity_int(op: ReduceOp) -> i64 {
    match op {
        ReduceOp::Sum => 0,
        ReduceOp::Prod => 1,
        ReduceOp::Max => i64::MIN,
        ReduceOp::Min => i64::MAX,
    }
}

/// `op` over `axes` of contiguous `x` of shape `dims`; the output keeps the axes as size 1.
pub(crate) fn reduce(
    op: ReduceOp,
    x: HostData,
    dims: &[usize],
    axes: &[usize],
) -> Result<HostData> {
    let targets = output_positions(dims, axes)?;
    let out_len: usize = kept_dims(dims, axes).iter().product();
    match x {
        HostData::I64(v) => {
            let mut out = filled(out_len, identity_int(op))?;
            for (&t, &x) in targets.iter().zip(&v) {
                out[t] = fold_int(op, out[t], x);
            }
            Ok(HostData::I64(out))
        }
        HostData::Bool(_) => Err(Error::UnsupportedDType {
            op: op.name(),
            dtype: DType::Bool,
        }),
        floats => {
            let dtype = floats.dtype();
            let v = to_f64s(op.name(), &floats)?;
            let mut out = filled(out_len, identity_float(op))?;
            for (&t, &x) in targets.iter().zip(&v) {
                out[t] = fold_float(op, out[t], x);
            }
            from_f64s(dtype, out)
        }
    }
}

/// Whether `candidate` replaces `best` as the extremum: strictly better, or the first NaN (a
/// NaN beats every number, and the first NaN wins).
fn beats<T: PartialOrd>(op: ArgReduceOp, candidate: T, best: T) -> bool {
    #[allow(clippy::eq_op)]
    let is_nan = |x: &T| x != x;
    if is_nan(&best) {
        return false;
    }
    if is_nan(&candidate) {
        return true;
    }
    match op {
        ArgReduceOp::ArgMax => candidate > best,
        ArgReduceOp::ArgMin => candidate < best,
    }
}

/// Index of the first extremum along `axis` of contiguous `x` of shape `dims` (`dims[axis] > 0`).
pub(crate) fn arg_reduce(
    op: ArgReduceOp,
    x: HostData,
    dims: &[usize],
    axis: usize,
) -> Result<HostData> {
    fn run<T: PartialOrd + Copy>(
        op: ArgReduceOp,
        v: &[T],
        dims: &[usize],
        axis: usize,
    ) -> Result<Vec<i64>> {
        let out_dims = kept_dims(dims, &[axis]);
        let out_len: usize = out_dims.iter().product();
        let best = (0..out_len).map(|o| {
            let mut index = unravel(o, &out_dims);
            let mut best = 0;
            for k in 1..dims[axis] {
                index[axis] = k;
                let candidate = v[ravel(&index, dims)];
                index[axis] = best;
                if beats(op, candidate, v[ravel(&index, dims)]) {
                    best = k;
                }
            }
            best as i64
        });
        collect(out_len, best)
    }
    Ok(HostData::I64(match &x {
        HostData::F32(v) => run(op, v, dims, axis)?,
        HostData::F64(v) => run(op, v, dims, axis)?,
        HostData::F16(v) => run(op, v, dims, axis)?,
        HostData::BF16(v) => run(op, v, dims, axis)?,
        HostData::I64(v) => run(op, v, dims, axis)?,
        HostData::Bool(v) => run(op, v, dims, axis)?,
        other => {
            return Err(tessera_core::Error::UnsupportedDType {
                op: op.name(),
                dtype: other.dtype(),
            })
        }
    }))
}
