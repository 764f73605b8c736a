//! Running a tensor-level op in f32 when its inputs are 16-bit: the helper backends use to give
//! the 16-bit floats (`F16`, `BF16`) f32 arithmetic in ops they implement as composites.
//!
//! [`in_f32`] widens the op's 16-bit inputs to f32 (exact: every 16-bit value is an f32), runs
//! the op, and rounds each f32 result once, to nearest even, back to the inputs' dtype; results
//! of other dtypes (indices, masks) pass through. So the only error beyond the f32 op's is half
//! an ulp of the 16-bit format, whatever the number of intermediate steps the op takes. Inputs
//! that mix a 16-bit dtype with another float dtype are left alone, so the op reports the dtype
//! mismatch as it would for any other pair.

use crate::attention::{AttentionGrads, AttentionInputs, AttentionOutput};
use crate::backend::AdamTensors;
use crate::layer_norm::{LayerNormGrads, LayerNormOutput};
use crate::{Backend, DType, Result, Tensor};

/// The 16-bit dtype shared by the float inputs, when at least one input is 16-bit and every
/// float input has that dtype; `None` otherwise (nothing to widen, or a mismatch to report).
pub fn common_half_dtype(dtypes: impl IntoIterator<Item = DType>) -> Option<DType> {
    let mut half = None;
    let mut other_float = false;
    for d in dtypes {
        if d.is_half() {
            if half.is_some_and(|h| h != d) {
                return None;
            }
            half = Some(d);
        } else if d.is_float() {
            other_float = true;
        }
    }
    half.filter(|_| !other_float)
}

/// `t` as f32 when it is 16-bit, `t` itself otherwise.
pub fn widen<B: Backend>(t: &Tensor<B>) -> Result<Tensor<B>> {
    if t.dtype().is_half() {
        t.to_dtype(DType::F32)
    } else {
        Ok(t.clone())
    }
}

/// Runs `op` in f32 when its float inputs share one 16-bit dtype: `Some(result)` with the f32
/// outputs rounded back to that dtype; `None` when there is nothing to widen, so that the
/// caller runs its usual path. `op` receives the inputs in the order given, widened.
///
/// ```
/// # use tessera_core::{composite::in_f32, Backend, DType, Result, Tensor};
/// // A backend's `softmax` override giving 16-bit inputs f32 arithmetic.
/// fn softmax<B: Backend>(x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
///     if let Some(out) = in_f32([Some(x)], |[x]| softmax(x.unwrap(), axis)) {
///         return out;
///     }
///     tessera_core::composite::softmax(x, axis)
/// }
/// ```
pub fn in_f32<B: Backend, const N: usize, T: Narrow>(
    inputs: [Option<&Tensor<B>>; N],
    op: impl FnOnce([Option<&Tensor<B>>; N]) -> Result<T>,
) -> Option<Result<T>> {
    let half = common_half_dtype(inputs.iter().flatten().map(|t| t.dtype()))?;
    let run = || {
        let widened = inputs
            .iter()
            .map(|t| t.map(widen).transpose())
            .collect::<Result<Vec<_>>>()?;
        op(std::array::from_fn(|i| widened[i].as_ref()))?.narrow(half)
    };
    Some(run())
}

/// [`in_f32`] for the attention backward pass: the upstream gradient, `q`, `k`, `v` and the
/// mask are widened, and the forward pass is run again in f32 (`forward_op`) for the output and
/// log-sum-exp the backward pass reads. The saved 16-bit output is not used: it was rounded to
/// 16 bits, and the backward pass's `D = rowsum(dO ∘ O)` enters `dS = P ∘ (dP - D)`, where the
/// subtraction cancels, so half an ulp of 16-bit error in `O` became more than an ulp in the
/// gradients of `q` and `k`. Recomputed in f32, every intermediate is f32 and each gradient is
/// rounded once (within an ulp of the exact value, as PyTorch's CPU attention, which upcasts).
/// The cost is one f32 forward pass per 16-bit backward pass. `forward_op` and `op` receive the
/// operands in the order of [`crate::Backend::scaled_dot_product_attention`] and
/// [`crate::Backend::scaled_dot_product_attention_backward`]; `forward` (the saved 16-bit
/// result) only decides, with the inputs, whether there is anything to widen.
pub fn attention_backward_in_f32<B: Backend>(
    grad_out: &Tensor<B>,
    inputs: AttentionInputs<'_, B>,
    forward: &AttentionOutput<B>,
    forward_op: impl FnOnce(AttentionInputs<'_, B>) -> Result<AttentionOutput<B>>,
    op: impl FnOnce(
        &Tensor<B>,
        AttentionInputs<'_, B>,
        &AttentionOutput<B>,
    ) -> Result<AttentionGrads<B>>,
) -> Option<Result<AttentionGrads<B>>> {
    let tensors = [
        Some(grad_out),
        Some(inputs.q),
        Some(inputs.k),
        Some(inputs.v),
        inputs.mask,
        Some(&forward.out),
    ];
    in_f32(tensors, |[g, q, k, v, mask, _]| {
        let widened = AttentionInputs {
            q: q.expect("given"),
            k: k.expect("given"),
            v: v.expect("given"),
            mask,
        };
        let recomputed = forward_op(widened)?;
        op(g.expect("given"), widened, &recomputed)
    })
}

/// A tensor-level result that can be rounded back to a 16-bit dtype.
pub trait Narrow: Sized {
    /// Every f32 tensor of `self` rounded to `dtype`; other tensors unchanged.
    fn narrow(self, dtype: DType) -> Result<Self>;
}

impl<B: Backend> Narrow for Tensor<B> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        if self.dtype() == DType::F32 {
            self.to_dtype(dtype)
        } else {
            Ok(self)
        }
    }
}

impl<A: Narrow, C: Narrow> Narrow for (A, C) {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok((self.0.narrow(dtype)?, self.1.narrow(dtype)?))
    }
}

impl<T: Narrow> Narrow for Option<T> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        self.map(|t| t.narrow(dtype)).transpose()
    }
}

impl<B: Backend> Narrow for LayerNormOutput<B> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        // The statistics stay in the compute dtype, as the attention's log-sum-exp.
        Ok(LayerNormOutput {
            y: self.y.narrow(dtype)?,
            ..self
        })
    }
}

impl<B: Backend> Narrow for LayerNormGrads<B> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok(LayerNormGrads {
            x: self.x.narrow(dtype)?,
            weight: self.weight.narrow(dtype)?,
            bias: self.bias.narrow(dtype)?,
        })
    }
}

impl<B: Backend> Narrow for AttentionOutput<B> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        // The log-sum-exp stays in the compute dtype (see `AttentionOutput::logsumexp`).
        Ok(AttentionOutput {
            out: self.out.narrow(dtype)?,
            logsumexp: self.logsumexp,
        })
    }
}

impl<B: Backend> Narrow for AttentionGrads<B> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok(AttentionGrads {
            q: self.q.narrow(dtype)?,
            k: self.k.narrow(dtype)?,
            v: self.v.narrow(dtype)?,
        })
    }
}

impl<B: Backend> Narrow for AdamTensors<B> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok(AdamTensors {
            param: self.param.narrow(dtype)?,
            exp_avg: self.exp_avg.narrow(dtype)?,
            exp_avg_sq: self.exp_avg_sq.narrow(dtype)?,
            max_exp_avg_sq: self.max_exp_avg_sq.narrow(dtype)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_single_shared_16_bit_dtype_is_widened() {
        use DType::*;
        assert_eq!(common_half_dtype([F16, F16]), Some(F16));
        assert_eq!(common_half_dtype([Bool, BF16, BF16]), Some(BF16));
        assert_eq!(common_half_dtype([BF16, I64]), Some(BF16));
        assert_eq!(common_half_dtype([F16, BF16]), None);
        assert_eq!(common_half_dtype([F16, F32]), None);
        assert_eq!(common_half_dtype([F32, F32]), None);
    }
}
