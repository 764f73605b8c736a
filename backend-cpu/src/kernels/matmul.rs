//! Batched matrix product on top of `matrixmultiply`'s strided GEMM.
//!
//! `matrixmultiply::{sgemm, dgemm}` take arbitrary row and column strides, so transposed or
//! sliced operands are multiplied in place without a copy; batch elements are addressed through
//! their own (possibly zero) batch strides. Large products use `matrixmultiply`'s own threads;
//! many small products (which it would run single-threaded) are spread over rayon instead, so the
//! two thread pools are never nested.

use crate::checks::{dtype_mismatch, unsupported};
use crate::strided::StridedPlan;
use crate::CpuStorage;
use rayon::prelude::*;
use tensor_core::{BackendStorage, Error, Layout, Result};

/// `matrixmultiply` threads a product once `m*k + k*n` reaches twice this (its heuristic).
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

/// An element type `matrixmultiply` multiplies.
trait GemmElement: Copy + Send + Sync + Default {
    /// `C = A B` for an `m x k` A and a `k x n` B with the given strides; C is overwritten.
    ///
    /// # Safety
    /// Every element `a + i*rsa + p*csa` (`i < m`, `p < k`), likewise for `b`, and
    /// `c + i*rsc + j*csc` must be in bounds of live allocations; `c` must not alias `a`/`b`.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm(
        m: usize,
        k: usize,
        n: usize,
        a: *const Self,
        rsa: isize,
        csa: isize,
        b: *const Self,
        rsb: isize,
        csb: isize,
        c: *mut Self,
        rsc: isize,
        csc: isize,
    );
}

impl GemmElement for f32 {
    unsafe fn gemm(
        m: usize,
        k: usize,
        n: usize,
        a: *const f32,
        rsa: isize,
        csa: isize,
        b: *const f32,
        rsb: isize,
        csb: isize,
        c: *mut f32,
        rsc: isize,
        csc: isize,
    ) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { matrixmultiply::sgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, 0.0, c, rsc, csc) }
    }
}

impl GemmElement for f64 {
    unsafe fn gemm(
        m: usize,
        k: usize,
        n: usize,
        a: *const f64,
        rsa: isize,
        csa: isize,
        b: *const f64,
        rsb: isize,
        csb: isize,
        c: *mut f64,
        rsc: isize,
        csc: isize,
    ) {
        // SAFETY: forwarded from the caller's contract.
        unsafe { matrixmultiply::dgemm(m, k, n, 1.0, a, rsa, csa, b, rsb, csb, 0.0, c, rsc, csc) }
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
    let batch: usize = shape.batch_dims.iter().product();
    let mut out = vec![T::default(); batch * m * n];
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
    let mut operands = Vec::with_capacity(batch);
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
    let product = |(lhs, rhs): &(Matrix, Matrix), c: &mut [T]| {
        // SAFETY: both operands were checked to lie inside `a` and `b`; `c` is one batch
        // element of `out`, exactly `m * n` elements, written row-major (strides `n`, 1); the
        // strides fit in `isize` because the largest offsets do.
        unsafe {
            T::gemm(
                m,
                k,
                n,
                a[lhs.offset..].as_ptr(),
                lhs.row_stride as isize,
                lhs.col_stride as isize,
                b[rhs.offset..].as_ptr(),
                rhs.row_stride as isize,
                rhs.col_stride as isize,
                c.as_mut_ptr(),
                n as isize,
                1,
            )
        }
    };
    let small = m * k + k * n < GEMM_THREADING_SIZE;
    let work = batch.saturating_mul(m).saturating_mul(n).saturating_mul(k);
    if batch > 1 && small && work >= BATCH_PARALLEL_WORK && crate::parallel::threads() > 1 {
        out.par_chunks_mut(m * n)
            .zip(operands.par_iter())
            .for_each(|(c, ops)| product(ops, c));
    } else {
        for (c, ops) in out.chunks_mut(m * n).zip(&operands) {
            product(ops, c);
        }
    }
    Ok(out)
}
