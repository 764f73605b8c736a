//! A matrix product with a bias added to every row: what a backend receives for
//! [`crate::Backend::matmul_bias`] and the check it runs. The definition, the default every
//! backend may override, is [`crate::composite::matmul_bias`].
//!
//! # Definition
//! For `lhs: [..batch, m, k]`, `rhs: [..batch, k, n]` (the same batch dimensions) and
//! `bias: [n]`, all of one float dtype:
//!
//! ```text
//! out[.., i, j] = Σ_p lhs[.., i, p] · rhs[.., p, j] + bias[j]
//! ```
//!
//! (PyTorch's `torch.addmm(bias, lhs, rhs)` for one matrix, `F.linear(x, w, b)` with
//! `rhs = wᵀ`.) A fused kernel adds the bias while the product's output tile is still in
//! registers or cache, where the composite writes the product and then reads it back for a
//! broadcast addition over the whole output.

use crate::operand::MatmulOperands;
use crate::{Backend, Error, Result, Shape, Tensor};

/// Checks the operands of [`crate::Backend::matmul_bias`] and returns the output's shape
/// `[..batch, m, n]`: float operands of one dtype on one device, `lhs` and `rhs` of rank 2 or
/// more with equal batch dimensions and inner sizes, and `bias` a vector of `n` elements.
pub fn check_matmul_bias<B: Backend>(
    lhs: &Tensor<B>,
    rhs: &Tensor<B>,
    bias: &Tensor<B>,
) -> Result<Shape> {
    const OP: &str = "matmul_bias";
    lhs.check_float(OP)?;
    lhs.check_same_device(OP, rhs)?;
    lhs.check_same_device(OP, bias)?;
    lhs.check_same_dtype(OP, rhs)?;
    lhs.check_same_dtype(OP, bias)?;
    // Ranks, batch dimensions, inner sizes and dtypes as for a product.
    let xs = MatmulOperands::new(lhs.operand(OP)?, rhs.operand(OP)?)?;
    let out = xs.output_dims();
    let n = out[out.len() - 1];
    if bias.dims() != [n] {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!(
                "the bias must be a vector of the product's {n} columns, got shape {}",
                bias.shape()
            ),
        });
    }
    Ok(Shape::new(out))
}
