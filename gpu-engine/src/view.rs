//! Strided operands as kernels see them: the [`View`] argument, and [`MapPlan`], which
//! simplifies the layouts of operands walked together and splits ranks above [`MAX_RANK`].

use tessera_core::kernels::MAX_RANK;
use tessera_core::Layout;

/// The kernel argument `View` of `common.cl.c`: element `i` (row-major over `dims`) is at
/// `offset + sum(index[d] * strides[d])`. Same field order and types as the C struct, which
/// CUDA receives by value (`repr(C)`, 144 bytes, 8-byte aligned).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct View {
    pub(crate) offset: i64,
    pub(crate) rank: i64,
    pub(crate) dims: [i64; MAX_RANK],
    pub(crate) strides: [i64; MAX_RANK],
}

impl View {
    /// A view of `dims.len() <= MAX_RANK` dimensions (longer inputs are truncated: callers go
    /// through [`MapPlan`], which guarantees the bound).
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

    /// The storage offset of logical element `i`: the kernels' `view_at`, for tests.
    #[cfg(test)]
    pub(crate) fn at(&self, mut i: i64) -> i64 {
        let mut off = self.offset;
        for d in (0..self.rank as usize).rev() {
            let n = self.dims[d];
            off += (i % n) * self.strides[d];
            i /= n;
        }
        off
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

/// One run of a plan's innermost dimension: the operands' offsets at its start, its length and
/// the operands' strides along it.
pub(crate) type Run<const N: usize> = ([usize; N], (usize, [isize; N]));

impl<const N: usize> MapPlan<N> {
    /// The plan of `layouts`, which share one shape.
    pub(crate) fn from_layouts(layouts: [&Layout; N]) -> Self {
        MapPlan::new(
            layouts[0].dims(),
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
            let mergeable = !out_dims.is_empty()
                && (0..N).all(|k| {
                    let prev = *out_strides[k].last().unwrap_or(&0);
                    prev == strides[k][d] * n as isize
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

    /// The stride of operand 0 along the innermost dimension, when there is exactly one
    /// dimension (None for rank 0 or above 1).
    pub(crate) fn inner_stride(&self) -> Option<isize> {
        (self.rank() == 1).then(|| self.strides[0][0])
    }

    /// Row-major iteration over every dimension but the innermost: for each index, the
    /// operands' offsets and the innermost run. A rank-0 plan (one element) gives one run of
    /// length 1 with zero strides; an empty plan gives none.
    pub(crate) fn runs(&self) -> Vec<Run<N>> {
        if self.numel() == 0 {
            return Vec::new();
        }
        let Some((&inner_len, outer)) = self.dims.split_last() else {
            return vec![(self.offsets, (1, [0; N]))];
        };
        let inner: [isize; N] = std::array::from_fn(|k| self.strides[k][outer.len()]);
        let count: usize = outer.iter().product();
        let mut index = vec![0usize; outer.len()];
        let mut runs = Vec::with_capacity(count);
        for _ in 0..count {
            let offsets = std::array::from_fn(|k| self.offset_at(k, &index));
            runs.push((offsets, (inner_len, inner)));
            advance(&mut index, outer);
        }
        runs
    }

    /// The launches covering every element: one when the rank is at most [`MAX_RANK`], else one
    /// per index of the leading dimensions, in row-major order. Empty when there is no element.
    pub(crate) fn chunks(&self) -> Vec<Chunk<N>> {
        if self.numel() == 0 {
            return Vec::new();
        }
        let split = self.rank().saturating_sub(MAX_RANK);
        let (outer, inner) = self.dims.split_at(split);
        let inner_len: usize = inner.iter().product();
        let outer_count: usize = outer.iter().product();
        let mut index = vec![0usize; split];
        let mut chunks = Vec::with_capacity(outer_count);
        for o in 0..outer_count {
            let views = std::array::from_fn(|k| {
                View::new(inner, &self.strides[k][split..], self.offset_at(k, &index))
            });
            chunks.push(Chunk {
                views,
                first: o * inner_len,
                len: inner_len,
            });
            advance(&mut index, outer);
        }
        chunks
    }

    /// Operand `k`'s storage offset at the leading `index`.
    fn offset_at(&self, k: usize, index: &[usize]) -> usize {
        let moved: isize = index
            .iter()
            .zip(&self.strides[k])
            .map(|(&i, &s)| i as isize * s)
            .sum();
        (self.offsets[k] as isize + moved) as usize
    }
}

/// Steps a row-major multi-index over `dims` (wrapping to zeros after the last index).
fn advance(index: &mut [usize], dims: &[usize]) {
    for d in (0..dims.len()).rev() {
        index[d] += 1;
        if index[d] < dims[d] {
            return;
        }
        index[d] = 0;
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
        assert_eq!(plan.inner_stride(), Some(1));
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
        let offsets: Vec<i64> = (0..12).map(|i| chunk.views[1].at(i)).collect();
        let expected: Vec<i64> = b.offsets().map(|o| o as i64).collect();
        assert_eq!(offsets, expected);
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
        // Every element is reached once, in row-major order.
        let layout = Layout::strided(dims, strides.clone(), 5, 100_000).unwrap();
        let walked: Vec<i64> = chunks
            .iter()
            .flat_map(|c| (0..c.len as i64).map(move |i| c.views[0].at(i)))
            .collect();
        let expected: Vec<i64> = layout.offsets().map(|o| o as i64).collect();
        assert_eq!(walked, expected);
    }

    #[test]
    fn runs_cover_the_outer_dimensions_in_order() {
        let b = Layout::contiguous([2, 3, 4]).permute(&[2, 0, 1]).unwrap();
        let plan = MapPlan::from_layouts([&b]);
        let runs = plan.runs();
        assert_eq!(runs.len(), 4);
        assert_eq!(runs[1], ([1], (6, [4])));
        let single = MapPlan::<1>::new(&[], [&[]], [7]);
        assert_eq!(single.runs(), vec![([7], (1, [0]))]);
    }
}
