//! `index_select`, `gather` and `scatter_add` on contiguous data. Each computes, for every output
//! element, the position of the input element it copies, then picks those positions; so one
//! loop works for every dtype.

use crate::alloc::collect;
use crate::floats::{from_f64s, to_f64s};
use crate::strided::{pick, ravel, unravel};
use tessera_core::{DType, Error, HostData, Result};

/// The i64 elements of an index tensor.
fn index_values(op: &'static str, indices: &HostData) -> Result<Vec<i64>> {
    match indices {
        HostData::I64(v) => collect(v.len(), v.iter().copied()),
        other => Err(Error::DTypeMismatch {
            op,
            lhs: other.dtype(),
            rhs: DType::I64,
        }),
    }
}

/// `index` as a position in a dimension of `size`, or `IndexOutOfRange`.
fn checked(op: &'static str, index: i64, size: usize) -> Result<usize> {
    match usize::try_from(index) {
        Ok(i) if i < size => Ok(i),
        _ => Err(Error::IndexOutOfRange { op, index, size }),
    }
}

/// Output `[.., i, ..]` is `x[.., indices[i], ..]` along `axis`.
pub(crate) fn index_select(
    x: HostData,
    dims: &[usize],
    axis: usize,
    indices: &HostData,
) -> Result<HostData> {
    let idx = index_values("index_select", indices)?;
    // Every index is checked up front, even when the output has no element (another axis of
    // size 0) and none would be read: a negative index, or any index into an axis of size 0,
    // is an error whatever the other dims.
    for &i in &idx {
        checked("index_select", i, dims[axis])?;
    }
    let mut out_dims = dims.to_vec();
    out_dims[axis] = idx.len();
    let out_len = crate::alloc::product("index_select", &out_dims)?;
    let mut positions = collect(out_len, std::iter::empty())?;
    for o in 0..out_len {
        let mut index = unravel(o, &out_dims);
        index[axis] = idx[index[axis]] as usize;
        positions.push(ravel(&index, dims));
    }
    pick(&x, &positions)
}

/// `out[p] = x[p with p[axis] = indices[p]]`; the output has the shape of `indices`.
pub(crate) fn gather(
    x: HostData,
    dims: &[usize],
    axis: usize,
    indices: &HostData,
    indices_dims: &[usize],
) -> Result<HostData> {
    let idx = index_values("gather", indices)?;
    let mut positions = collect(idx.len(), std::iter::empty())?;
    for (o, &i) in idx.iter().enumerate() {
        let mut index = unravel(o, indices_dims);
        index[axis] = checked("gather", i, dims[axis])?;
        positions.push(ravel(&index, dims));
    }
    pick(&x, &positions)
}

/// A copy of `base` with `src[p]` added at `p with p[axis] = indices[p]`, in row-major order.
pub(crate) fn scatter_add(
    base: HostData,
    dims: &[usize],
    axis: usize,
    indices: &HostData,
    indices_dims: &[usize],
    src: HostData,
) -> Result<HostData> {
    let idx = index_values("scatter_add", indices)?;
    let mut targets = collect(idx.len(), std::iter::empty())?;
    for (o, &i) in idx.iter().enumerate() {
        let mut index = unravel(o, indices_dims);
        index[axis] = checked("scatter_add", i, dims[axis])?;
        targets.push(ravel(&index, dims));
    }
    let dtype = base.dtype();
    match (base, src) {
        (HostData::I64(mut out), HostData::I64(s)) => {
            for (&t, &v) in targets.iter().zip(&s) {
                out[t] = out[t].wrapping_add(v);
            }
            Ok(HostData::I64(out))
        }
        (base, src) if dtype.is_float() && src.dtype() == dtype => {
            let mut out = to_f64s("scatter_add", &base)?;
            let s = to_f64s("scatter_add", &src)?;
            for (&t, &v) in targets.iter().zip(&s) {
                out[t] += v;
            }
            from_f64s(dtype, out)
        }
        (_, src) if src.dtype() != dtype => Err(Error::DTypeMismatch {
            op: "scatter_add",
            lhs: dtype,
            rhs: src.dtype(),
        }),
        _ => Err(Error::UnsupportedDType {
            op: "scatter_add",
            dtype,
        }),
    }
}
