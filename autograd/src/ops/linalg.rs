//! Matrix products.

use super::{grad_if, sum_to_dims};
use crate::Var;
use tessera_core::{Backend, Result, Tensor};

/// `x` as `matmul` sees it: a rank-1 operand becomes a row (`[1, k]`, on the left) or a column
/// (`[k, 1]`, on the right).
fn promote<B: Backend>(x: &Tensor<B>, on_left: bool) -> Result<Tensor<B>> {
    match (x.rank(), on_left) {
        (1, true) => x.unsqueeze(0),
        (1, false) => x.unsqueeze(1),
        _ => Ok(x.clone()),
    }
}

/// Whether `x` (rank >= 2) is the transpose of a contiguous tensor but not contiguous itself.
fn is_transposed_view<B: Backend>(x: &Tensor<B>) -> Result<bool> {
    Ok(x.rank() >= 2 && !x.is_contiguous() && x.t()?.is_contiguous())
}

impl<B: Backend> Var<B> {
    /// Matrix product with NumPy's `matmul` semantics (rank-1 promotion, broadcast batch
    /// dimensions). Gradients: `g · bᵀ` and `aᵀ · g`, summed over broadcast batch dimensions.
    pub fn matmul(&self, rhs: &Var<B>) -> Result<Var<B>> {
        let (a, b) = (self.value(), rhs.value());
        let value = a.matmul(&b)?;
        let need = [self.requires_grad(), rhs.requires_grad()];
        let (a_rank1, b_rank1) = (a.rank() == 1, b.rank() == 1);
        let (a2, b2) = (promote(&a, true)?, promote(&b, false)?);
        Ok(Var::from_op(
            value,
            vec![self.clone(), rhs.clone()],
            move |g| {
                // The upstream gradient with the promoted axes restored: [..batch, m, n].
                let mut g2 = g.clone();
                if a_rank1 {
                    g2 = g2.unsqueeze(if b_rank1 { 0 } else { -2 })?;
                }
                if b_rank1 {
                    g2 = g2.unsqueeze(-1)?;
                }
                // An operand that is a transposed view (a Linear's `Wᵀ`) gets its gradient
                // computed transposed, `(Bᵀ-side product)ᵀ`, so that the view's own backward
                // hands the parameter a contiguous gradient instead of a transposed copy.
                let ga = grad_if(need[0], || {
                    let full = if is_transposed_view(&a2)? {
                        b2.matmul(&g2.t()?)?.t()?
                    } else {
                        g2.matmul(&b2.t()?)?
                    };
                    sum_to_dims(&full, a2.dims())?.reshape(a.dims())
                })?;
                let gb = grad_if(need[1], || {
                    let full = if is_transposed_view(&b2)? {
                        g2.t()?.matmul(&a2)?.t()?
                    } else {
                        a2.t()?.matmul(&g2)?
                    };
                    sum_to_dims(&full, b2.dims())?.reshape(b.dims())
                })?;
                Ok(vec![ga, gb])
            },
        ))
    }
}
