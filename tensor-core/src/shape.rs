//! Tensor shapes and NumPy broadcasting.

use crate::{Error, Result};
use std::fmt;

/// The extent of each dimension of a tensor; rank 0 (`[]`) is a scalar with one element.
#[derive(Clone, PartialEq, Eq, Hash, Default)]
pub struct Shape(Vec<usize>);

impl Shape {
    /// Creates a shape from its dimensions.
    pub fn new(dims: impl Into<Vec<usize>>) -> Self {
        Shape(dims.into())
    }

    /// The rank-0 shape of a scalar.
    pub fn scalar() -> Self {
        Shape(Vec::new())
    }

    /// The dimensions as a slice.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.0.len()
    }

    /// Number of elements: the product of the dimensions (1 for a scalar, 0 if any dim is 0).
    ///
    /// Exact for every shape that passes [`Shape::check_size`] (every shape of a [`crate::Tensor`]
    /// does); for a larger one the product saturates at `usize::MAX` instead of wrapping, in
    /// debug and release builds alike.
    pub fn numel(&self) -> usize {
        self.checked_numel().unwrap_or(usize::MAX)
    }

    /// The exact number of elements, or `None` when the product overflows `usize`.
    pub fn checked_numel(&self) -> Option<usize> {
        if self.0.contains(&0) {
            return Some(0);
        }
        self.0.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d))
    }

    /// Row-major (C order) strides for this shape, in elements (a size-0 dimension counts as 1,
    /// so that an empty tensor still has the strides of its non-empty dimensions).
    ///
    /// Exact for every shape that passes [`Shape::check_size`]; for a larger one the strides
    /// saturate at `isize::MAX` instead of wrapping (never negative).
    pub fn contiguous_strides(&self) -> Vec<isize> {
        let mut strides = vec![0isize; self.0.len()];
        let mut acc = 1isize;
        for (s, &d) in strides.iter_mut().zip(&self.0).rev() {
            *s = acc;
            let d = isize::try_from(d.max(1)).unwrap_or(isize::MAX);
            acc = acc.saturating_mul(d);
        }
        strides
    }

    /// Resolves a possibly negative axis (`-1` is the last) against this rank.
    pub fn axis(&self, op: &'static str, axis: isize) -> Result<usize> {
        resolve_axis(op, axis, self.rank())
    }

    /// The shape both `self` and `other` broadcast to, following NumPy's rules: dimensions are
    /// aligned from the right and must be equal or 1.
    pub fn broadcast_with(&self, op: &'static str, other: &Shape) -> Result<Shape> {
        let rank = self.rank().max(other.rank());
        let mut out = vec![0; rank];
        for (i, o) in out.iter_mut().enumerate() {
            let a = dim_from_right(&self.0, rank - 1 - i);
            let b = dim_from_right(&other.0, rank - 1 - i);
            *o = match (a, b) {
                (a, b) if a == b => a,
                (1, b) => b,
                (a, 1) => a,
                _ => {
                    return Err(Error::BroadcastIncompatible {
                        op,
                        lhs: self.clone(),
                        rhs: other.clone(),
                    })
                }
            };
        }
        Ok(Shape(out))
    }
}

fn dim_from_right(dims: &[usize], from_right: usize) -> usize {
    if from_right < dims.len() {
        dims[dims.len() - 1 - from_right]
    } else {
        1
    }
}

/// Resolves a possibly negative axis against `rank`, or returns [`Error::AxisOutOfRange`].
pub fn resolve_axis(op: &'static str, axis: isize, rank: usize) -> Result<usize> {
    let resolved = if axis < 0 { axis + rank as isize } else { axis };
    if resolved < 0 || resolved >= rank as isize {
        return Err(Error::AxisOutOfRange { op, axis, rank });
    }
    Ok(resolved as usize)
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl fmt::Debug for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

impl From<Vec<usize>> for Shape {
    fn from(v: Vec<usize>) -> Self {
        Shape(v)
    }
}

impl From<&[usize]> for Shape {
    fn from(v: &[usize]) -> Self {
        Shape(v.to_vec())
    }
}

impl<const N: usize> From<[usize; N]> for Shape {
    fn from(v: [usize; N]) -> Self {
        Shape(v.to_vec())
    }
}

impl<const N: usize> From<&[usize; N]> for Shape {
    fn from(v: &[usize; N]) -> Self {
        Shape(v.to_vec())
    }
}

impl From<&Shape> for Shape {
    fn from(s: &Shape) -> Self {
        s.clone()
    }
}

impl From<()> for Shape {
    fn from(_: ()) -> Self {
        Shape::scalar()
    }
}

impl From<usize> for Shape {
    fn from(d: usize) -> Self {
        Shape(vec![d])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        let a = Shape::new([3, 1, 5]);
        let b = Shape::new([4, 5]);
        assert_eq!(a.broadcast_with("t", &b).unwrap(), Shape::new([3, 4, 5]));
        assert_eq!(
            Shape::scalar().broadcast_with("t", &b).unwrap(),
            Shape::new([4, 5])
        );
        let err = Shape::new([2, 3]).broadcast_with("add", &Shape::new([4]));
        assert_eq!(
            err.unwrap_err().to_string(),
            "add: shapes cannot be broadcast together: lhs [2, 3] vs rhs [4]"
        );
    }

    #[test]
    fn contiguous_strides_are_row_major() {
        assert_eq!(Shape::new([2, 3, 4]).contiguous_strides(), vec![12, 4, 1]);
        assert_eq!(Shape::scalar().contiguous_strides(), Vec::<isize>::new());
    }
}
