//! Batched matrix product: the textbook triple loop, accumulating in f64.

use crate::alloc::{filled, product};
use crate::floats::{from_f64s, to_f64s};
use tessera_core::{Error, HostData, Result};

/// `lhs [..batch, m, k] @ rhs [..batch, k, n]` on contiguous data with identical batch
/// dimensions (`tensor-core` broadcasts them before the call).
pub(crate) fn matmul(
    lhs: HostData,
    lhs_dims: &[usize],
    rhs: HostData,
    rhs_dims: &[usize],
) -> Result<HostData> {
    let dtype = lhs.dtype();
    let (a, b) = (to_f64s("matmul", &lhs)?, to_f64s("matmul", &rhs)?);
    if rhs.dtype() != dtype {
        return Err(Error::DTypeMismatch {
            op: "matmul",
            lhs: dtype,
            rhs: rhs.dtype(),
        });
    }
    let rank = lhs_dims.len();
    let (m, k, n) = (lhs_dims[rank - 2], lhs_dims[rank - 1], rhs_dims[rank - 1]);
    let batch: usize = lhs_dims[..rank - 2].iter().product();
    let mut out = filled(product("matmul", &[batch, m, n])?, 0.0)?;
    if m == 0 || n == 0 || k == 0 {
        // Nothing to accumulate (the zeros are the answer): no loop over the batch, which may
        // be huge when the product has no element.
        return from_f64s(dtype, out);
    }
    for p in 0..batch {
        let (a, b) = (&a[p * m * k..], &b[p * k * n..]);
        for i in 0..m {
            for j in 0..n {
                out[p * m * n + i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
            }
        }
    }
    from_f64s(dtype, out)
}
