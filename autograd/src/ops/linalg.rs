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

/// The gradients of a product's operands `a2: [..batch, m, k]` and `b2: [..batch, k, n]`
/// (batch dimensions possibly broadcast) from the upstream gradient `g2: [..batch, m, n]`:
/// `g2 · b2ᵀ` and `a2ᵀ · g2`, summed over broadcast batch dimensions, each only where `need`
/// asks for it.
fn product_grads<B: Backend>(
    g2: &Tensor<B>,
    a2: &Tensor<B>,
    b2: &Tensor<B>,
    need: [bool; 2],
) -> Result<[Option<Tensor<B>>; 2]> {
    // An operand that is a transposed view (a Linear's `Wᵀ`) gets its gradient computed
    // transposed, `(Bᵀ-side product)ᵀ`, so that the view's own backward hands the parameter a
    // contiguous gradient instead of a transposed copy.
    let ga = grad_if(need[0], || {
        let full = if is_transposed_view(a2)? {
            b2.matmul(&g2.t()?)?.t()?
        } else {
            g2.matmul(&b2.t()?)?
        };
        sum_to_dims(&full, a2.dims())
    })?;
    let gb = grad_if(need[1], || {
        let full = if is_transposed_view(b2)? {
            g2.t()?.matmul(a2)?.t()?
        } else {
            a2.t()?.matmul(g2)?
        };
        sum_to_dims(&full, b2.dims())
    })?;
    Ok([ga, gb])
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
                let [ga, gb] = product_grads(&g2, &a2, &b2, need)?;
                let ga = ga.map(|ga| ga.reshape(a.dims())).transpose()?;
                let gb = gb.map(|gb| gb.reshape(b.dims())).transpose()?;
                Ok(vec![ga, gb])
            },
        ))
    }

    /// `self·rhs + bias` (operands of rank 2 or more, batch dimensions broadcast; `bias` of
    /// `rhs`'s column count, added to every row): a linear layer in one op
    /// ([`Tensor::matmul_bias`]). Gradients: those of [`Var::matmul`], and the upstream gradient
    /// summed over every row for the bias.
    pub fn matmul_bias(&self, rhs: &Var<B>, bias: &Var<B>) -> Result<Var<B>> {
        let (a, b) = (self.value(), rhs.value());
        let value = a.matmul_bias(&b, &bias.value())?;
        let need = [self.requires_grad(), rhs.requires_grad()];
        let need_bias = bias.requires_grad();
        let bias_dims = bias.dims().to_vec();
        Ok(Var::from_op(
            value,
            vec![self.clone(), rhs.clone(), bias.clone()],
            move |g| {
                let [ga, gb] = product_grads(g, &a, &b, need)?;
                let gbias = grad_if(need_bias, || sum_to_dims(g, &bias_dims))?;
                Ok(vec![ga, gb, gbias])
            },
        ))
    }
}
