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
//! dtype mismatch as it would for any other pair. Composite ops use the tensor-level
//! [`tessera_core::composite::in_f32`], which the GPU backends share.

use crate::kernels::map::map1;
use crate::CpuStorage;
use tessera_core::composite::in_f32::common_half_dtype;
use tessera_core::{bf16, f16, BackendStorage, DType, Layout, Result};

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
