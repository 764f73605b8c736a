//! The ReLU gradient in one pass: 0 where `x <= 0`, else `grad` (NaN included, as PyTorch).

use rayon::prelude::*;

use super::num::Num;
use crate::parallel::worth_parallel;

/// `out[i] = if x[i] <= 0 { 0 } else { grad[i] }` over two contiguous slices of one length (a
/// NaN `x[i]` passes the gradient, as PyTorch's `threshold_backward`).
///
/// The output is collected element by element (in parallel when large), so it is written once
/// rather than zeroed first and then overwritten.
pub(crate) fn relu_backward<T: Num>(x: &[T], grad: &[T]) -> Vec<T> {
    let pick = |(&v, &g): (&T, &T)| if v <= T::ZERO { T::ZERO } else { g };
    if worth_parallel(x.len()) {
        x.par_iter().zip(grad).map(pick).collect()
    } else {
        x.iter().zip(grad).map(pick).collect()
    }
}
