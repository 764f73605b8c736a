//! Layouts: how a tensor's logical elements map onto its storage (shape, strides, offset).
//!
//! Every view op (reshape, permute, broadcast, narrow, squeeze...) only builds a new [`Layout`];
//! no element is copied. Backends receive a storage plus a layout and must honour arbitrary
//! strides, including 0 (broadcast dimensions) and non-unit innermost strides.

use crate::{shape::resolve_axis, Error, Result, Shape};

/// Shape, per-dimension strides (in elements) and the starting offset into the storage.
///
/// Invariant kept by every constructor in this module: for every in-bounds index, the element
/// offset `offset + sum(index[d] * strides[d])` is non-negative and inside the storage the layout
/// was made for. Strides may be 0 (broadcast) but views never make them negative.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Shape,
    strides: Vec<isize>,
    offset: usize,
}

impl Layout {
    /// A row-major contiguous layout starting at offset 0.
    pub fn contiguous(shape: impl Into<Shape>) -> Self {
        let shape = shape.into();
        let strides = shape.contiguous_strides();
        Layout {
            shape,
            strides,
            offset: 0,
        }
    }

    /// A layout with explicit strides and offset, checked to stay inside a storage of
    /// `storage_len` elements (negative strides are rejected).
    pub fn strided(
        shape: impl Into<Shape>,
        strides: Vec<isize>,
        offset: usize,
        storage_len: usize,
    ) -> Result<Self> {
        let shape = shape.into();
        if strides.len() != shape.rank() {
            return Err(Error::InvalidArgument {
                op: "as_strided",
                msg: format!("{} strides given for shape {}", strides.len(), shape),
            });
        }
        if strides.iter().any(|&s| s < 0) {
            return Err(Error::InvalidArgument {
                op: "as_strided",
                msg: format!("negative strides {strides:?} are not supported"),
            });
        }
        let layout = Layout {
            shape,
            strides,
            offset,
        };
        if layout.numel() > 0 && layout.max_offset() >= storage_len {
            return Err(Error::InvalidArgument {
                op: "as_strided",
                msg: format!(
                    "layout {:?} reaches element {} of a storage of {} elements",
                    layout,
                    layout.max_offset(),
                    storage_len
                ),
            });
        }
        Ok(layout)
    }

    /// The logical shape.
    pub fn shape(&self) -> &Shape {
        &self.shape
    }

    /// The logical dimensions.
    pub fn dims(&self) -> &[usize] {
        self.shape.dims()
    }

    /// Strides in elements, one per dimension.
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// Offset of the first element in the storage.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.rank()
    }

    /// Number of logical elements.
    pub fn numel(&self) -> usize {
        self.shape.numel()
    }

    /// The storage offset of the last element reached by this layout (meaningless when empty).
    pub fn max_offset(&self) -> usize {
        let extent: isize = self
            .dims()
            .iter()
            .zip(&self.strides)
            .map(|(&d, &s)| (d.saturating_sub(1)) as isize * s)
            .sum();
        (self.offset as isize + extent) as usize
    }

    /// True when the elements are laid out row-major without gaps (any offset). A layout with no
    /// elements is trivially contiguous, whatever its strides.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1isize;
        for (&d, &s) in self.dims().iter().zip(&self.strides).rev() {
            if d != 1 && s != expected {
                return false;
            }
            expected *= d as isize;
        }
        true
    }

    /// `Some(offset..offset + numel)` when contiguous: the storage slice holding the elements.
    pub fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        self.is_contiguous()
            .then(|| self.offset..self.offset + self.numel())
    }

    /// Reinterprets the elements with a new shape of the same size without copying, or returns
    /// `Ok(None)` when the strides make that impossible (the caller then copies first).
    pub fn reshape(&self, new_shape: &Shape) -> Result<Option<Layout>> {
        if new_shape.numel() != self.numel() {
            return Err(Error::ElementCountMismatch {
                op: "reshape",
                from: self.shape.clone(),
                from_numel: self.numel(),
                to: new_shape.clone(),
                to_numel: new_shape.numel(),
            });
        }
        if self.is_contiguous() {
            return Ok(Some(Layout {
                shape: new_shape.clone(),
                strides: new_shape.contiguous_strides(),
                offset: self.offset,
            }));
        }
        if self.numel() == 0 {
            return Ok(Some(Layout {
                shape: new_shape.clone(),
                strides: new_shape.contiguous_strides(),
                offset: self.offset,
            }));
        }
        Ok(self.view_strides(new_shape.dims()).map(|strides| Layout {
            shape: new_shape.clone(),
            strides,
            offset: self.offset,
        }))
    }

    /// Strides for viewing a non-contiguous layout with `new_dims`, if the old dims can be split
    /// and merged without crossing a gap (the algorithm of NumPy's `_attempt_nocopy_reshape`).
    fn view_strides(&self, new_dims: &[usize]) -> Option<Vec<isize>> {
        // Drop size-1 dims of the old layout: their strides are irrelevant.
        let old: Vec<(usize, isize)> = self
            .dims()
            .iter()
            .zip(&self.strides)
            .filter(|(&d, _)| d != 1)
            .map(|(&d, &s)| (d, s))
            .collect();
        let mut new_strides = vec![0isize; new_dims.len()];
        let (mut oi, mut ni) = (0usize, 0usize);
        while oi < old.len() && ni < new_dims.len() {
            // Skip new size-1 dims; they get a stride after the loop.
            if new_dims[ni] == 1 {
                ni += 1;
                continue;
            }
            let (mut o_end, mut n_end) = (oi + 1, ni + 1);
            let mut o_size = old[oi].0;
            let mut n_size = new_dims[ni];
            while o_size != n_size {
                if o_size < n_size {
                    o_size *= old[o_end].0;
                    o_end += 1;
                } else {
                    n_size *= new_dims[n_end];
                    n_end += 1;
                }
            }
            // The old group oi..o_end must be mergeable: each stride = next stride * next dim.
            for k in oi..o_end - 1 {
                if old[k].1 != old[k + 1].1 * old[k + 1].0 as isize {
                    return None;
                }
            }
            // Split the merged group into the new dims, innermost first.
            let mut stride = old[o_end - 1].1;
            for k in (ni..n_end).rev() {
                new_strides[k] = stride;
                stride *= new_dims[k] as isize;
            }
            oi = o_end;
            ni = n_end;
        }
        // Remaining new dims are all 1: give them a harmless contiguous-looking stride.
        for k in 0..new_dims.len() {
            if new_dims[k] == 1 {
                new_strides[k] = if k + 1 < new_dims.len() {
                    new_strides[k + 1] * new_dims[k + 1] as isize
                } else {
                    1
                };
            }
        }
        Some(new_strides)
    }

    /// Reorders the dimensions: output dim `i` is input dim `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Result<Layout> {
        let rank = self.rank();
        let mut seen = vec![false; rank];
        if perm.len() != rank
            || perm
                .iter()
                .any(|&p| p >= rank || std::mem::replace(&mut seen[p], true))
        {
            return Err(Error::InvalidArgument {
                op: "permute",
                msg: format!(
                    "{perm:?} is not a permutation of the {rank} axes of {}",
                    self.shape
                ),
            });
        }
        Ok(Layout {
            shape: Shape::new(perm.iter().map(|&p| self.dims()[p]).collect::<Vec<_>>()),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        })
    }

    /// Swaps two axes (negative axes count from the end).
    pub fn transpose(&self, a: isize, b: isize) -> Result<Layout> {
        let a = resolve_axis("transpose", a, self.rank())?;
        let b = resolve_axis("transpose", b, self.rank())?;
        let mut perm: Vec<usize> = (0..self.rank()).collect();
        perm.swap(a, b);
        self.permute(&perm)
    }

    /// Broadcasts to `target` (NumPy rules) by giving expanded dimensions stride 0.
    pub fn broadcast_to(&self, target: &Shape) -> Result<Layout> {
        let rank = target.rank();
        let err = || Error::BroadcastIncompatible {
            op: "broadcast_to",
            lhs: self.shape.clone(),
            rhs: target.clone(),
        };
        if self.rank() > rank {
            return Err(err());
        }
        let lead = rank - self.rank();
        let mut strides = vec![0isize; rank];
        for (i, stride) in strides.iter_mut().enumerate().skip(lead) {
            let (d, s) = (self.dims()[i - lead], self.strides[i - lead]);
            *stride = if d == target.dims()[i] {
                s
            } else if d == 1 {
                0
            } else {
                return Err(err());
            };
        }
        Ok(Layout {
            shape: target.clone(),
            strides,
            offset: self.offset,
        })
    }

    /// Keeps elements `start..start + len` of `axis`.
    pub fn narrow(&self, axis: isize, start: usize, len: usize) -> Result<Layout> {
        self.slice(axis, start, start + len, 1)
    }

    /// Keeps elements `start, start + step, ...` below `end` along `axis` (`step >= 1`).
    pub fn slice(&self, axis: isize, start: usize, end: usize, step: usize) -> Result<Layout> {
        let axis = resolve_axis("slice", axis, self.rank())?;
        let size = self.dims()[axis];
        if start > end || end > size {
            return Err(Error::RangeOutOfBounds {
                op: "slice",
                axis,
                start,
                end,
                size,
            });
        }
        if step == 0 {
            return Err(Error::InvalidArgument {
                op: "slice",
                msg: "step must be at least 1".into(),
            });
        }
        let len = (end - start).div_ceil(step);
        let mut dims = self.dims().to_vec();
        dims[axis] = len;
        let mut strides = self.strides.clone();
        strides[axis] *= step as isize;
        let offset = if len == 0 {
            self.offset
        } else {
            (self.offset as isize + start as isize * self.strides[axis]) as usize
        };
        Ok(Layout {
            shape: Shape::new(dims),
            strides,
            offset,
        })
    }

    /// Inserts a dimension of size 1 at `axis` (`0..=rank`, negative counts from the end).
    pub fn unsqueeze(&self, axis: isize) -> Result<Layout> {
        let axis = resolve_axis("unsqueeze", axis, self.rank() + 1)?;
        let mut dims = self.dims().to_vec();
        let mut strides = self.strides.clone();
        let stride = if axis < self.rank() {
            self.strides[axis] * self.dims()[axis] as isize
        } else {
            1
        };
        dims.insert(axis, 1);
        strides.insert(axis, stride);
        Ok(Layout {
            shape: Shape::new(dims),
            strides,
            offset: self.offset,
        })
    }

    /// Removes dimension `axis`, which must have size 1.
    pub fn squeeze(&self, axis: isize) -> Result<Layout> {
        let axis = resolve_axis("squeeze", axis, self.rank())?;
        if self.dims()[axis] != 1 {
            return Err(Error::InvalidArgument {
                op: "squeeze",
                msg: format!(
                    "axis {axis} of shape {} has size {}, not 1",
                    self.shape,
                    self.dims()[axis]
                ),
            });
        }
        let mut dims = self.dims().to_vec();
        let mut strides = self.strides.clone();
        dims.remove(axis);
        strides.remove(axis);
        Ok(Layout {
            shape: Shape::new(dims),
            strides,
            offset: self.offset,
        })
    }

    /// Iterates the storage offsets of all elements in row-major logical order.
    pub fn offsets(&self) -> StridedOffsets {
        StridedOffsets::new(self)
    }
}

/// Row-major iterator over the storage offsets of a [`Layout`].
#[derive(Clone, Debug)]
pub struct StridedOffsets {
    dims: Vec<usize>,
    strides: Vec<isize>,
    index: Vec<usize>,
    next: isize,
    remaining: usize,
}

impl StridedOffsets {
    fn new(layout: &Layout) -> Self {
        StridedOffsets {
            dims: layout.dims().to_vec(),
            strides: layout.strides().to_vec(),
            index: vec![0; layout.rank()],
            next: layout.offset() as isize,
            remaining: layout.numel(),
        }
    }
}

impl Iterator for StridedOffsets {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        if self.remaining == 0 {
            return None;
        }
        self.remaining -= 1;
        let current = self.next as usize;
        for d in (0..self.dims.len()).rev() {
            self.index[d] += 1;
            if self.index[d] < self.dims[d] {
                self.next += self.strides[d];
                break;
            }
            self.next -= (self.dims[d] as isize - 1) * self.strides[d];
            self.index[d] = 0;
        }
        Some(current)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for StridedOffsets {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn permuted_offsets_follow_logical_order() {
        let l = Layout::contiguous([2, 3]).transpose(0, 1).unwrap();
        assert_eq!(l.offsets().collect::<Vec<_>>(), vec![0, 3, 1, 4, 2, 5]);
        assert!(!l.is_contiguous());
    }

    #[test]
    fn reshape_of_a_transposed_view_needs_a_copy() {
        let l = Layout::contiguous([2, 3]).transpose(0, 1).unwrap();
        assert!(l.reshape(&Shape::new([6])).unwrap().is_none());
        // Splitting a dimension of a strided view is still a view.
        let s = Layout::contiguous([4, 6]).slice(1, 0, 6, 2).unwrap();
        let r = s.reshape(&Shape::new([4, 3, 1])).unwrap().unwrap();
        assert_eq!(
            r.offsets().collect::<Vec<_>>(),
            s.offsets().collect::<Vec<_>>()
        );
    }

    #[test]
    fn reshape_rejects_a_different_element_count() {
        let err = Layout::contiguous([2, 3])
            .reshape(&Shape::new([4]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "reshape: cannot view [2, 3] (6 elements) as [4] (4 elements)"
        );
    }

    #[test]
    fn empty_layouts_are_contiguous() {
        // `contiguous_strides` treats a 0 dimension as 1, so this layout has strides [1, 1].
        assert!(Layout::contiguous([0, 0]).is_contiguous());
        assert!(Layout::contiguous([2, 0, 3]).is_contiguous());
        assert_eq!(Layout::contiguous([2, 0]).contiguous_range(), Some(0..0));
    }

    #[test]
    fn broadcast_gives_zero_strides() {
        let l = Layout::contiguous([3, 1])
            .broadcast_to(&Shape::new([2, 3, 4]))
            .unwrap();
        assert_eq!(l.strides(), &[0, 1, 0]);
    }

    #[test]
    fn narrow_out_of_range_is_an_error() {
        let err = Layout::contiguous([5]).narrow(0, 3, 4).unwrap_err();
        assert_eq!(
            err.to_string(),
            "slice: range 3..7 is out of bounds for axis 0 of size 5"
        );
    }
}
