//! Batched matrix product on top of the strided GEMM of [`super::gemm`].
//!
//! The GEMM takes arbitrary row and column strides, so transposed or sliced operands are
//! multiplied in place without a copy; batch elements are addressed through
//! their own (possibly zero) batch strides. Large products are split into blocks over rayon
//! (see [`super::gemm::try_split_gemm`]); many small products are spread over rayon one product
//! per task instead.

use super::gemm::{
    chosen_path, gemm_addend_on, try_gemm, try_split_gemm, try_split_gemm_addend, GemmElement,
    MatMut, MatRef,
};
use crate::alloc::{checked_len, try_with_capacity};
use crate::checks::{dtype_mismatch, unsupported};
use crate::parallel::Parallelism;
use crate::strided::StridedPlan;
use crate::CpuStorage;
use rayon::prelude::*;
use tessera_core::{BackendStorage, Error, Layout, Result};

/// Products with `m*k + k*n` below this are "small": a batch of them is spread one per task.
const GEMM_THREADING_SIZE: usize = 2 * (1 << 14);

/// `[..batch, m, k] x [..batch, k, n] -> [..batch, m, n]` for f32 or f64.
pub(crate) fn matmul(
    lhs: &CpuStorage,
    ll: &Layout,
    rhs: &CpuStorage,
    rl: &Layout,
) -> Result<CpuStorage> {
    matmul_with(Parallelism::current(), lhs, ll, rhs, rl)
}

/// [`matmul`] with explicit parallelism thresholds (tests split Miri-sized products).
pub(crate) fn matmul_with(
    split: Parallelism,
    lhs: &CpuStorage,
    ll: &Layout,
    rhs: &CpuStorage,
    rl: &Layout,
) -> Result<CpuStorage> {
    let shape = ProductShape::new(ll, rl)?;
    Ok(match (lhs, rhs) {
        (CpuStorage::F32(a), CpuStorage::F32(b)) => {
            CpuStorage::F32(batched_gemm(split, a, ll, b, rl, None, &shape)?)
        }
        (CpuStorage::F64(a), CpuStorage::F64(b)) => {
            CpuStorage::F64(batched_gemm(split, a, ll, b, rl, None, &shape)?)
        }
        _ if lhs.dtype() == rhs.dtype() => return Err(unsupported("matmul", lhs.dtype())),
        _ => return Err(dtype_mismatch("matmul", lhs, rhs)),
    })
}

/// `[..batch, m, k] x [..batch, k, n] + bias -> [..batch, m, n]` with a contiguous `bias` of
/// `n` elements added to every row inside the GEMM (see `gemm::gemm_addend_on`).
pub(crate) fn matmul_bias<T: GemmElement>(
    a: &[T],
    ll: &Layout,
    b: &[T],
    rl: &Layout,
    bias: &[T],
) -> Result<Vec<T>> {
    let shape = ProductShape::new(ll, rl)?;
    if bias.len() != shape.n {
        return Err(Error::InvalidArgument {
            op: "matmul_bias",
            msg: format!(
                "the bias has {} elements for {} columns",
                bias.len(),
                shape.n
            ),
        });
    }
    batched_gemm(Parallelism::current(), a, ll, b, rl, Some(bias), &shape)
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
    split: Parallelism,
    a: &[T],
    ll: &Layout,
    b: &[T],
    rl: &Layout,
    bias: Option<&[T]>,
    shape: &ProductShape,
) -> Result<Vec<T>> {
    let ProductShape { m, k, n, .. } = *shape;
    let batch = checked_len("matmul", &shape.batch_dims)?;
    let len = checked_len("matmul", &[batch, m, n])?;
    // The output is written by the GEMM (beta = 0: every element written, none read), so it is
    // not zero-filled first; its allocation fails with a typed error.
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(len).map_err(|_| Error::OutOfMemory {
        device: "cpu".to_string(),
        requested_bytes: len.saturating_mul(std::mem::size_of::<T>()),
    })?;
    if len == 0 || k == 0 {
        match bias {
            Some(bias) if len > 0 => {
                for _ in 0..len / n {
                    out.extend_from_slice(bias);
                }
            }
            _ => out.resize(len, T::ZERO),
        }
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
    // batch <= len (the output is not empty here), so this is bounded by the output's size.
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
    // Batch element `i` of the output: `m x n` row-major elements from `i * m * n`, in the
    // capacity reserved above.
    let outputs = MatMut {
        ptr: out.as_mut_ptr(),
        rs: n as isize,
        cs: 1,
    };
    // SAFETY: `i < batch`, so the offset stays inside the reserved capacity.
    let output = |i: usize| unsafe { outputs.at(i * m, 0) };
    // SAFETY (both closures): both operands were checked to lie inside `a` and `b`; `c` is one
    // batch element of the output, `m * n` elements no other call writes; the strides fit in
    // `isize` because the largest offsets do; the addend reads the bias's `n` elements
    // (checked by the caller), the same row for every row of C.
    // The bias as an `m x n` addend: one row, repeated by a row stride of 0.
    let addend = bias.map(|bias| MatRef {
        ptr: bias.as_ptr(),
        rs: 0,
        cs: 1,
    });
    let product = |(lhs, rhs): &(Matrix, Matrix), c: MatMut<T>| unsafe {
        let (a, b) = (operand(a, lhs), operand(b, rhs));
        match addend {
            Some(r) => gemm_addend_on(chosen_path(), (m, k, n), a, b, r, c),
            None => try_gemm((m, k, n), a, b, T::ZERO, c),
        }
    };
    let split_product = |(lhs, rhs): &(Matrix, Matrix), c: MatMut<T>| unsafe {
        let (a, b) = (operand(a, lhs), operand(b, rhs));
        match addend {
            Some(r) => try_split_gemm_addend(split, (m, k, n), a, b, r, c),
            None => try_split_gemm(split, (m, k, n), a, b, T::ZERO, c),
        }
    };
    let small = m * k + k * n < GEMM_THREADING_SIZE;
    let work = batch.saturating_mul(m).saturating_mul(n).saturating_mul(k);
    if batch > 1 && small && work >= split.batch_min_work && split.threads > 1 {
        operands
            .par_iter()
            .enumerate()
            .try_for_each(|(i, ops)| product(ops, output(i)))?;
    } else {
        for (i, ops) in operands.iter().enumerate() {
            split_product(ops, output(i))?;
        }
    }
    // SAFETY: every batch element was computed above with beta = 0, and a GEMM with beta = 0
    // writes every element of its output; on an error we returned before this, with the length
    // still 0.
    unsafe { out.set_len(len) };
    Ok(out)
}

#[cfg(test)]
mod tests {
    //! Miri-sized tests of the `unsafe` GEMM calls of the batched product, on the serial, the
    //! split and the one-product-per-task paths (`miri_` prefix: see `docs/SOUNDNESS.md`).
    use super::*;

    /// `[..batch, m, n]` by definition, reading both operands through their layouts.
    fn definition(a: &[f64], ll: &Layout, b: &[f64], rl: &Layout) -> Vec<f64> {
        let r = ll.rank();
        let (m, k, n) = (ll.dims()[r - 2], ll.dims()[r - 1], rl.dims()[r - 1]);
        let batch: usize = ll.dims()[..r - 2].iter().product();
        let (ao, bo): (Vec<usize>, Vec<usize>) = (ll.offsets().collect(), rl.offsets().collect());
        let mut out = Vec::new();
        for s in 0..batch {
            for i in 0..m {
                for j in 0..n {
                    out.push(
                        (0..k)
                            .map(|p| a[ao[s * m * k + i * k + p]] * b[bo[s * k * n + p * n + j]])
                            .sum(),
                    );
                }
            }
        }
        out
    }

    fn values(len: usize) -> Vec<f64> {
        (0..len).map(|i| ((i * 5) % 7) as f64 - 3.0).collect()
    }

    #[test]
    fn miri_batched_products_read_strided_and_broadcast_operands() {
        // lhs [3, 2, 4] at offset 1; rhs a transposed [4, 3] broadcast over the batch.
        let a = values(1 + 3 * 2 * 4);
        let ll = Layout::strided([3, 2, 4], vec![8, 4, 1], 1, a.len()).unwrap();
        let b = values(12);
        let rl = Layout::contiguous([3, 4])
            .transpose(0, 1)
            .unwrap()
            .unsqueeze(0)
            .unwrap()
            .broadcast_to(&[3, 4, 3].into())
            .unwrap();
        let expected = definition(&a, &ll, &b, &rl);
        let (sa, sb) = (CpuStorage::F64(a), CpuStorage::F64(b));
        for split in [
            Parallelism {
                threads: 1,
                ..Parallelism::eager(1)
            },
            Parallelism::eager(2),
            // Products too big for one task each: every product is split instead.
            Parallelism {
                batch_min_work: usize::MAX,
                ..Parallelism::eager(2)
            },
        ] {
            let out = matmul_with(split, &sa, &ll, &sb, &rl).unwrap();
            assert_eq!(out.as_f64_slice().unwrap(), &expected[..], "{split:?}");
        }
    }

    #[test]
    fn miri_empty_and_out_of_storage_products_never_reach_the_gemm() {
        let s = CpuStorage::F32(vec![1.0; 4]);
        let empty = Layout::contiguous([2, 0]);
        let out = matmul(&s, &empty, &s, &Layout::contiguous([0, 2])).unwrap();
        assert_eq!(out.as_f32_slice().unwrap(), &[0.0; 4]);
        // A layout reaching past its storage is an error before any pointer is formed.
        let too_far = Layout::contiguous([2, 3]);
        assert!(matmul(&s, &too_far, &s, &Layout::contiguous([3, 1])).is_err());
    }
}
