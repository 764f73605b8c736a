//! The size limits every tensor obeys, and the checks that enforce them.
//!
//! Every shape a [`crate::Tensor`] is built with, by a constructor, a view or an op, first passes
//! [`Shape::check_size`]; every storage a backend is asked to create first passes
//! [`Shape::check_bytes`]. So, for every tensor:
//!
//! * the rank is at most [`Shape::MAX_RANK`];
//! * the *extent*, the product of `max(dim, 1)` over the dimensions, is at most `isize::MAX`:
//!   the element count, every contiguous stride and every offset of an in-bounds index fit in an
//!   `isize`, so no later multiplication over the shape can wrap;
//! * a storage holds at most `isize::MAX` bytes (Rust's own limit for one allocation).
//!
//! A shape beyond these limits is [`Error::SizeOverflow`]; a shape within them whose memory the
//! device cannot provide is [`Error::OutOfMemory`] from the backend. Both are returned in debug
//! and release builds alike: no check here relies on overflow checks or debug assertions.

use crate::{DType, Error, Result, Shape};

impl Shape {
    /// The largest rank a tensor may have (NumPy's limit too).
    pub const MAX_RANK: usize = 64;

    /// The element count, or [`Error::SizeOverflow`] naming `op` unless this shape is
    /// addressable: rank at most [`Shape::MAX_RANK`] and extent (the product of `max(dim, 1)`)
    /// at most `isize::MAX`.
    ///
    /// ```
    /// use tessera_core::{Error, Shape};
    /// assert_eq!(Shape::new([2, 0, 3]).check_size("zeros").unwrap(), 0);
    /// let err = Shape::new([1 << 40, 1 << 40]).check_size("zeros").unwrap_err();
    /// assert!(matches!(err, Error::SizeOverflow { op: "zeros", .. }));
    /// ```
    pub fn check_size(&self, op: &'static str) -> Result<usize> {
        if self.rank() > Self::MAX_RANK {
            return Err(Error::SizeOverflow {
                op,
                msg: format!(
                    "{} has rank {}, more than the {} a tensor may have",
                    describe(self),
                    self.rank(),
                    Self::MAX_RANK
                ),
            });
        }
        let extent = self
            .dims()
            .iter()
            .try_fold(1usize, |acc, &d| acc.checked_mul(d.max(1)))
            .filter(|&e| e <= isize::MAX as usize);
        if extent.is_none() {
            return Err(Error::SizeOverflow {
                op,
                msg: format!(
                    "{} has more than isize::MAX (2^63 - 1) elements (counting a size-0 \
                     dimension as 1)",
                    describe(self)
                ),
            });
        }
        Ok(self.numel())
    }

    /// The size in bytes of a contiguous `dtype` storage of this shape, or
    /// [`Error::SizeOverflow`] naming `op` when the shape fails [`Shape::check_size`] or the
    /// bytes exceed `isize::MAX`.
    pub fn check_bytes(&self, op: &'static str, dtype: DType) -> Result<usize> {
        let numel = self.check_size(op)?;
        numel
            .checked_mul(dtype.size_in_bytes())
            .filter(|&b| b <= isize::MAX as usize)
            .ok_or_else(|| Error::SizeOverflow {
                op,
                msg: format!(
                    "{} of {dtype} needs more than isize::MAX (2^63 - 1) bytes",
                    describe(self)
                ),
            })
    }
}

/// `shape [2, 3]` for messages, or `a rank-100000 shape` when the dims would flood them.
pub(crate) fn describe(shape: &Shape) -> String {
    if shape.rank() <= 16 {
        format!("shape {shape}")
    } else {
        format!("a rank-{} shape", shape.rank())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addressable_shapes_pass() {
        assert_eq!(Shape::scalar().check_size("t").unwrap(), 1);
        assert_eq!(Shape::new([2, 3, 4]).check_size("t").unwrap(), 24);
        assert_eq!(Shape::new([0, 1 << 40]).check_size("t").unwrap(), 0);
        let max = isize::MAX as usize;
        assert_eq!(Shape::new([max]).check_size("t").unwrap(), max);
        assert_eq!(
            Shape::new([1 << 20]).check_bytes("t", DType::F64).unwrap(),
            8 << 20
        );
    }

    #[test]
    fn shapes_beyond_the_limits_fail_without_wrapping() {
        for dims in [
            vec![1 << 40, 1 << 40],
            vec![1 << 32, 1 << 32],
            vec![usize::MAX],
            vec![isize::MAX as usize + 1],
            // Empty, but its contiguous strides would not fit an isize.
            vec![0, 1 << 62, 4],
        ] {
            let err = Shape::new(dims.clone()).check_size("zeros").unwrap_err();
            assert!(
                matches!(err, Error::SizeOverflow { op: "zeros", .. }),
                "{dims:?}: {err:?}"
            );
        }
        let err = Shape::new(vec![1; 65]).check_size("reshape").unwrap_err();
        assert!(err.to_string().contains("rank 65"), "{err}");
        let err = Shape::new([1 << 61])
            .check_bytes("zeros", DType::F32)
            .unwrap_err();
        assert!(err.to_string().contains("bytes"), "{err}");
    }

    #[test]
    fn numel_and_strides_saturate_instead_of_wrapping() {
        let huge = Shape::new([1 << 40, 1 << 40]);
        assert_eq!(huge.numel(), usize::MAX);
        assert_eq!(huge.checked_numel(), None);
        assert_eq!(Shape::new([0, usize::MAX, 2]).numel(), 0);
        let strides = Shape::new([4, 1 << 62, 4]).contiguous_strides();
        assert!(strides.iter().all(|&s| s > 0), "{strides:?}");
        assert_eq!(strides, vec![isize::MAX, 4, 1]);
    }
}
