//! Attention with the scores materialised ([`crate::AttentionRoute::Materialized`]): the
//! composite of `tessera_core` (batched matrix products on the handle's GEMM around the row
//! kernels), run over chunks of the flattened batch so that one chunk's scores stay under the
//! route's bound. A chunk's dropout draws start at the counter of its first weight, so the
//! chunks draw exactly what one call over the whole batch draws.

use std::ops::Range;

use tessera_core::attention::{
    AttentionDropout, AttentionGrads, AttentionInputs, AttentionOutput, AttentionParams,
};
use tessera_core::{composite, Backend, Result, Tensor};

/// `t` with its batch axes (all but the last two) merged into one.
fn flat<B: Backend>(t: &Tensor<B>) -> Result<Tensor<B>> {
    t.flatten(0, t.rank() as isize - 3)
}

/// The rows `range` of a flattened operand.
fn rows<B: Backend>(t: &Tensor<B>, range: &Range<usize>) -> Result<Tensor<B>> {
    t.narrow(0, range.start, range.len())
}

/// The parameters of the chunk starting at batch element `start`: dropout counters moved past
/// the weights of the elements before it (`l * s` weights each; counters wrap modulo 2^64).
fn chunk_params(params: &AttentionParams, start: usize, l: usize, s: usize) -> AttentionParams {
    let dropout = params.dropout.map(|d| AttentionDropout {
        offset: d
            .offset
            .wrapping_add((start as u64).wrapping_mul(l as u64).wrapping_mul(s as u64)),
        ..d
    });
    AttentionParams { dropout, ..*params }
}

/// The batch chunk's inputs.
struct Chunk<B: Backend> {
    q: Tensor<B>,
    k: Tensor<B>,
    v: Tensor<B>,
    mask: Option<Tensor<B>>,
}

impl<B: Backend> Chunk<B> {
    fn inputs(&self) -> AttentionInputs<'_, B> {
        AttentionInputs {
            q: &self.q,
            k: &self.k,
            v: &self.v,
            mask: self.mask.as_ref(),
        }
    }
}

/// The flattened operands, cut per chunk.
struct Flat<B: Backend> {
    q: Tensor<B>,
    k: Tensor<B>,
    v: Tensor<B>,
    mask: Option<Tensor<B>>,
    l: usize,
    s: usize,
}

impl<B: Backend> Flat<B> {
    fn new(inputs: &AttentionInputs<'_, B>) -> Result<Self> {
        let r = inputs.q.rank();
        Ok(Flat {
            q: flat(inputs.q)?,
            k: flat(inputs.k)?,
            v: flat(inputs.v)?,
            mask: inputs.mask.map(flat).transpose()?,
            l: inputs.q.dims()[r - 2],
            s: inputs.k.dims()[r - 2],
        })
    }

    fn chunk(&self, range: &Range<usize>) -> Result<Chunk<B>> {
        Ok(Chunk {
            q: rows(&self.q, range)?,
            k: rows(&self.k, range)?,
            v: rows(&self.v, range)?,
            mask: self.mask.as_ref().map(|m| rows(m, range)).transpose()?,
        })
    }
}

/// The outputs of the chunks joined along the batch and given `dims`.
fn join<B: Backend>(parts: &[Tensor<B>], dims: &[usize]) -> Result<Tensor<B>> {
    let refs: Vec<&Tensor<B>> = parts.iter().collect();
    Tensor::cat(&refs, 0)?.reshape(dims.to_vec())
}

/// The forward pass over `chunks` (ranges of the flattened batch, covering it in order).
pub(crate) fn forward<B: Backend>(
    inputs: AttentionInputs<'_, B>,
    params: &AttentionParams,
    chunks: &[Range<usize>],
) -> Result<AttentionOutput<B>> {
    if chunks.len() <= 1 {
        return composite::scaled_dot_product_attention(inputs, params);
    }
    let operands = Flat::new(&inputs)?;
    let (mut outs, mut lses) = (Vec::new(), Vec::new());
    for range in chunks {
        let chunk = operands.chunk(range)?;
        let params = chunk_params(params, range.start, operands.l, operands.s);
        let part = composite::scaled_dot_product_attention(chunk.inputs(), &params)?;
        outs.push(part.out);
        lses.push(part.logsumexp);
    }
    let q = inputs.q;
    let r = q.rank();
    let mut out_dims = q.dims().to_vec();
    out_dims[r - 1] = inputs.v.dims()[r - 1];
    Ok(AttentionOutput {
        out: join(&outs, &out_dims)?,
        logsumexp: join(&lses, &q.dims()[..r - 1])?,
    })
}

/// The gradients over `chunks` (as [`forward`]).
pub(crate) fn backward<B: Backend>(
    grad_out: &Tensor<B>,
    inputs: AttentionInputs<'_, B>,
    forward: &AttentionOutput<B>,
    params: &AttentionParams,
    chunks: &[Range<usize>],
) -> Result<AttentionGrads<B>> {
    if chunks.len() <= 1 {
        return composite::scaled_dot_product_attention_backward(grad_out, inputs, forward, params);
    }
    let operands = Flat::new(&inputs)?;
    let grad_out = flat(grad_out)?;
    let out = flat(&forward.out)?;
    let lse = forward
        .logsumexp
        .flatten(0, forward.logsumexp.rank() as isize - 2)?;
    let (mut dq, mut dk, mut dv) = (Vec::new(), Vec::new(), Vec::new());
    for range in chunks {
        let chunk = operands.chunk(range)?;
        let params = chunk_params(params, range.start, operands.l, operands.s);
        let part_forward = AttentionOutput {
            out: rows(&out, range)?,
            logsumexp: rows(&lse, range)?,
        };
        let grads = composite::scaled_dot_product_attention_backward(
            &rows(&grad_out, range)?,
            chunk.inputs(),
            &part_forward,
            &params,
        )?;
        dq.push(grads.q);
        dk.push(grads.k);
        dv.push(grads.v);
    }
    Ok(AttentionGrads {
        q: join(&dq, inputs.q.dims())?,
        k: join(&dk, inputs.k.dims())?,
        v: join(&dv, inputs.v.dims())?,
    })
}
