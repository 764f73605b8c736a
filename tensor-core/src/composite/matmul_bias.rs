//! The matrix product with a bias as two tensor ops: the definition in
//! [`crate::matmul_bias`]. A fused override gives the same values to rounding.

use crate::matmul_bias::check_matmul_bias;
use crate::{Backend, Result, Tensor};

/// `lhs·rhs + bias`, the bias `[n]` broadcast over every row of every batch element.
pub fn matmul_bias<B: Backend>(
    lhs: &Tensor<B>,
    rhs: &Tensor<B>,
    bias: &Tensor<B>,
) -> Result<Tensor<B>> {
    check_matmul_bias(lhs, rhs, bias)?;
    lhs.matmul(rhs)?.add(bias)
}
