//! [`RefArray`]: the naive n-dimensional array every reference op works on.

/// A dense row-major n-d array of `f64`, the reference's only data type.
///
/// Values of every dtype are stored as `f64` (integers below 2^53 exactly, booleans as 0/1); the
/// reference ops take the dtype they emulate as an argument where the semantics differ.
#[derive(Clone, Debug, PartialEq)]
pub struct RefArray {
    /// The dimensions (empty for a scalar).
    pub shape: Vec<usize>,
    /// The elements in row-major order; `data.len()` is the product of `shape`.
    pub data: Vec<f64>,
}

/// The number of elements of `shape` (1 for a scalar, 0 when any dimension is 0).
pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Calls `f` with every multi-index of `shape` in row-major order (once with `[]` for a scalar,
/// never when a dimension is 0).
pub fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
    if numel(shape) == 0 {
        return;
    }
    let mut index = vec![0usize; shape.len()];
    loop {
        f(&index);
        // Odometer increment, last axis fastest.
        let mut axis = shape.len();
        loop {
            if axis == 0 {
                return;
            }
            axis -= 1;
            index[axis] += 1;
            if index[axis] < shape[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
}

/// Every multi-index of `shape` in row-major order.
pub fn all_indices(shape: &[usize]) -> Vec<Vec<usize>> {
    let mut out = Vec::with_capacity(numel(shape));
    for_each_index(shape, |i| out.push(i.to_vec()));
    out
}

/// The row-major multi-index of flat position `flat` in `shape`.
pub fn unravel(mut flat: usize, shape: &[usize]) -> Vec<usize> {
    let mut index = vec![0; shape.len()];
    for axis in (0..shape.len()).rev() {
        index[axis] = flat % shape[axis];
        flat /= shape[axis];
    }
    index
}

impl RefArray {
    /// An array of `shape` holding `data` (row-major). Panics when the lengths disagree: the
    /// reference is only ever built by test code.
    pub fn new(shape: Vec<usize>, data: Vec<f64>) -> Self {
        assert_eq!(
            numel(&shape),
            data.len(),
            "RefArray::new: shape {shape:?} needs {} values, got {}",
            numel(&shape),
            data.len()
        );
        RefArray { shape, data }
    }

    /// An array whose element at each index is `f(index)`.
    pub fn from_fn(shape: Vec<usize>, mut f: impl FnMut(&[usize]) -> f64) -> Self {
        let mut data = Vec::with_capacity(numel(&shape));
        for_each_index(&shape, |i| data.push(f(i)));
        RefArray { shape, data }
    }

    /// An array of `shape` with every element equal to `value`.
    pub fn full(shape: Vec<usize>, value: f64) -> Self {
        let n = numel(&shape);
        RefArray {
            shape,
            data: vec![value; n],
        }
    }

    /// A rank-0 array.
    pub fn scalar(value: f64) -> Self {
        RefArray {
            shape: vec![],
            data: vec![value],
        }
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.data.len()
    }

    /// The row-major flat position of `index`.
    pub fn flat_index(&self, index: &[usize]) -> usize {
        assert_eq!(
            index.len(),
            self.rank(),
            "index rank differs from array rank"
        );
        let mut flat = 0;
        for (axis, (&i, &d)) in index.iter().zip(&self.shape).enumerate() {
            assert!(
                i < d,
                "index {index:?} out of bounds on axis {axis} of {:?}",
                self.shape
            );
            flat = flat * d + i;
        }
        flat
    }

    /// The element at `index`.
    pub fn at(&self, index: &[usize]) -> f64 {
        self.data[self.flat_index(index)]
    }

    /// A mutable reference to the element at `index`.
    pub fn at_mut(&mut self, index: &[usize]) -> &mut f64 {
        let flat = self.flat_index(index);
        &mut self.data[flat]
    }

    /// Applies `f` to every element.
    pub fn map(&self, f: impl Fn(f64) -> f64) -> RefArray {
        RefArray {
            shape: self.shape.clone(),
            data: self.data.iter().map(|&x| f(x)).collect(),
        }
    }

    /// The absolute values (used to build error magnitudes for accumulating ops).
    pub fn abs(&self) -> RefArray {
        self.map(f64::abs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indices_are_row_major_and_handle_scalars_and_empties() {
        assert_eq!(
            all_indices(&[2, 2]),
            vec![vec![0, 0], vec![0, 1], vec![1, 0], vec![1, 1]]
        );
        assert_eq!(all_indices(&[]), vec![Vec::<usize>::new()]);
        assert!(all_indices(&[3, 0, 2]).is_empty());
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        let a = RefArray::from_fn(vec![2, 3], |i| (i[0] * 10 + i[1]) as f64);
        assert_eq!(a.data, vec![0.0, 1.0, 2.0, 10.0, 11.0, 12.0]);
        assert_eq!(a.at(&[1, 2]), 12.0);
    }
}
