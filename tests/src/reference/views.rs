//! Reference views, computed by index arithmetic on the logical elements (never by strides).

use super::{numel, RefArray};

/// Output axis `i` is input axis `perm[i]`.
pub fn permute(x: &RefArray, perm: &[usize]) -> RefArray {
    assert_eq!(perm.len(), x.rank(), "permute: wrong permutation length");
    let shape: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
    RefArray::from_fn(shape, |out| {
        let mut src = vec![0; out.len()];
        for (i, &p) in perm.iter().enumerate() {
            src[p] = out[i];
        }
        x.at(&src)
    })
}

/// Swaps axes `a` and `b`.
pub fn transpose(x: &RefArray, a: usize, b: usize) -> RefArray {
    let mut perm: Vec<usize> = (0..x.rank()).collect();
    perm.swap(a, b);
    permute(x, &perm)
}

/// Elements `start, start + step, ...` below `end` along `axis`.
pub fn slice(x: &RefArray, axis: usize, start: usize, end: usize, step: usize) -> RefArray {
    assert!(
        start <= end && end <= x.shape[axis] && step >= 1,
        "slice out of range"
    );
    let mut shape = x.shape.clone();
    shape[axis] = (end - start).div_ceil(step);
    RefArray::from_fn(shape, |out| {
        let mut src = out.to_vec();
        src[axis] = start + out[axis] * step;
        x.at(&src)
    })
}

/// Elements `start..start + len` along `axis`.
pub fn narrow(x: &RefArray, axis: usize, start: usize, len: usize) -> RefArray {
    slice(x, axis, start, start + len, 1)
}

/// NumPy broadcast to `target` (dimensions aligned from the right, each equal or 1).
pub fn broadcast_to(x: &RefArray, target: &[usize]) -> RefArray {
    assert!(x.rank() <= target.len(), "broadcast_to: rank too large");
    let lead = target.len() - x.rank();
    for (i, &d) in x.shape.iter().enumerate() {
        assert!(
            d == target[lead + i] || d == 1,
            "broadcast_to: {:?} to {target:?}",
            x.shape
        );
    }
    RefArray::from_fn(target.to_vec(), |out| {
        let src: Vec<usize> = x
            .shape
            .iter()
            .enumerate()
            .map(|(i, &d)| if d == 1 { 0 } else { out[lead + i] })
            .collect();
        x.at(&src)
    })
}

/// The same elements in row-major order with a new shape of equal size.
pub fn reshape(x: &RefArray, shape: &[usize]) -> RefArray {
    assert_eq!(numel(shape), x.numel(), "reshape: element count differs");
    RefArray::new(shape.to_vec(), x.data.clone())
}

/// Removes `axis`, which has size 1.
pub fn squeeze(x: &RefArray, axis: usize) -> RefArray {
    assert_eq!(x.shape[axis], 1, "squeeze: axis is not of size 1");
    let mut shape = x.shape.clone();
    shape.remove(axis);
    reshape(x, &shape)
}

/// Inserts an axis of size 1 at `axis` (`0..=rank`).
pub fn unsqueeze(x: &RefArray, axis: usize) -> RefArray {
    let mut shape = x.shape.clone();
    shape.insert(axis, 1);
    reshape(x, &shape)
}

/// Merges axes `start..=end` into one.
pub fn flatten(x: &RefArray, start: usize, end: usize) -> RefArray {
    let mut shape = x.shape[..start].to_vec();
    shape.push(x.shape[start..=end].iter().product());
    shape.extend_from_slice(&x.shape[end + 1..]);
    reshape(x, &shape)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn views_pick_the_right_elements() {
        let a = RefArray::from_fn(vec![2, 3], |i| (i[0] * 3 + i[1]) as f64);
        assert_eq!(transpose(&a, 0, 1).data, vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        assert_eq!(slice(&a, 1, 0, 3, 2).data, vec![0.0, 2.0, 3.0, 5.0]);
        let b = RefArray::new(vec![2, 1], vec![7.0, 8.0]);
        assert_eq!(
            broadcast_to(&b, &[2, 2, 2]).data,
            vec![7.0, 7.0, 8.0, 8.0, 7.0, 7.0, 8.0, 8.0]
        );
    }
}
