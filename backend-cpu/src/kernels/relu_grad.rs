//! The ReLU gradient in one pass: 0 where `x <= 0`, else `grad` (NaN included, as PyTorch).

use rayon::prelude::*;
use tessera_core::Result;

use super::lanes::Lane;
use super::num::Num;
use crate::alloc::try_with_capacity;
use crate::parallel::worth_parallel;

/// `out[i] = if x[i] <= 0 { 0 } else { grad[i] }` over two contiguous slices of one length (a
/// NaN `x[i]` passes the gradient, as PyTorch's `threshold_backward`), compared and passed in
/// `C` on values stored as `S` ([`Lane`]: the identity for f32/f64; bf16 through f32, bit for
/// bit what tensor-core's widening gives).
///
/// The output is reserved once (fallibly) and then extended element by element (in parallel
/// when large), so it is written once rather than zeroed first and then overwritten.
pub(crate) fn relu_backward<C: Num, S: Lane<C>>(x: &[S], grad: &[S]) -> Result<Vec<S>> {
    let pick = |(&v, &g): (&S, &S)| {
        S::store(if v.load() <= C::ZERO {
            C::ZERO
        } else {
            g.load()
        })
    };
    let mut out = try_with_capacity(x.len().min(grad.len()))?;
    if worth_parallel(x.len()) {
        out.par_extend(x.par_iter().zip(grad).map(pick));
    } else {
        out.extend(x.iter().zip(grad).map(pick));
    }
    Ok(out)
}
