//! The ReLU gradient in one pass: 0 where `x <= 0`, else `grad` (NaN included, as PyTorch).

use rayon::prelude::*;
use tessera_core::{bf16, Result};

use super::lanes::Lane;
use super::num::Num;
use crate::alloc::try_with_capacity;
use crate::parallel::worth_parallel;

/// `out[i] = if x[i] <= 0 { 0 } else { grad[i] }` over two contiguous slices of one length (a
/// NaN `x[i]` passes the gradient, as PyTorch's `threshold_backward`).
///
/// The output is reserved once (fallibly) and then extended element by element (in parallel
/// when large), so it is written once rather than zeroed first and then overwritten.
pub(crate) fn relu_backward<T: Num>(x: &[T], grad: &[T]) -> Result<Vec<T>> {
    let pick = |(&v, &g): (&T, &T)| if v <= T::ZERO { T::ZERO } else { g };
    let mut out = try_with_capacity(x.len().min(grad.len()))?;
    if worth_parallel(x.len()) {
        out.par_extend(x.par_iter().zip(grad).map(pick));
    } else {
        out.extend(x.iter().zip(grad).map(pick));
    }
    Ok(out)
}

/// [`relu_backward`] on bf16 values compared and passed through f32 (see [`Lane`]): bit for
/// bit what tensor-core's widening gives, in one pass.
pub(crate) fn relu_backward_bf16(x: &[bf16], grad: &[bf16]) -> Result<Vec<bf16>> {
    let pick = |(&v, &g): (&bf16, &bf16)| {
        let keep = <bf16 as Lane<f32>>::load(v) > 0.0 || v.is_nan();
        <bf16 as Lane<f32>>::store(if keep { g.load() } else { 0.0 })
    };
    let mut out = try_with_capacity(x.len().min(grad.len()))?;
    if worth_parallel(x.len()) {
        out.par_extend(x.par_iter().zip(grad).map(pick));
    } else {
        out.extend(x.iter().zip(grad).map(pick));
    }
    Ok(out)
}
