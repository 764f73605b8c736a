//! Element-wise comparisons ([`CmpOp`]) with IEEE semantics: every comparison with NaN is false
//! except `Ne`.

use super::map::map2;
use crate::checks::dtype_mismatch;
use crate::CpuStorage;
use tessera_core::{CmpOp, Layout, Result};

/// Compares element by element; the output is `Bool`. Booleans compare as `false < true`.
pub(crate) fn compare(
    op: CmpOp,
    a: &CpuStorage,
    la: &Layout,
    b: &CpuStorage,
    lb: &Layout,
) -> Result<CpuStorage> {
    Ok(CpuStorage::Bool(match (a, b) {
        (CpuStorage::F32(x), CpuStorage::F32(y)) => compare_values(op, x, la, y, lb, |v| v)?,
        (CpuStorage::F64(x), CpuStorage::F64(y)) => compare_values(op, x, la, y, lb, |v| v)?,
        (CpuStorage::I64(x), CpuStorage::I64(y)) => compare_values(op, x, la, y, lb, |v| v)?,
        (CpuStorage::Bool(x), CpuStorage::Bool(y)) => {
            compare_values(op, x, la, y, lb, |v: u8| v != 0)?
        }
        _ => return Err(dtype_mismatch(op.name(), a, b)),
    }))
}

/// Compares `key(a[i])` with `key(b[i])`.
fn compare_values<T, K, F>(
    op: CmpOp,
    a: &[T],
    la: &Layout,
    b: &[T],
    lb: &Layout,
    key: F,
) -> Result<Vec<u8>>
where
    T: Copy + Sync,
    K: PartialOrd,
    F: Fn(T) -> K + Sync + Copy,
{
    match op {
        CmpOp::Eq => map2(a, la, b, lb, |x, y| u8::from(key(x) == key(y))),
        CmpOp::Ne => map2(a, la, b, lb, |x, y| u8::from(key(x) != key(y))),
        CmpOp::Lt => map2(a, la, b, lb, |x, y| u8::from(key(x) < key(y))),
        CmpOp::Le => map2(a, la, b, lb, |x, y| u8::from(key(x) <= key(y))),
        CmpOp::Gt => map2(a, la, b, lb, |x, y| u8::from(key(x) > key(y))),
        CmpOp::Ge => map2(a, la, b, lb, |x, y| u8::from(key(x) >= key(y))),
    }
}
