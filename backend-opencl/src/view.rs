//! Strided operands as kernels see them: the [`View`] argument, and [`MapPlan`], which
//! simplifies the layouts of operands walked together and splits ranks above [`MAX_RANK`].

use tensor_core::kernels::MAX_RANK;
use tensor_core::Layout;

/// The kernel argument `View` of `common.cl.c`: element `i` (row-major over `dims`) is at
/// `offset + sum(index[d] * strides[d])`. Same field order and types as the C struct.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct View {
    offset: i64,
    rank: i64,
    dims: [i64; MAX_RANK],
    strides: [i64; MAX_RANK],
}

impl View {
    /// A view of `dims.len() <= MAX_RANK` dimensions (longer inputs are truncated: callers
    /// go through [`MapPlan`], which guarantees the bound).
    pub(crate) fn new(dims: &[usize], strides: &[isize], offset: usize) -> View {
        let mut view = View {
            offset: offset as i64,
            rank: dims.len().min(MAX_RANK) as i64,
            dims: [1; MAX_RANK],
            strides: [0; MAX_RANK],
        };
        for (d, (&n, &s)) in dims.iter().zip(strides).take(MAX_RANK).enumerate() {
            view.dims[d] = n as i64;
            view.strides[d] = s as i64;
        }
        view
    }

    /// A contiguous run of `len` elements starting at `offset`.
    pub(crate) fn contiguous(len: usize, offset: usize) -> View {
        View::new(&[len], &[1], offset)
    }
}

/// `N` operands walked together over one shape, simplified: size-1 dimensions dropped and
/// neighbouring dimensions merged where every operand allows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MapPlan<const N: usize> {
    dims: Vec<usize>,
    strides: [Vec<isize>; N],
    offsets: [usize; N],
}

/// One run of [`MapPlan::runs`]: offsets, then (length, strides) of the innermost dimension.
pub(crate) type Run<const N: usize> = ([usize; N], (usize, [isize; N]));

/// One launch of a [`MapPlan`]: the operand views and the position of its first element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Chunk<const N: usize> {
    /// One view per operand, each of rank at most [`MAX_RANK`].
    pub(crate) views: [View; N],
    /// Row-major index of the chunk's first element in the whole iteration space.
    pub(crate) first: usize,
    /// Number of elements.
    pub(crate) len: usize,
}

impl<const N: usize> MapPlan<N> {
    /// The plan of `layouts`, which share one shape.
    pub(crate) fn from_layouts(layouts: [&Layout; N]) -> Self {
        let dims = layouts[0].dims();
        MapPlan::new(
            dims,
            layouts.map(|l| l.strides()),
            layouts.map(|l| l.offset()),
        )
    }

    /// The plan of `N` operands over `dims` with their strides and offsets.
    pub(crate) fn new(dims: &[usize], strides: [&[isize]; N], offsets: [usize; N]) -> Self {
        let mut out_dims: Vec<usize> = Vec::with_capacity(dims.len());
        let mut out_strides: [Vec<isize>; N] = std::array::from_fn(|_| Vec::new());
        for (d, &n) in dims.iter().enumerate() {
            if n == 1 {
                continue;
            }
            let mergeable = out_dims.last().is_some_and(|_| {
                (0..N).all(|k| {
                    let prev = *out_strides[k].last().unwrap_or(&0);
                    prev == strides[k][d] * n as isize
                })
            });
            if mergeable {
                if let Some(last) = out_dims.last_mut() {
                    *last *= n;
                }
                for (k, s) in out_strides.iter_mut().enumerate() {
                    if let Some(last) = s.last_mut() {
                        *last = strides[k][d];
                    }
                }
            } else {
                out_dims.push(n);
                for (k, s) in out_strides.iter_mut().enumerate() {
                    s.push(strides[k][d]);
                }
            }
        }
        MapPlan {
            dims: out_dims,
            strides: out_strides,
            offsets,
        }
    }

    /// Number of elements.
    pub(crate) fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// Rank after simplification.
    pub(crate) fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The stride of operand 0 along the innermost remaining dimension (None for rank 0).
    pub(crate) fn inner_stride(&self) -> Option<isize> {
        self.strides[0].last().copied()
    }

    /// The plan as one-dimensional runs: for every index of all dimensions but the innermost,
    /// the operands' offsets there, and the innermost dimension's length and strides (a rank-0
    /// plan is one run of length 1). Empty when there is no element.
    pub(crate) fn runs(&self) -> Vec<Run<N>> {
        if self.numel() == 0 {
            return Vec::new();
        }
        let Some((&len, outer)) = self.dims.split_last() else {
            return vec![(self.offsets, (1, [0; N]))];
        };
        let inner: [isize; N] = std::array::from_fn(|k| self.strides[k][outer.len()]);
        let count: usize = outer.iter().product();
        let mut index = vec![0usize; outer.len()];
        let mut runs = Vec::with_capacity(count);
        for _ in 0..count {
            let offsets = std::array::from_fn(|k| {
                (self.offsets[k] as isize
                    + index
                        .iter()
                        .zip(&self.strides[k])
                        .map(|(&i, &s)| i as isize * s)
                        .sum::<isize>()) as usize
            });
            runs.push((offsets, (len, inner)));
            for d in (0..outer.len()).rev() {
                index[d] += 1;
                if index[d] < outer[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        runs
    }

    /// The launches covering every element: one when the rank is at most [`MAX_RANK`], else one
    /// per index of the leading dimensions, in row-major order. Empty when there is no element.
    pub(crate) fn chunks(&self) -> Vec<Chunk<N>> {
        let total = self.numel();
        if total == 0 {
            return Vec::new();
        }
        let rank = self.rank();
        let split = rank.saturating_sub(MAX_RANK);
        let (outer, inner) = self.dims.split_at(split);
        let inner_len: usize = inner.iter().product();
        let outer_count: usize = outer.iter().product();
        let mut index = vec![0usize; split];
        let mut chunks = Vec::with_capacity(outer_count);
        for o in 0..outer_count {
            let views = std::array::from_fn(|k| {
                let base = self.offsets[k] as isize
                    + index
                        .iter()
                        .zip(&self.strides[k])
                        .map(|(&i, &s)| i as isize * s)
                        .sum::<isize>();
                View::new(inner, &self.strides[k][split..], base as usize)
            });
            chunks.push(Chunk {
                views,
                first: o * inner_len,
                len: inner_len,
            });
            for d in (0..split).rev() {
                index[d] += 1;
                if index[d] < outer[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contiguous_operands_merge_to_rank_one() {
        let l = Layout::contiguous([2, 3, 4]);
        let plan = MapPlan::from_layouts([&l, &l]);
        assert_eq!(plan.rank(), 1);
        assert_eq!(plan.numel(), 24);
    }

    #[test]
    fn a_transposed_operand_keeps_two_dimensions() {
        let a = Layout::contiguous([3, 4]);
        let b = Layout::contiguous([4, 3]).transpose(0, 1).unwrap();
        let plan = MapPlan::from_layouts([&a, &b]);
        assert_eq!(plan.rank(), 2);
        let [chunk] = plan.chunks()[..] else {
            panic!("one chunk expected")
        };
        assert_eq!(chunk.views[1], View::new(&[3, 4], &[1, 3], 0));
    }

    #[test]
    fn high_ranks_split_into_chunks_that_cover_every_element() {
        // Rank 10, every dimension of size 2 with gaps so that nothing merges.
        let dims = [2usize; 10];
        let strides: Vec<isize> = (0..10).rev().map(|d| 3isize.pow(d)).collect();
        let plan = MapPlan::new(&dims, [&strides], [5]);
        assert_eq!(plan.rank(), 10);
        let chunks = plan.chunks();
        assert_eq!(chunks.len(), 4);
        assert_eq!(chunks[3].first, 3 * 256);
        // The last chunk starts at index [1, 1, 0, ...]: offset 5 + 3^9 + 3^8.
        assert_eq!(chunks[3].views[0].offset, 5 + 19683 + 6561);
        assert_eq!(chunks.iter().map(|c| c.len).sum::<usize>(), 1024);
    }
}
