//! The ReLU gradient in one pass: 0 where `x <= 0`, else `grad` (NaN included, as PyTorch).

use rayon::prelude::*;
use tessera_core::{bf16, Result};

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
    zip_map(x, grad, pick)
}

/// [`relu_backward`] for bf16 on the stored bits, with the same result bit for bit: `x <= 0`
/// is a set sign bit or zero, NaN excluded, and a passed gradient is itself, a NaN made quiet
/// (as the rounding from f32 makes it). No conversion to f32 and back per element.
pub(crate) fn relu_backward_bf16(x: &[bf16], grad: &[bf16]) -> Result<Vec<bf16>> {
    let pick = |(&v, &g): (&bf16, &bf16)| {
        let (xb, gb) = (v.to_bits(), g.to_bits());
        let is_nan = |b: u16| b & 0x7fff > 0x7f80;
        let not_positive = (xb as i16 <= 0) & !is_nan(xb);
        let passed = if is_nan(gb) { gb | 0x0040 } else { gb };
        bf16::from_bits(if not_positive { 0 } else { passed })
    };
    zip_map(x, grad, pick)
}

/// `pick(x[i], grad[i])` over the common length, into an output reserved once (fallibly) and
/// extended element by element, in parallel when large.
fn zip_map<S: Sync, U: Send>(
    x: &[S],
    grad: &[S],
    pick: impl Fn((&S, &S)) -> U + Sync + Send,
) -> Result<Vec<U>> {
    let mut out = try_with_capacity(x.len().min(grad.len()))?;
    if worth_parallel(x.len()) {
        out.par_extend(x.par_iter().zip(grad).map(pick));
    } else {
        out.extend(x.iter().zip(grad).map(pick));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miri_the_bf16_relu_gradient_on_bits_equals_the_one_through_f32() {
        // Every x bit pattern (strided under Miri) against gradients of every kind.
        let step = if cfg!(miri) { 251 } else { 1 };
        let x: Vec<bf16> = (0..=u16::MAX).step_by(step).map(bf16::from_bits).collect();
        for g_bits in [
            0x3f80u16, 0x8000, 0x0000, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xff81, 0x0001,
        ] {
            let grad = vec![bf16::from_bits(g_bits); x.len()];
            let want = relu_backward::<f32, bf16>(&x, &grad).unwrap();
            let got = relu_backward_bf16(&x, &grad).unwrap();
            let bits = |v: &[bf16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "gradient {g_bits:#06x}");
        }
    }
}
