//! The ReLU gradient in one pass: `grad` where `x > 0`, else 0.

use crate::parallel::fill_chunks;

use super::num::Num;

/// `out[i] = if x[i] > 0 { grad[i] } else { 0 }` over two contiguous slices of one length.
pub(crate) fn relu_backward<T: Num>(x: &[T], grad: &[T]) -> Vec<T> {
    let mut out = vec![T::ZERO; x.len()];
    fill_chunks(&mut out, |start, dst| {
        let xs = &x[start..start + dst.len()];
        let gs = &grad[start..start + dst.len()];
        for ((d, &v), &g) in dst.iter_mut().zip(xs).zip(gs) {
            *d = if v > T::ZERO { g } else { T::ZERO };
        }
    });
    out
}
