//! Expressing a row-major strided GEMM as a column-major BLAS call (cuBLAS's convention).
//!
//! Row-major `C = A B` (`m x n`, contiguous) is, read column-major, `Cᵀ = Bᵀ Aᵀ` (`n x m`,
//! leading dimension `n`). An operand whose rows or columns are unit-stride is a BLAS operand
//! without copying: unit column stride gives its transpose as stored (`N`, `ld` = row stride),
//! unit row stride gives itself as stored (`T`, `ld` = column stride). Anything else (both
//! strides above 1, or rows overlapping) is not expressible and the tiled kernel runs instead.

use crate::driver::{BlasOperand, BlasTranspose};

/// One GEMM problem: `batch` products of `m x k` by `k x n` matrices, in elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GemmProblem {
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    /// A: offset, row stride, column stride, batch stride.
    pub(crate) a: [usize; 4],
    /// B: offset, row stride, column stride, batch stride.
    pub(crate) b: [usize; 4],
    /// Offset of the first C element (C batches are `m * n` apart).
    pub(crate) c_offset: usize,
    pub(crate) batch: usize,
}

/// How to read a row-major `rows x cols` operand with strides `(row, col)` so that BLAS sees its
/// transpose (`cols x rows`, column-major): `(op, ld)`, or None when impossible.
pub(crate) fn transposed_operand(
    rows: usize,
    cols: usize,
    row_stride: usize,
    col_stride: usize,
) -> Option<(BlasTranspose, usize)> {
    // A dimension of size 1 never moves along its stride, so any stride fits it.
    if col_stride == 1 || cols == 1 {
        let ld = if rows == 1 { cols.max(1) } else { row_stride };
        if ld >= cols.max(1) {
            return Some((BlasTranspose::None, ld));
        }
    }
    if row_stride == 1 || rows == 1 {
        let ld = if cols == 1 { rows.max(1) } else { col_stride };
        if ld >= rows.max(1) {
            return Some((BlasTranspose::Transpose, ld));
        }
    }
    None
}

/// The column-major operands of `problem` in BLAS order (first `Bᵀ`, then `Aᵀ`) as
/// `(op, ld, offset, batch stride)`, or None when an operand is not expressible or a size
/// exceeds BLAS's 32-bit integers.
#[allow(clippy::type_complexity)]
pub(crate) fn blas_operands(p: &GemmProblem) -> Option<[(BlasTranspose, usize, usize, usize); 2]> {
    let fits = |v: usize| i32::try_from(v).is_ok();
    if ![p.m, p.n, p.k, p.batch].iter().all(|&v| fits(v)) {
        return None;
    }
    let (b_op, ldb) = transposed_operand(p.k, p.n, p.b[1], p.b[2])?;
    let (a_op, lda) = transposed_operand(p.m, p.k, p.a[1], p.a[2])?;
    if !fits(ldb) || !fits(lda) || !fits(p.n) {
        return None;
    }
    Some([(b_op, ldb, p.b[0], p.b[3]), (a_op, lda, p.a[0], p.a[3])])
}

/// Builds a [`BlasOperand`] from the tuple of [`blas_operands`].
pub(crate) fn operand<B>(
    buffer: &B,
    (transpose, ld, offset, batch_stride): (BlasTranspose, usize, usize, usize),
) -> BlasOperand<'_, B> {
    BlasOperand {
        buffer,
        offset,
        transpose,
        ld,
        batch_stride,
    }
}

/// A reference column-major GEMM (`C = op(A) op(B)`, `C` is `m x n`), for tests of the mapping.
#[cfg(test)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn column_major_gemm(
    m: usize,
    n: usize,
    k: usize,
    a: (&[f64], BlasTranspose, usize, usize),
    b: (&[f64], BlasTranspose, usize, usize),
    c: &mut [f64],
    ldc: usize,
) {
    // op(X)[i, j] for a column-major X with leading dimension ld, starting at offset.
    let at = |(x, op, ld, off): (&[f64], BlasTranspose, usize, usize), i: usize, j: usize| match op
    {
        BlasTranspose::None => x[off + i + j * ld],
        BlasTranspose::Transpose => x[off + j + i * ld],
    };
    for j in 0..n {
        for i in 0..m {
            c[i + j * ldc] = (0..k).map(|q| at(a, i, q) * at(b, q, j)).sum();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Row-major strided `A (m x k)` times `B (k x n)` through the BLAS mapping, compared with
    /// the triple loop.
    fn check(m: usize, k: usize, n: usize, a_strides: (usize, usize), b_strides: (usize, usize)) {
        let storage: Vec<f64> = (0..400).map(|i| (i as f64 * 0.37).sin()).collect();
        let p = GemmProblem {
            m,
            n,
            k,
            a: [3, a_strides.0, a_strides.1, 0],
            b: [5, b_strides.0, b_strides.1, 0],
            c_offset: 0,
            batch: 1,
        };
        let Some([bt, at]) = blas_operands(&p) else {
            panic!("expected a BLAS mapping for {p:?}")
        };
        let mut c = vec![0.0; m * n];
        column_major_gemm(
            n,
            m,
            k,
            (&storage, bt.0, bt.1, bt.2),
            (&storage, at.0, at.1, at.2),
            &mut c,
            n.max(1),
        );
        for i in 0..m {
            for j in 0..n {
                let expected: f64 = (0..k)
                    .map(|q| {
                        storage[3 + i * a_strides.0 + q * a_strides.1]
                            * storage[5 + q * b_strides.0 + j * b_strides.1]
                    })
                    .sum();
                assert!(
                    (c[i * n + j] - expected).abs() < 1e-12,
                    "{p:?} at ({i}, {j})"
                );
            }
        }
    }

    #[test]
    fn row_major_transposed_and_degenerate_operands_map_to_blas() {
        check(3, 4, 5, (4, 1), (5, 1)); // both row-major
        check(3, 4, 5, (1, 3), (1, 4)); // both column-major (transposed views)
        check(3, 4, 5, (6, 1), (1, 7)); // padded rows, transposed B
        check(1, 4, 5, (99, 1), (5, 1)); // single row: its stride is irrelevant
        check(3, 1, 5, (1, 99), (99, 1)); // k = 1
        check(3, 4, 1, (4, 1), (1, 77)); // single column of B
    }

    #[test]
    fn operands_without_a_unit_stride_are_refused() {
        assert_eq!(transposed_operand(3, 4, 8, 2), None);
        // Overlapping rows (a broadcast row) cannot be a leading dimension.
        assert_eq!(transposed_operand(3, 4, 0, 1), None);
        assert_eq!(
            transposed_operand(3, 4, 4, 1),
            Some((BlasTranspose::None, 4))
        );
        assert_eq!(
            transposed_operand(3, 4, 1, 3),
            Some((BlasTranspose::Transpose, 3))
        );
    }
}
