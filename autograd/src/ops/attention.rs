//! Scaled dot-product attention. Its backward rule keeps the three inputs (views, no copies),
//! the output and the per-row log-sum-exp, and hands them to the backend's attention gradient:
//! no `[L, S]` matrix is kept between the passes.

use crate::Var;
use tessera_core::{AttentionOptions, Backend, Result};

impl<B: Backend> Var<B> {
    /// Scaled dot-product attention of the queries `self: [..b, L, E]` over `k: [..b, S, E]`
    /// and `v: [..b, S, Ev]` (see [`tessera_core::Tensor::scaled_dot_product_attention`]);
    /// gradients flow to `self`, `k` and `v`, not to the mask. With dropout, the backward pass
    /// redraws the same mask from the options' stream.
    pub fn scaled_dot_product_attention(
        &self,
        k: &Var<B>,
        v: &Var<B>,
        options: &AttentionOptions<'_, B>,
    ) -> Result<Var<B>> {
        let (q_t, k_t, v_t) = (self.value(), k.value(), v.value());
        let forward = q_t.scaled_dot_product_attention_with_lse(&k_t, &v_t, options)?;
        let need = [self.requires_grad(), k.requires_grad(), v.requires_grad()];
        let mask = options.mask.cloned();
        let (causal, dropout, scale) = (options.causal, options.dropout, options.scale);
        let value = forward.out.clone();
        Ok(Var::from_op(
            value,
            vec![self.clone(), k.clone(), v.clone()],
            move |g| {
                let options = AttentionOptions {
                    mask: mask.as_ref(),
                    causal,
                    dropout,
                    scale,
                };
                let grads =
                    g.scaled_dot_product_attention_backward(&q_t, &k_t, &v_t, &options, &forward)?;
                Ok(vec![
                    need[0].then_some(grads.q),
                    need[1].then_some(grads.k),
                    need[2].then_some(grads.v),
                ])
            },
        ))
    }
}
