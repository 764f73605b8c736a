//! The matrix product with a bias under [`Checked`]: both sides run their own (fused or
//! default) implementation through tensor-core's dispatch, and the results are compared with
//! the product's accumulation tolerance, scaled by `|lhs|·|rhs| + |bias|`.

use crate::tolerance::Tolerance;
use crate::Checked;
use tessera_core::matmul_bias::check_matmul_bias;
use tessera_core::{dispatch, Backend, DType, Result, Tensor};

impl<B: Backend, R: Backend> Checked<B, R> {
    pub(crate) fn checked_matmul_bias(
        &self,
        lhs: &Tensor<Self>,
        rhs: &Tensor<Self>,
        bias: &Tensor<Self>,
    ) -> Result<Tensor<Self>> {
        check_matmul_bias(lhs, rhs, bias)?;
        let k = lhs.dims()[lhs.rank() - 1];
        let ((lb, lr), (rb, rr), (bb, br)) =
            (self.split(lhs)?, self.split(rhs)?, self.split(bias)?);
        let b = dispatch::matmul_bias(&lb, &rb, &bb)?;
        let r = dispatch::matmul_bias(&lr, &rr, &br)?;
        let abs = |t: &Tensor<R>| t.to_dtype(DType::F64)?.abs();
        let magnitude = abs(&lr)?.matmul(&abs(&rr)?)?.add(&abs(&br)?)?;
        let tolerance = Tolerance::accumulation(lhs.dtype(), k + 1);
        let inputs = [lhs, rhs, bias];
        self.settle_tensors("matmul_bias", &inputs, tolerance, b, r, Some(magnitude))
    }
}
