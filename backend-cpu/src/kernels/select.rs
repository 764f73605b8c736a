//! `where`: element-wise selection between two branches by a boolean mask.

use super::map::map3;
use crate::alloc::Zeroable;
use crate::checks::dtype_mismatch;
use crate::CpuStorage;
use tessera_core::{BackendStorage, DType, Error, Layout, Result};

/// `cond[i] != 0 ? on_true[i] : on_false[i]`; the output has the branches' dtype.
pub(crate) fn where_select(
    cond: &CpuStorage,
    lc: &Layout,
    on_true: &CpuStorage,
    lt: &Layout,
    on_false: &CpuStorage,
    lf: &Layout,
) -> Result<CpuStorage> {
    let CpuStorage::Bool(c) = cond else {
        return Err(Error::DTypeMismatch {
            op: "where",
            lhs: cond.dtype(),
            rhs: DType::Bool,
        });
    };
    Ok(match (on_true, on_false) {
        (CpuStorage::F32(t), CpuStorage::F32(f)) => CpuStorage::F32(select(c, lc, t, lt, f, lf)?),
        (CpuStorage::F64(t), CpuStorage::F64(f)) => CpuStorage::F64(select(c, lc, t, lt, f, lf)?),
        (CpuStorage::I64(t), CpuStorage::I64(f)) => CpuStorage::I64(select(c, lc, t, lt, f, lf)?),
        // 16-bit floats are selected as they are stored: a selection computes nothing.
        (CpuStorage::F16(t), CpuStorage::F16(f)) => CpuStorage::F16(select(c, lc, t, lt, f, lf)?),
        (CpuStorage::BF16(t), CpuStorage::BF16(f)) => {
            CpuStorage::BF16(select(c, lc, t, lt, f, lf)?)
        }
        (CpuStorage::Bool(t), CpuStorage::Bool(f)) => {
            CpuStorage::Bool(select(c, lc, t, lt, f, lf)?)
        }
        _ => return Err(dtype_mismatch("where", on_true, on_false)),
    })
}

/// The selection for one element type.
fn select<T: Zeroable + Send + Sync>(
    c: &[u8],
    lc: &Layout,
    t: &[T],
    lt: &Layout,
    f: &[T],
    lf: &Layout,
) -> Result<Vec<T>> {
    map3(
        c,
        lc,
        t,
        lt,
        f,
        lf,
        |m: u8, x: T, y: T| if m != 0 { x } else { y },
    )
}
