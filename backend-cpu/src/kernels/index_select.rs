//! `index_select`: whole slices along one axis, picked by a rank-1 index tensor.

use super::copy::copy_strided;
use super::index_check::{checked_index, index_values};
use crate::alloc::{checked_len, try_with_capacity, try_zeroed, Zeroable};
use crate::parallel::fill_rows;
use crate::storage::map_storage;
use crate::strided::StridedPlan;
use crate::CpuStorage;
use tessera_core::{Error, Layout, Result};

const OP: &str = "index_select";

/// Output `[.., i, ..]` is input `[.., indices[i], ..]` along `axis`; contiguous output.
pub(crate) fn index_select(
    x: &CpuStorage,
    layout: &Layout,
    axis: usize,
    indices: &CpuStorage,
    indices_layout: &Layout,
) -> Result<CpuStorage> {
    layout.check_axis(OP, axis)?;
    if indices_layout.rank() != 1 {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!(
                "indices must have rank 1, got shape {}",
                indices_layout.shape()
            ),
        });
    }
    let size = layout.dims()[axis];
    // Every index is checked, even when the output is empty (another axis of size 0).
    let values = copy_strided(index_values(OP, indices)?, indices_layout)?;
    let mut picks = try_with_capacity(values.len())?;
    for i in values {
        picks.push(checked_index(OP, i, size)?);
    }
    let selection = Selection::new(layout, axis, picks);
    Ok(map_storage!(x, v => selection.apply(v)?))
}

/// The precomputed walk of one index selection.
struct Selection {
    picks: Vec<usize>,
    axis_stride: usize,
    /// Walks the axes before `axis`; gives each outer index's offset.
    outer: StridedPlan<1>,
    /// Walks the axes after `axis` (one output row), from offset 0.
    inner: StridedPlan<1>,
}

impl Selection {
    fn new(layout: &Layout, axis: usize, picks: Vec<usize>) -> Self {
        let (dims, strides) = (layout.dims(), layout.strides());
        Selection {
            picks,
            axis_stride: strides[axis] as usize,
            outer: StridedPlan::new(&dims[..axis], [&strides[..axis]], [layout.offset()]),
            inner: StridedPlan::new(&dims[axis + 1..], [&strides[axis + 1..]], [0]),
        }
    }

    /// Gathers the selected rows of `x` into a fresh output.
    fn apply<T: Zeroable + Send + Sync>(&self, x: &[T]) -> Result<Vec<T>> {
        let row_len = self.inner.numel();
        let rows = checked_len(OP, &[self.outer.numel(), self.picks.len()])?;
        let mut out = try_zeroed::<T>(checked_len(OP, &[rows, row_len])?)?;
        let [s] = self.inner.inner_strides();
        fill_rows(&mut out, row_len, |first_row, chunk| {
            for (r, row) in chunk.chunks_mut(row_len).enumerate() {
                let (o, j) = (
                    (first_row + r) / self.picks.len(),
                    (first_row + r) % self.picks.len(),
                );
                let [outer_offset] = self.outer.offsets_at(o);
                let base = outer_offset + self.picks[j] * self.axis_stride;
                self.inner.for_each_run(0, row_len, |pos, [off], len| {
                    let dst = &mut row[pos..pos + len];
                    let at = base + off;
                    match s {
                        1 => dst.copy_from_slice(&x[at..at + len]),
                        0 => dst.fill(x[at]),
                        _ => {
                            for (d, v) in dst.iter_mut().zip(x[at..].iter().step_by(s)) {
                                *d = *v;
                            }
                        }
                    }
                });
            }
        });
        Ok(out)
    }
}
