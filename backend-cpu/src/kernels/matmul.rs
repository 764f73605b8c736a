//! Batched matrix product on top of `matrixmultiply`'s strided GEMM.
//!
//! `matrixmultiply::{sgemm, dgemm}` take arbitrary row and column strides, so transposed or
//! sliced operands are multiplied in place without a copy; batch elements are addressed through
//! their own (possibly zero) batch strides. Large products are split into blocks over rayon
//! (see [`super::gemm::parallel_gemm`]); many small products are spread over rayon one product
//! per task instead.

use super::gemm::{gemm, parallel_gemm, GemmElement, MatMut, MatRef};
use crate::alloc::{checked_len, try_with_capacity, try_zeroed};
use crate::checks::{dtype_mismatch, unsupported};
use crate::strided::StridedPlan;
use crate::CpuStorage;
use rayon::prelude::*;
use tensor_core::{BackendStorage, Error, Layout, Result};

/// Products with `m*k + k*n` below this are "small": a batch of them is spread one per task.
const GEMM_THREADING_SIZE: usize = 2 * (1 << 14);
/// Total multiply-adds from which small batched products are spread over rayon.
const BATCH_PARALLEL_WORK: usize = 1 << 17;

/// `[..batch, m, k] x [..batch, k, n] -> [..batch, m, n]` for f32 or f64.
pub(crate) fn matmul(
    lhs: &CpuStorage,
    ll: &Layout,
    rhs: &CpuStorage,
    rl: &Layout,
) -> Result<CpuStorage> {
    let shape = ProductShape::new(ll, rl)?;
    Ok(match (lhs, rhs) {
        (CpuStorage::F32(a), CpuStorage::F32(b)) => {
            CpuStorage::F32(batched_gemm(a, ll, b, rl, &shape)?)
        }
        (CpuStorage::F64(a), CpuStorage::F64(b)) => {
            CpuStorage::F64(batched_gemm(a, ll, b, rl, &shape)?)
        }
        _ if lhs.dtype() == rhs.dtype() => return Err(unsupported("matmul", lhs.dtype())),
        _ => return Err(dtype_mismatch("matmul", lhs, rhs)),
    })
}

/// The sizes of a batched product, checked for consistency.
struct ProductShape {
    batch_dims: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
}

impl ProductShape {
    fn new(ll: &Layout, rl: &Layout) -> Result<Self> {
        let (ld, rd) = (ll.dims(), rl.dims());
        let mismatch = || Error::MatmulShape {
            lhs: ll.shape().clone(),
            rhs: rl.shape().clone(),
        };
        if ld.len() < 2 || ld.len() != rd.len() {
            return Err(mismatch());
        }
        let r = ld.len();
        if ld[..r - 2] != rd[..r - 2] || ld[r - 1] != rd[r - 2] {
            return Err(mismatch());
        }
        Ok(ProductShape {
            batch_dims: ld[..r - 2].to_vec(),
            m: ld[r - 2],
            k: ld[r - 1],
            n: rd[r - 1],
        })
    }
}

/// One operand matrix of one batch element: where it starts and how it is strided.
#[derive(Clone, Copy)]
struct Matrix {
    offset: usize,
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
}

impl Matrix {
    /// Errors unless every element lies in a storage of `len` elements (checked arithmetic).
    fn check_in_bounds(&self, len: usize) -> Result<()> {
        if self.rows == 0 || self.cols == 0 {
            return Ok(());
        }
        let last = (self.rows - 1)
            .checked_mul(self.row_stride)
            .and_then(|r| (self.cols - 1).checked_mul(self.col_stride).map(|c| (r, c)))
            .and_then(|(r, c)| r.checked_add(c))
            .and_then(|e| e.checked_add(self.offset));
        match last {
            Some(last) if last < len && isize::try_from(last).is_ok() => Ok(()),
            _ => Err(Error::InvalidArgument {
                op: "matmul",
                msg: format!(
                    "a {}x{} operand at offset {} with strides ({}, {}) leaves a storage of {} \
                     elements",
                    self.rows, self.cols, self.offset, self.row_stride, self.col_stride, len
                ),
            }),
        }
    }
}

/// The product of every batch element into a fresh contiguous output.
fn batched_gemm<T: GemmElement>(
    a: &[T],
    ll: &Layout,
    b: &[T],
    rl: &Layout,
    shape: &ProductShape,
) -> Result<Vec<T>> {
    let ProductShape { m, k, n, .. } = *shape;
    let batch = checked_len("matmul", &shape.batch_dims)?;
    let mut out = try_zeroed::<T>(checked_len("matmul", &[batch, m, n])?)?;
    if out.is_empty() || k == 0 {
        return Ok(out);
    }
    let r = ll.rank();
    let (ls, rs) = (ll.strides(), rl.strides());
    let batch_plan = StridedPlan::new(
        &shape.batch_dims,
        [&ls[..r - 2], &rs[..r - 2]],
        [ll.offset(), rl.offset()],
    );
    let [sa, sb] = batch_plan.inner_strides();
    let mut operands = try_with_capacity(batch)?;
    batch_plan.for_each_run(0, batch, |_, [oa, ob], len| {
        for i in 0..len {
            let lhs = Matrix {
                offset: oa + i * sa,
                rows: m,
                cols: k,
                row_stride: ls[r - 2] as usize,
                col_stride: ls[r - 1] as usize,
            };
            let rhs = Matrix {
                offset: ob + i * sb,
                rows: k,
                cols: n,
                row_stride: rs[r - 2] as usize,
                col_stride: rs[r - 1] as usize,
            };
            operands.push((lhs, rhs));
        }
    });
    for (lhs, rhs) in &operands {
        lhs.check_in_bounds(a.len())?;
        rhs.check_in_bounds(b.len())?;
    }
    let operand = |x: &[T], mat: &Matrix| MatRef {
        ptr: x[mat.offset..].as_ptr(),
        rs: mat.row_stride as isize,
        cs: mat.col_stride as isize,
    };
    // SAFETY (both closures): both operands were checked to lie inside `a` and `b`; `c` is one
    // batch element of `out`, exactly `m * n` elements, written row-major (strides `n`, 1); the
    // strides fit in `isize` because the largest offsets do.
    let product = |(lhs, rhs): &(Matrix, Matrix), c: &mut [T]| unsafe {
        gemm(
            (m, k, n),
            operand(a, lhs),
            operand(b, rhs),
            T::ZERO,
            MatMut::row_major(c, n),
        )
    };
    let split_product = |(lhs, rhs): &(Matrix, Matrix), c: &mut [T]| unsafe {
        parallel_gemm(
            (m, k, n),
            operand(a, lhs),
            operand(b, rhs),
            T::ZERO,
            MatMut::row_major(c, n),
        )
    };
    let small = m * k + k * n < GEMM_THREADING_SIZE;
    let work = batch.saturating_mul(m).saturating_mul(n).saturating_mul(k);
    if batch > 1 && small && work >= BATCH_PARALLEL_WORK && crate::parallel::threads() > 1 {
        out.par_chunks_mut(m * n)
            .zip(operands.par_iter())
            .for_each(|(c, ops)| product(ops, c));
    } else {
        for (c, ops) in out.chunks_mut(m * n).zip(&operands) {
            split_product(ops, c);
        }
    }
    Ok(out)
}
