//! Layouts: how a tensor's logical elements map onto its storage (shape, strides, offset).
//!
//! Every view op (reshape, permute, broadcast, narrow, squeeze...) only builds a new [`Layout`];
//! no element is copied. Backends receive a storage plus a layout and must honour arbitrary
//! strides, including 0 (broadcast dimensions) and non-unit innermost strides.

use crate::{shape::resolve_axis, Error, Result, Shape};

/// Shape, per-dimension strides (in elements) and the starting offset into the storage.
///
/// Invariant kept by every constructor in this module given a layout that already holds it
/// ([`Layout::contiguous`] of a shape passing [`Shape::check_size`], or [`Layout::strided`]): the
/// shape passes [`Shape::check_size`], strides are non-negative (0 for broadcast), and for every
/// in-bounds index the element offset `offset + sum(index[d] * strides[d])` is inside the storage
/// the layout was made for, so it fits in a `usize` (and an `i64`). Every computation here is
/// checked or saturating: a layout that breaks the invariant gives an error or a saturated
/// value, never a wrapped one, in debug and release builds alike.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    shape: Shape,
    strides: Vec<isize>,
    offset: usize,
}

impl Layout {
    /// A row-major contiguous layout starting at offset 0. Its strides are exact when the shape
    /// passes [`Shape::check_size`] (check it first for a shape from outside) and saturate
    /// otherwise (see [`Shape::contiguous_strides`]).
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
    /// `storage_len` elements: negative strides, a shape failing [`Shape::check_size`] or
    /// offsets that overflow are rejected. (A layout without elements reaches nothing, so its
    /// offset is not checked: views of empty tensors may point past their storage.)
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
        shape.check_size("as_strided")?;
        let layout = Layout {
            shape,
            strides,
            offset,
        };
        layout.check_fits("as_strided", storage_len)?;
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

    /// The storage offset of the last element reached by this layout (meaningless when empty);
    /// `usize::MAX` when it overflows (see [`Layout::checked_max_offset`]).
    pub fn max_offset(&self) -> usize {
        self.checked_max_offset().unwrap_or(usize::MAX)
    }

    /// The storage offset of the last element reached by this layout (meaningless when empty),
    /// or `None` when a stride is negative or the offset overflows `usize`.
    pub fn checked_max_offset(&self) -> Option<usize> {
        self.dims()
            .iter()
            .zip(&self.strides)
            .try_fold(self.offset, |last, (&d, &s)| {
                let s = usize::try_from(s).ok()?;
                d.saturating_sub(1)
                    .checked_mul(s)
                    .and_then(|extent| last.checked_add(extent))
            })
    }

    /// True when the elements are laid out row-major without gaps (any offset). A layout with no
    /// elements is trivially contiguous, whatever its strides.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1usize;
        for (&d, &s) in self.dims().iter().zip(&self.strides).rev() {
            if d != 1 && usize::try_from(s) != Ok(expected) {
                return false;
            }
            match expected.checked_mul(d) {
                Some(e) => expected = e,
                None => return false,
            }
        }
        true
    }

    /// `Some(offset..offset + numel)` when contiguous: the storage slice holding the elements.
    pub fn contiguous_range(&self) -> Option<std::ops::Range<usize>> {
        if !self.is_contiguous() {
            return None;
        }
        let end = self.offset.checked_add(self.numel())?;
        Some(self.offset..end)
    }

    /// Reinterprets the elements with a new shape of the same size without copying, or returns
    /// `Ok(None)` when the strides make that impossible (the caller then copies first).
    pub fn reshape(&self, new_shape: &Shape) -> Result<Option<Layout>> {
        new_shape.check_size("reshape")?;
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
                // Both products stay below the element count (equal for the two shapes), so
                // the next dimension exists and nothing overflows; checked all the same.
                if o_size < n_size {
                    o_size = o_size.checked_mul(old.get(o_end)?.0)?;
                    o_end += 1;
                } else {
                    n_size = n_size.checked_mul(*new_dims.get(n_end)?)?;
                    n_end += 1;
                }
            }
            // The old group oi..o_end must be mergeable: each stride = next stride * next dim.
            for k in oi..o_end - 1 {
                let merged = old[k + 1]
                    .1
                    .checked_mul(isize::try_from(old[k + 1].0).ok()?)?;
                if old[k].1 != merged {
                    return None;
                }
            }
            // Split the merged group into the new dims, innermost first. The stride after the
            // outermost dim of the group is not used, so it may saturate.
            let mut stride = old[o_end - 1].1;
            for k in (ni..n_end).rev() {
                new_strides[k] = stride;
                stride = stride.saturating_mul(dim_as_stride(new_dims[k]));
            }
            oi = o_end;
            ni = n_end;
        }
        // Remaining new dims are all 1: give them a harmless contiguous-looking stride.
        for k in 0..new_dims.len() {
            if new_dims[k] == 1 {
                new_strides[k] = if k + 1 < new_dims.len() {
                    new_strides[k + 1].saturating_mul(dim_as_stride(new_dims[k + 1]))
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
        target.check_size("broadcast_to")?;
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
        // An end past usize::MAX is past every axis: saturating keeps the error honest.
        self.slice(axis, start, start.saturating_add(len), 1)
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
        // With two or more elements kept, `stride * step` is below the axis's extent; with one
        // it is never used, so saturating is exact where it matters.
        strides[axis] = strides[axis].saturating_mul(dim_as_stride(step));
        let offset = if len == 0 {
            self.offset
        } else {
            usize::try_from(self.strides[axis])
                .ok()
                .and_then(|s| start.checked_mul(s))
                .and_then(|shift| self.offset.checked_add(shift))
                .ok_or_else(|| Error::InvalidArgument {
                    op: "slice",
                    msg: format!(
                        "the offset of element {start} of axis {axis} of {self:?} overflows"
                    ),
                })?
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
        if self.rank() >= Shape::MAX_RANK {
            return Err(Error::SizeOverflow {
                op: "unsqueeze",
                msg: format!(
                    "a rank-{} tensor cannot get another axis (the maximum rank is {})",
                    self.rank(),
                    Shape::MAX_RANK
                ),
            });
        }
        let mut dims = self.dims().to_vec();
        let mut strides = self.strides.clone();
        // The stride of a size-1 axis is never used to reach an element, so it may saturate.
        let stride = if axis < self.rank() {
            self.strides[axis].saturating_mul(dim_as_stride(self.dims()[axis]))
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

/// A dimension or step as a stride factor (saturating: only ever multiplied saturatingly).
fn dim_as_stride(d: usize) -> isize {
    isize::try_from(d).unwrap_or(isize::MAX)
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
        // Wrapping arithmetic: exact for a layout that fits its storage (the only kind a tensor
        // has); for any other it yields meaningless offsets rather than panicking.
        for d in (0..self.dims.len()).rev() {
            self.index[d] += 1;
            if self.index[d] < self.dims[d] {
                self.next = self.next.wrapping_add(self.strides[d]);
                break;
            }
            let rewind = (self.dims[d] as isize)
                .wrapping_sub(1)
                .wrapping_mul(self.strides[d]);
            self.next = self.next.wrapping_sub(rewind);
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
    fn absurd_views_are_errors_not_wrapped_layouts() {
        let l = Layout::contiguous([2, 1, 3]);
        assert!(matches!(
            l.broadcast_to(&Shape::new([2, 1 << 62, 3])),
            Err(Error::SizeOverflow { .. })
        ));
        assert!(matches!(
            l.narrow(0, usize::MAX, 2),
            Err(Error::RangeOutOfBounds { .. })
        ));
        assert!(l.reshape(&Shape::new([1 << 40, 1 << 40])).is_err());
        // The stride of a size-1 axis may be anything; stepping and unsqueezing saturate it.
        let odd = Layout::strided([1], vec![isize::MAX], 0, 1).unwrap();
        let stepped = odd.slice(0, 0, 1, usize::MAX).unwrap();
        assert_eq!(stepped.offsets().collect::<Vec<_>>(), vec![0]);
        assert!(odd.unsqueeze(0).is_ok());
        assert!(Layout::strided([1], vec![1], 1, 1).is_err());
        assert!(Layout::strided([0], vec![1], 5, 1).is_ok());
        assert!(Layout::strided([2, 2], vec![isize::MAX, 1], 0, 100).is_err());
        assert!(Layout::strided(vec![1; 65], vec![1; 65], 0, 1).is_err());
    }

    #[test]
    fn max_offset_saturates_instead_of_wrapping() {
        let huge = Layout::contiguous([1 << 40, 1 << 40]);
        assert_eq!(huge.checked_max_offset(), None);
        assert_eq!(huge.max_offset(), usize::MAX);
        assert!(!huge.is_contiguous() || huge.contiguous_range().is_none());
        assert_eq!(Layout::contiguous([2, 3]).checked_max_offset(), Some(5));
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
