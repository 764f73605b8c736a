//! Defensive checks a backend runs on the layouts it is handed.
//!
//! `Tensor` validates every op before it reaches a backend, but [`crate::Backend`] methods are
//! public, so a backend may still be called with a layout that does not fit its storage or with
//! operands that disagree. These checks turn such calls into typed errors; every backend in this
//! workspace runs them at the entry of its primitives, and a new backend should too.

use crate::{Error, Layout, Result};

impl Layout {
    /// Errors unless the shape is within [`crate::limits`] ([`Error::SizeOverflow`]), every
    /// element this layout reaches lies inside a storage of `storage_len` elements, no stride is
    /// negative, and every offset fits in an `i64` (what GPU kernels index with). Uses checked
    /// arithmetic, so absurd layouts cannot overflow; after it, products of the dims and
    /// offsets of in-bounds indices cannot either.
    pub fn check_fits(&self, op: &'static str, storage_len: usize) -> Result<()> {
        let bad = |msg: String| Error::InvalidArgument { op, msg };
        self.shape().check_size(op)?;
        if self.strides().len() != self.rank() {
            return Err(bad(format!(
                "layout {self:?} has a stride count unlike its rank"
            )));
        }
        if let Some(s) = self.strides().iter().find(|&&s| s < 0) {
            return Err(bad(format!("negative stride {s} in layout {self:?}")));
        }
        if self.numel() == 0 {
            return Ok(());
        }
        let mut last = self.offset();
        for (&d, &s) in self.dims().iter().zip(self.strides()) {
            last = (d - 1)
                .checked_mul(s as usize)
                .and_then(|extent| last.checked_add(extent))
                .filter(|&l| i64::try_from(l).is_ok())
                .ok_or_else(|| bad(format!("layout {self:?} overflows the address space")))?;
        }
        if last >= storage_len {
            return Err(bad(format!(
                "layout {self:?} reaches element {last} of a storage of {storage_len} elements"
            )));
        }
        Ok(())
    }

    /// Errors ([`Error::ShapeMismatch`]) unless `other` has this layout's shape.
    pub fn check_same_shape(&self, op: &'static str, other: &Layout) -> Result<()> {
        if self.shape() != other.shape() {
            return Err(Error::ShapeMismatch {
                op,
                lhs: self.shape().clone(),
                rhs: other.shape().clone(),
            });
        }
        Ok(())
    }

    /// Errors ([`Error::AxisOutOfRange`]) unless `axis` is an axis of this layout.
    pub fn check_axis(&self, op: &'static str, axis: usize) -> Result<()> {
        if axis >= self.rank() {
            return Err(Error::AxisOutOfRange {
                op,
                axis: axis as isize,
                rank: self.rank(),
            });
        }
        Ok(())
    }

    /// Errors unless `indices` (of `gather` or `scatter_add` along `axis`) has this layout's rank
    /// and is no larger on every axis but `axis`.
    pub fn check_indices_fit(&self, op: &'static str, axis: usize, indices: &Layout) -> Result<()> {
        let fits = indices.rank() == self.rank()
            && indices
                .dims()
                .iter()
                .zip(self.dims())
                .enumerate()
                .all(|(d, (&i, &s))| d == axis || i <= s);
        if !fits {
            return Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "indices of shape {} do not fit a tensor of shape {} off axis {axis}",
                    indices.shape(),
                    self.shape()
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_reaching_past_the_storage_are_rejected() {
        let l = Layout::contiguous([2, 3]);
        assert!(l.check_fits("t", 6).is_ok());
        let err = l.check_fits("t", 5).unwrap_err();
        assert!(err.to_string().contains("reaches element 5"), "{err}");
        assert!(Layout::contiguous([0, 3]).check_fits("t", 0).is_ok());
    }

    #[test]
    fn shapes_axes_and_indices_are_checked() {
        let a = Layout::contiguous([2, 3]);
        assert!(a.check_same_shape("t", &Layout::contiguous([2, 3])).is_ok());
        assert!(matches!(
            a.check_same_shape("t", &Layout::contiguous([3, 2])),
            Err(Error::ShapeMismatch { .. })
        ));
        assert!(a.check_axis("t", 1).is_ok());
        assert!(matches!(
            a.check_axis("t", 2),
            Err(Error::AxisOutOfRange { rank: 2, .. })
        ));
        assert!(a
            .check_indices_fit("t", 0, &Layout::contiguous([5, 3]))
            .is_ok());
        assert!(a
            .check_indices_fit("t", 0, &Layout::contiguous([5, 4]))
            .is_err());
        assert!(a
            .check_indices_fit("t", 0, &Layout::contiguous([5]))
            .is_err());
    }
}
