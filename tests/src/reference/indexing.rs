//! Reference indexing: index_select, gather, scatter_add, concatenation and stacking.

use super::{elementwise::round_to, views::unsqueeze, RefArray};
use tessera_core::DType;

/// Output `[.., i, ..]` is input `[.., indices[i], ..]` along `axis`.
pub fn index_select(x: &RefArray, axis: usize, indices: &[i64]) -> RefArray {
    let mut shape = x.shape.clone();
    shape[axis] = indices.len();
    RefArray::from_fn(shape, |out| {
        let mut src = out.to_vec();
        src[axis] = indices[out[axis]] as usize;
        x.at(&src)
    })
}

/// `out[idx] = x[idx with idx[axis] replaced by indices[idx]]`; the shape of `indices`.
pub fn gather(x: &RefArray, axis: usize, indices: &RefArray) -> RefArray {
    RefArray::from_fn(indices.shape.clone(), |out| {
        let mut src = out.to_vec();
        src[axis] = indices.at(out) as usize;
        x.at(&src)
    })
}

/// A copy of `base` with `src[idx]` added at `idx with idx[axis] replaced by indices[idx]`:
/// floats accumulated in f64 and rounded to `dtype` once, i64 with wrapping i64 additions.
pub fn scatter_add(
    dtype: DType,
    base: &RefArray,
    axis: usize,
    indices: &RefArray,
    src: &RefArray,
) -> RefArray {
    // i64 sums are kept in i64: an f64 accumulator would round partial sums past 2^53.
    let mut ints: Vec<i64> = base.data.iter().map(|&v| v as i64).collect();
    let mut out = base.clone();
    for (flat, idx) in super::all_indices(&indices.shape).iter().enumerate() {
        let mut dst = idx.clone();
        dst[axis] = indices.data[flat] as usize;
        let at = out.flat_index(&dst);
        ints[at] = ints[at].wrapping_add(src.data[flat] as i64);
        out.data[at] += src.data[flat];
    }
    if dtype == DType::I64 {
        return RefArray::new(out.shape, ints.into_iter().map(|v| v as f64).collect());
    }
    out.map(|v| round_to(dtype, v))
}

/// Joins arrays along `axis` (equal shapes elsewhere).
pub fn concat(parts: &[&RefArray], axis: usize) -> RefArray {
    let mut shape = parts[0].shape.clone();
    shape[axis] = parts.iter().map(|p| p.shape[axis]).sum();
    RefArray::from_fn(shape, |out| {
        let mut local = out[axis];
        for p in parts {
            if local < p.shape[axis] {
                let mut src = out.to_vec();
                src[axis] = local;
                return p.at(&src);
            }
            local -= p.shape[axis];
        }
        unreachable!("concat index past the last part")
    })
}

/// Stacks same-shaped arrays along a new axis.
pub fn stack(parts: &[&RefArray], axis: usize) -> RefArray {
    let expanded: Vec<RefArray> = parts.iter().map(|p| unsqueeze(p, axis)).collect();
    concat(&expanded.iter().collect::<Vec<_>>(), axis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let x = RefArray::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        assert_eq!(index_select(&x, 1, &[2, 0]).data, vec![3.0, 1.0, 6.0, 4.0]);
        let idx = RefArray::new(vec![2, 1], vec![2.0, 1.0]);
        assert_eq!(gather(&x, 1, &idx).data, vec![3.0, 5.0]);
        let src = RefArray::new(vec![2, 1], vec![10.0, 20.0]);
        let s = scatter_add(DType::F64, &x, 1, &idx, &src);
        assert_eq!(s.data, vec![1.0, 2.0, 13.0, 4.0, 25.0, 6.0]);
        let c = concat(&[&x, &x], 0);
        assert_eq!(c.shape, vec![4, 3]);
        assert_eq!(stack(&[&x, &x], 2).shape, vec![2, 3, 2]);
    }
}
