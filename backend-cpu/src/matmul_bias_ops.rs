//! The CPU override of [`tessera_core::Backend::matmul_bias`]: f32 and f64 products go to the
//! batched GEMM with the bias written into each output tile just before its micro-kernel
//! accumulates onto it ([`crate::kernels::matmul::matmul_bias`]), so the bias costs no pass of
//! its own over the output; other dtypes return `None` and the backend falls back to the
//! composite default.

use tessera_core::matmul_bias::check_matmul_bias;
use tessera_core::{Result, Tensor};

use crate::fused_ops::{contiguous, tensor};
use crate::kernels::gemm::GemmElement;
use crate::kernels::matmul;
use crate::storage::CpuElement;
use crate::{Cpu, CpuStorage};

/// [`tessera_core::Backend::matmul_bias`] on the CPU.
pub(crate) fn matmul_bias(
    lhs: &Tensor<Cpu>,
    rhs: &Tensor<Cpu>,
    bias: &Tensor<Cpu>,
) -> Result<Option<Tensor<Cpu>>> {
    fn typed<T: CpuElement + GemmElement>(
        lhs: &Tensor<Cpu>,
        rhs: &Tensor<Cpu>,
        bias: &Tensor<Cpu>,
        out_dims: &[usize],
    ) -> Result<Option<Tensor<Cpu>>> {
        const OP: &str = "matmul_bias";
        let n = out_dims[out_dims.len() - 1];
        let bias = bias.contiguous()?;
        let (Some(a), Some(b), Some(bias)) = (
            T::slice(lhs.storage()),
            T::slice(rhs.storage()),
            contiguous::<T>(OP, &bias, &[n])?,
        ) else {
            return Ok(None);
        };
        let out = matmul::matmul_bias(a, lhs.layout(), b, rhs.layout(), bias)?;
        tensor(lhs.backend(), out, out_dims).map(Some)
    }
    let shape = check_matmul_bias(lhs, rhs, bias)?;
    match lhs.storage() {
        CpuStorage::F32(_) => typed::<f32>(lhs, rhs, bias, shape.dims()),
        CpuStorage::F64(_) => typed::<f64>(lhs, rhs, bias, shape.dims()),
        _ => Ok(None),
    }
}
