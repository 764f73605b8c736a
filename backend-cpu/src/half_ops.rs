//! The 16-bit floats on the CPU: stored in 16 bits, computed in f32.
//!
//! Every op is implemented once, for all kernels, by *upcasting at the edges*: an op with
//! `F16`/`BF16` inputs reads them (strided) into contiguous f32, runs the f32 kernel (f32
//! accumulators for reductions, f32 GEMM accumulation, f32 transcendental functions), and
//! rounds each float result once, to nearest even, back to the input dtype. Results of other
//! dtypes (comparisons' bools, arg-reductions' indices) are returned as they are.
//!
//! One exception: a 2-D bf16 matmul on a CPU with AVX-512 BF16 runs on the `vdpbf16ps` kernel
//! of `kernels::gemm_bf16` (packed bf16 operands, f32 accumulation, the same single rounding
//! at the end), measured 1.05-1.5x faster than widening (docs/BENCHMARKS.md).
//!
//! The widening is exact (every 16-bit value is an f32), so the only error beyond the f32
//! kernel's is the final rounding: half an ulp of the 16-bit format. Inputs that mix a 16-bit
//! dtype with another float dtype are passed through unchanged, so the kernel reports the
//! dtype mismatch as it would for any other pair.

use crate::kernels::map::map1;
use crate::{Cpu, CpuStorage};
use tessera_core::attention::{AttentionGrads, AttentionOutput};
use tessera_core::backend::AdamTensors;
use tessera_core::{bf16, f16, BackendStorage, DType, Layout, Result, Tensor};

/// The 16-bit dtype shared by the float inputs, when at least one input is 16-bit and every
/// float input has that dtype; `None` otherwise (nothing to widen, or a mismatch to report).
fn common_half_dtype(dtypes: impl IntoIterator<Item = DType>) -> Option<DType> {
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

/// `x` read into contiguous f32 (exact), or `None` when it is not 16-bit.
fn widen_storage(x: &CpuStorage, layout: &Layout) -> Result<Option<(CpuStorage, Layout)>> {
    let widened = match x {
        CpuStorage::F16(v) => map1(v, layout, f16::to_f32)?,
        CpuStorage::BF16(v) => map1(v, layout, bf16::to_f32)?,
        _ => return Ok(None),
    };
    Ok(Some((
        CpuStorage::F32(widened),
        Layout::contiguous(layout.dims().to_vec()),
    )))
}

/// An f32 result rounded once to nearest even to the 16-bit `dtype`; other results unchanged.
fn narrow_storage(out: CpuStorage, dtype: DType) -> Result<CpuStorage> {
    let CpuStorage::F32(v) = &out else {
        return Ok(out);
    };
    let layout = Layout::contiguous(vec![v.len()]);
    Ok(match dtype {
        DType::F16 => CpuStorage::F16(map1(v, &layout, f16::from_f32)?),
        DType::BF16 => CpuStorage::BF16(map1(v, &layout, bf16::from_f32)?),
        _ => out,
    })
}

/// Runs the storage-level primitive `op` on `inputs`, in f32 when they are 16-bit (see the
/// module docs); a plain call otherwise.
pub(crate) fn primitive_in_f32<const N: usize>(
    inputs: [(&CpuStorage, &Layout); N],
    op: impl FnOnce([(&CpuStorage, &Layout); N]) -> Result<CpuStorage>,
) -> Result<CpuStorage> {
    let Some(half) = common_half_dtype(inputs.iter().map(|(s, _)| s.dtype())) else {
        return op(inputs);
    };
    let widened = inputs
        .iter()
        .map(|(s, l)| widen_storage(s, l))
        .collect::<Result<Vec<_>>>()?;
    let args = std::array::from_fn(|i| match &widened[i] {
        Some((s, l)) => (s, l),
        None => inputs[i],
    });
    narrow_storage(op(args)?, half)
}

/// A tensor-level result that can be rounded back to a 16-bit dtype.
pub(crate) trait Narrow: Sized {
    /// Every f32 tensor of `self` rounded to `dtype`; other tensors unchanged.
    fn narrow(self, dtype: DType) -> Result<Self>;
}

impl Narrow for Tensor<Cpu> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        if self.dtype() == DType::F32 {
            self.to_dtype(dtype)
        } else {
            Ok(self)
        }
    }
}

impl<A: Narrow, B: Narrow> Narrow for (A, B) {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok((self.0.narrow(dtype)?, self.1.narrow(dtype)?))
    }
}

impl<T: Narrow> Narrow for Option<T> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        self.map(|t| t.narrow(dtype)).transpose()
    }
}

impl Narrow for AttentionOutput<Cpu> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok(AttentionOutput {
            out: self.out.narrow(dtype)?,
            logsumexp: self.logsumexp.narrow(dtype)?,
        })
    }
}

impl Narrow for AttentionGrads<Cpu> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok(AttentionGrads {
            q: self.q.narrow(dtype)?,
            k: self.k.narrow(dtype)?,
            v: self.v.narrow(dtype)?,
        })
    }
}

impl Narrow for AdamTensors<Cpu> {
    fn narrow(self, dtype: DType) -> Result<Self> {
        Ok(AdamTensors {
            param: self.param.narrow(dtype)?,
            exp_avg: self.exp_avg.narrow(dtype)?,
            exp_avg_sq: self.exp_avg_sq.narrow(dtype)?,
            max_exp_avg_sq: self.max_exp_avg_sq.narrow(dtype)?,
        })
    }
}

/// `t` as f32 when it is 16-bit, `t` itself otherwise.
pub(crate) fn widen(t: &Tensor<Cpu>) -> Result<Tensor<Cpu>> {
    if t.dtype().is_half() {
        t.to_dtype(DType::F32)
    } else {
        Ok(t.clone())
    }
}

/// Runs the tensor-level composite `op` in f32 when its inputs are 16-bit: `Some(result)`,
/// with the float outputs rounded back; `None` when there is nothing to widen, so that the
/// caller runs its usual path. `op` receives the widened tensors in the order given.
pub(crate) fn composite_in_f32<const N: usize, T: Narrow>(
    inputs: [Option<&Tensor<Cpu>>; N],
    op: impl FnOnce([Option<&Tensor<Cpu>>; N]) -> Result<T>,
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
