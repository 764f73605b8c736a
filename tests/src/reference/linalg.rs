//! Reference matrix product with NumPy `matmul` semantics.

use super::{elementwise::broadcast_shapes, elementwise::round_to, for_each_index, RefArray};
use tessera_core::DType;

/// `a @ b`: rank-1 operands are promoted to matrices (and the promoted axis removed again),
/// batch dimensions broadcast, every product summed in f64 by the triple loop.
pub fn matmul(dtype: DType, a: &RefArray, b: &RefArray) -> RefArray {
    assert!(a.rank() >= 1 && b.rank() >= 1, "matmul of a scalar");
    let a_shape = if a.rank() == 1 {
        vec![1, a.shape[0]]
    } else {
        a.shape.clone()
    };
    let b_shape = if b.rank() == 1 {
        vec![b.shape[0], 1]
    } else {
        b.shape.clone()
    };
    let (m, k) = (a_shape[a_shape.len() - 2], a_shape[a_shape.len() - 1]);
    let (k2, n) = (b_shape[b_shape.len() - 2], b_shape[b_shape.len() - 1]);
    assert_eq!(k, k2, "matmul: inner dimensions differ");
    let a_batch = &a_shape[..a_shape.len() - 2];
    let b_batch = &b_shape[..b_shape.len() - 2];
    let batch = broadcast_shapes(a_batch, b_batch).expect("matmul: batches do not broadcast");
    // The element of a batched operand at a broadcast batch index.
    let pick = |x: &RefArray, xb: &[usize], bi: &[usize], r: usize, c: usize| {
        let lead = batch.len() - xb.len();
        let mut idx: Vec<usize> = xb
            .iter()
            .enumerate()
            .map(|(i, &d)| if d == 1 { 0 } else { bi[lead + i] })
            .collect();
        idx.extend([r, c]);
        // Undo the rank-1 promotion when indexing the original array.
        let idx = if x.rank() == 1 {
            vec![idx[0] + idx[1]]
        } else {
            idx
        };
        x.at(&idx)
    };
    let mut out_shape = batch.clone();
    out_shape.extend([m, n]);
    let mut out = RefArray::full(out_shape, 0.0);
    for_each_index(&batch, |bi| {
        for r in 0..m {
            for c in 0..n {
                let mut acc = 0.0;
                for t in 0..k {
                    acc += pick(a, a_batch, bi, r, t) * pick(b, b_batch, bi, t, c);
                }
                let mut idx = bi.to_vec();
                idx.extend([r, c]);
                *out.at_mut(&idx) = round_to(dtype, acc);
            }
        }
    });
    let mut shape = batch;
    if a.rank() > 1 {
        shape.push(m);
    }
    if b.rank() > 1 {
        shape.push(n);
    }
    RefArray::new(shape, out.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let a = RefArray::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let b = RefArray::new(vec![3], vec![1.0, 0.0, -1.0]);
        let c = matmul(DType::F64, &a, &b);
        assert_eq!(c.shape, vec![2]);
        assert_eq!(c.data, vec![-2.0, -2.0]);
        let v = matmul(DType::F64, &b, &b);
        assert_eq!((v.shape.clone(), v.data.clone()), (vec![], vec![2.0]));
        let batched = RefArray::new(vec![2, 1, 3], vec![1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
        let bt = RefArray::new(vec![3, 2], vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]);
        let r = matmul(DType::F64, &batched, &bt);
        assert_eq!(r.shape, vec![2, 1, 2]);
        assert_eq!(r.data, vec![2.0, 2.0, 4.0, 4.0]);
    }
}
