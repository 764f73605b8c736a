//! Strided iteration: the engine under every element-wise kernel.
//!
//! A [`StridedPlan`] walks `N` equally shaped layouts together in row-major logical order. It
//! first simplifies the iteration space:
//! * dimensions of size 1 are dropped (their strides never matter);
//! * dimension `d` is merged into `d + 1` when, for **every** operand,
//!   `stride[d] == stride[d + 1] * dim[d + 1]` (the two dimensions are jointly contiguous), so a
//!   contiguous tensor becomes one long run and a transposed one keeps only what it must.
//!
//! Then [`StridedPlan::for_each_run`] hands the caller maximal *runs* along the innermost
//! remaining dimension: a logical position, one storage offset per operand and a length. The
//! caller's inner loop advances each operand by its inner stride ([`StridedPlan::inner_strides`]),
//! which lets it pick a plain slice loop (stride 1, auto-vectorised), a broadcast scalar
//! (stride 0) or a stepped loop. The outer dimensions are walked by a multi-index counter, and a
//! walk can start at any logical position, which is how the parallel kernels split the output.

/// A simplified iteration space over `N` operands of one shape.
#[derive(Clone, Debug)]
pub(crate) struct StridedPlan<const N: usize> {
    /// Extent of each remaining dimension, outermost first; never empty.
    dims: Vec<usize>,
    /// Per dimension, the stride of each operand (in elements).
    strides: Vec<[usize; N]>,
    /// Storage offset of the first element of each operand.
    offsets: [usize; N],
    /// Number of logical elements.
    numel: usize,
}

impl<const N: usize> StridedPlan<N> {
    /// Builds the plan for `dims` with one stride list and offset per operand. Strides must be
    /// non-negative (checked at the entry of every primitive); each list has `dims.len()` entries.
    pub(crate) fn new(dims: &[usize], strides: [&[isize]; N], offsets: [usize; N]) -> Self {
        let numel = dims.iter().product();
        let mut merged_dims: Vec<usize> = Vec::with_capacity(dims.len());
        let mut merged_strides: Vec<[usize; N]> = Vec::with_capacity(dims.len());
        for (d, &extent) in dims.iter().enumerate() {
            if extent == 1 {
                continue;
            }
            let stride: [usize; N] = std::array::from_fn(|k| strides[k][d].max(0) as usize);
            match (merged_dims.last_mut(), merged_strides.last_mut()) {
                // Checked: the strides of an empty layout are arbitrary (it reaches nothing).
                (Some(outer_dim), Some(outer_stride))
                    if (0..N).all(|k| stride[k].checked_mul(extent) == Some(outer_stride[k])) =>
                {
                    *outer_dim *= extent;
                    *outer_stride = stride;
                }
                _ => {
                    merged_dims.push(extent);
                    merged_strides.push(stride);
                }
            }
        }
        if merged_dims.is_empty() {
            merged_dims.push(1);
            merged_strides.push([0; N]);
        }
        StridedPlan {
            dims: merged_dims,
            strides: merged_strides,
            offsets,
            numel,
        }
    }

    /// The plan of `N` layouts that share the shape of the first one.
    pub(crate) fn from_layouts(layouts: [&tessera_core::Layout; N]) -> Self {
        Self::new(
            layouts.first().map_or(&[][..], |l| l.dims()),
            std::array::from_fn(|k| layouts[k].strides()),
            std::array::from_fn(|k| layouts[k].offset()),
        )
    }

    /// Number of logical elements.
    pub(crate) fn numel(&self) -> usize {
        self.numel
    }

    /// The simplified dimensions, outermost first (never empty).
    pub(crate) fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Per simplified dimension, the stride of each operand.
    pub(crate) fn strides(&self) -> &[[usize; N]] {
        &self.strides
    }

    /// The strides of each operand along the innermost simplified dimension.
    pub(crate) fn inner_strides(&self) -> [usize; N] {
        self.strides[self.strides.len() - 1]
    }

    /// The storage offsets of the element at logical (row-major) position `position`.
    pub(crate) fn offsets_at(&self, position: usize) -> [usize; N] {
        let mut offsets = self.offsets;
        let mut rest = position;
        for (extent, stride) in self.dims.iter().zip(&self.strides).rev() {
            let i = rest % extent;
            rest /= extent;
            add_scaled(&mut offsets, stride, i);
        }
        offsets
    }

    /// Splits off the outermost simplified dimension: its extent, each operand's stride along
    /// it, and the plan of the remaining dimensions with zero offsets. `None` for a single
    /// dimension.
    pub(crate) fn split_outer(&self) -> Option<(usize, [usize; N], StridedPlan<N>)> {
        if self.dims.len() < 2 {
            return None;
        }
        let inner = StridedPlan {
            dims: self.dims[1..].to_vec(),
            strides: self.strides[1..].to_vec(),
            offsets: [0; N],
            numel: self.dims[1..].iter().product(),
        };
        Some((self.dims[0], self.strides[0], inner))
    }

    /// The plan of the simplified dimensions `dims` (a range of [`StridedPlan::dims`]) alone,
    /// from the same base offsets. An empty range gives a single element.
    pub(crate) fn sub_plan(&self, dims: std::ops::Range<usize>) -> StridedPlan<N> {
        let (mut d, mut s) = (
            self.dims[dims.clone()].to_vec(),
            self.strides[dims].to_vec(),
        );
        if d.is_empty() {
            d.push(1);
            s.push([0; N]);
        }
        StridedPlan {
            numel: d.iter().product(),
            dims: d,
            strides: s,
            offsets: self.offsets,
        }
    }

    /// Storage offset of the first element of each operand.
    pub(crate) fn base_offsets(&self) -> [usize; N] {
        self.offsets
    }

    /// For operand `k`, one past the largest offset (relative to its base) the plan reaches.
    pub(crate) fn extent(&self, k: usize) -> usize {
        self.dims
            .iter()
            .zip(&self.strides)
            .map(|(&d, s)| (d - 1) * s[k])
            .sum::<usize>()
            + 1
    }

    /// Calls `body(position, offsets, len)` for consecutive runs covering the logical positions
    /// `start..start + len` (clipped to the element count). `position` counts from `start`;
    /// within a run operand `k` advances by `inner_strides()[k]` per element.
    pub(crate) fn for_each_run(
        &self,
        start: usize,
        len: usize,
        mut body: impl FnMut(usize, [usize; N], usize),
    ) {
        let never: Result<(), std::convert::Infallible> =
            self.try_for_each_run(start, len, |p, o, l| {
                body(p, o, l);
                Ok(())
            });
        let Ok(()) = never;
    }

    /// [`StridedPlan::for_each_run`] whose body may fail; the walk stops at the first error.
    pub(crate) fn try_for_each_run<E>(
        &self,
        start: usize,
        len: usize,
        mut body: impl FnMut(usize, [usize; N], usize) -> Result<(), E>,
    ) -> Result<(), E> {
        let len = len.min(self.numel.saturating_sub(start));
        if len == 0 {
            return Ok(());
        }
        let rank = self.dims.len();
        if rank == 1 {
            let offsets = std::array::from_fn(|k| self.offsets[k] + start * self.strides[0][k]);
            return body(0, offsets, len);
        }
        let inner = rank - 1;
        // The multi-index lives on the stack for the usual ranks (this runs once per chunk or
        // once per output row, so it should not allocate).
        let mut stack_index = [0usize; 8];
        let mut heap_index = Vec::new();
        let index: &mut [usize] = if rank <= stack_index.len() {
            &mut stack_index[..rank]
        } else {
            heap_index.resize(rank, 0);
            &mut heap_index
        };
        let mut offsets = self.offsets_at(start);
        let mut rest = start;
        for (i, &extent) in index.iter_mut().zip(&self.dims).rev() {
            *i = rest % extent;
            rest /= extent;
        }
        let mut done = 0;
        loop {
            let run = (self.dims[inner] - index[inner]).min(len - done);
            body(done, offsets, run)?;
            done += run;
            if done >= len {
                return Ok(());
            }
            // The run reached the end of the innermost dimension: rewind it and carry outwards.
            sub_scaled(&mut offsets, &self.strides[inner], index[inner]);
            index[inner] = 0;
            for d in (0..inner).rev() {
                index[d] += 1;
                add_scaled(&mut offsets, &self.strides[d], 1);
                if index[d] < self.dims[d] {
                    break;
                }
                sub_scaled(&mut offsets, &self.strides[d], self.dims[d]);
                index[d] = 0;
            }
        }
    }
}

/// `offsets[k] += times * strides[k]` for every operand.
#[inline(always)]
fn add_scaled<const N: usize>(offsets: &mut [usize; N], strides: &[usize; N], times: usize) {
    for (o, s) in offsets.iter_mut().zip(strides) {
        *o += times * s;
    }
}

/// `offsets[k] -= times * strides[k]` for every operand (never below zero by construction).
#[inline(always)]
fn sub_scaled<const N: usize>(offsets: &mut [usize; N], strides: &[usize; N], times: usize) {
    for (o, s) in offsets.iter_mut().zip(strides) {
        *o -= times * s;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_core::Layout;

    /// Storage offsets of every element, in order, from the plan's runs.
    fn walk<const N: usize>(plan: &StridedPlan<N>, start: usize, len: usize) -> Vec<[usize; N]> {
        let mut out = Vec::new();
        let strides = plan.inner_strides();
        plan.for_each_run(start, len, |pos, offsets, run| {
            assert_eq!(pos, out.len());
            for i in 0..run {
                out.push(std::array::from_fn(|k| offsets[k] + i * strides[k]));
            }
        });
        out
    }

    #[test]
    fn contiguous_layouts_collapse_to_one_run() {
        let l = Layout::contiguous([2, 3, 4]);
        let plan = StridedPlan::from_layouts([&l, &l]);
        assert_eq!(plan.dims(), &[24]);
        assert_eq!(plan.inner_strides(), [1, 1]);
    }

    #[test]
    fn walks_match_the_layout_offsets_from_any_start() {
        let base = Layout::contiguous([4, 5, 6]);
        let layouts = [
            base.permute(&[2, 0, 1]).unwrap(),
            base.slice(2, 1, 6, 2).unwrap(),
            Layout::contiguous([5, 1])
                .broadcast_to(&[4, 5, 3].into())
                .unwrap(),
            base.narrow(1, 1, 3).unwrap().transpose(0, 2).unwrap(),
        ];
        for l in &layouts {
            let expected: Vec<usize> = l.offsets().collect();
            let plan = StridedPlan::from_layouts([l]);
            for start in [0, 1, 5, expected.len() / 2, expected.len() - 1] {
                for len in [0, 1, 7, expected.len()] {
                    let got: Vec<usize> = walk(&plan, start, len).iter().map(|o| o[0]).collect();
                    let end = (start + len).min(expected.len());
                    assert_eq!(got, expected[start..end], "{l:?} from {start} for {len}");
                }
            }
            for p in [0, 3, expected.len() - 1] {
                assert_eq!(plan.offsets_at(p), [expected[p]]);
            }
        }
    }

    #[test]
    fn joint_coalescing_respects_every_operand() {
        let a = Layout::contiguous([3, 4]);
        let b = Layout::contiguous([4, 3]).transpose(0, 1).unwrap();
        let plan = StridedPlan::from_layouts([&a, &b]);
        assert_eq!(plan.dims(), &[3, 4]);
        let got = walk(&plan, 0, 12);
        let expected: Vec<[usize; 2]> = a.offsets().zip(b.offsets()).map(|(x, y)| [x, y]).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn rank_zero_and_unit_dims_give_a_single_element() {
        let l = Layout::contiguous([1, 1]);
        let plan = StridedPlan::from_layouts([&l]);
        assert_eq!(plan.dims(), &[1]);
        assert_eq!(walk(&plan, 0, 1), vec![[0]]);
        let scalar = Layout::contiguous(());
        assert_eq!(walk(&StridedPlan::from_layouts([&scalar]), 0, 5), vec![[0]]);
    }
}
