//! Fused softmax, log-softmax and log-sum-exp over the last axis.
//!
//! Each row is read once into its output slot and then transformed in place, instead of the
//! five to seven full-tensor passes of the composite default. The arithmetic is the composite's
//! (`tessera_core::composite::softmax`): softmax and log-softmax shift by the row maximum
//! (NaN-propagating; a row with `+inf`, or only `-inf`, is NaN as in PyTorch),
//! `softmax = e / sum(e)` with `e = exp(x - max)` and `log_softmax = (x - max) - ln(sum(e))`;
//! log-sum-exp shifts by the maximum replaced by 0 when infinite. Sums are pairwise. Other
//! axes, and empty rows, are left to the composite (return `None`).

use super::lanes::Lane;
use super::num::Num;
use super::reducer::{reduce_slice, MaxOp, SumOp};
use crate::alloc::{checked_len, try_zeroed};
use crate::parallel::try_fill_rows;
use crate::strided::StridedPlan;
use crate::CpuStorage;
use tessera_core::{FloatElement, Layout, Result};

/// Which function of the row to compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RowOp {
    /// `exp(x - lse)`.
    Softmax,
    /// `x - lse`.
    LogSoftmax,
    /// `lse` itself: one value per row.
    LogSumExp,
}

/// The fused row op over the last axis of a float tensor, or `None` when the composite should
/// handle it (another axis, an empty axis, a non-float dtype). The output is contiguous: the
/// input shape, or for [`RowOp::LogSumExp`] the input shape with the last axis set to 1.
pub(crate) fn last_axis(
    op: RowOp,
    x: &CpuStorage,
    layout: &Layout,
    axis: usize,
) -> Option<Result<CpuStorage>> {
    let rank = layout.rank();
    if rank == 0 || axis != rank - 1 || layout.dims()[axis] == 0 {
        return None;
    }
    match x {
        CpuStorage::F32(v) => Some(rows(op, v, layout).map(CpuStorage::F32)),
        CpuStorage::F64(v) => Some(rows(op, v, layout).map(CpuStorage::F64)),
        _ => None,
    }
}

/// Applies `op` to every row of `x` (the last axis of `layout`, which is not empty).
fn rows<T: FloatElement + Num + Lane<T>>(op: RowOp, x: &[T], layout: &Layout) -> Result<Vec<T>> {
    let rank = layout.rank();
    let n = layout.dims()[rank - 1];
    let stride = layout.strides()[rank - 1] as usize;
    let outer = StridedPlan::new(
        &layout.dims()[..rank - 1],
        [&layout.strides()[..rank - 1]],
        [layout.offset()],
    );
    let row_count = outer.numel();
    // The row at `base` copied into `dst` (length n).
    let load = |base: usize, dst: &mut [T]| match stride {
        1 => dst.copy_from_slice(&x[base..base + n]),
        0 => dst.fill(x[base]),
        _ => {
            for (d, v) in dst.iter_mut().zip(x[base..].iter().step_by(stride)) {
                *d = *v;
            }
        }
    };
    if op == RowOp::LogSumExp {
        let mut out = try_zeroed::<T>(row_count)?;
        try_fill_rows(&mut out, 1, |first, chunk| {
            let mut scratch = try_zeroed::<T>(n)?;
            for (r, o) in chunk.iter_mut().enumerate() {
                let [base] = outer.offsets_at(first + r);
                load(base, &mut scratch);
                let shift = finite_shift_of(&scratch);
                exp_shifted(&mut scratch, shift);
                *o = reduce_slice::<T, T, SumOp>(&scratch).ln() + shift;
            }
            Ok(())
        })?;
        return Ok(out);
    }
    let mut out = try_zeroed::<T>(checked_len("softmax", &[row_count, n])?)?;
    try_fill_rows(&mut out, n, |first, chunk| {
        let mut scratch = if op == RowOp::LogSoftmax {
            try_zeroed::<T>(n)?
        } else {
            Vec::new()
        };
        for (r, row) in chunk.chunks_mut(n).enumerate() {
            let [base] = outer.offsets_at(first + r);
            load(base, row);
            let shift = reduce_slice::<T, T, MaxOp>(row);
            if op == RowOp::Softmax {
                exp_shifted(row, shift);
                let sum = reduce_slice::<T, T, SumOp>(row);
                for v in row.iter_mut() {
                    *v = *v / sum;
                }
            } else {
                for v in row.iter_mut() {
                    *v = *v - shift;
                }
                scratch.copy_from_slice(row);
                exp_shifted(&mut scratch, T::zero());
                let log_sum = reduce_slice::<T, T, SumOp>(&scratch).ln();
                for v in row.iter_mut() {
                    *v = *v - log_sum;
                }
            }
        }
        Ok(())
    })?;
    Ok(out)
}

/// The row maximum (NaN if any element is NaN), or 0 when it is infinite (log-sum-exp's shift).
fn finite_shift_of<T: FloatElement + Num + Lane<T>>(row: &[T]) -> T {
    let m = reduce_slice::<T, T, MaxOp>(row);
    if m.is_infinite() {
        T::zero()
    } else {
        m
    }
}

/// `v = exp(v - shift)` for every element.
fn exp_shifted<T: FloatElement>(row: &mut [T], shift: T) {
    for v in row.iter_mut() {
        *v = (*v - shift).exp();
    }
}
