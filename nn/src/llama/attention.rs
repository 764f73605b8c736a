//! [`LlamaAttention`]: causal self-attention with rotary positions and grouped-query heads.

use crate::layers::{KvCache, Linear, RotaryEmbedding};
use crate::module::{Forward, TrainingMode};
use crate::precision::Precision;
use crate::Module;
use tessera_autograd::Var;
use tessera_core::{AttentionOptions, Backend, Error, HostData, Result, Tensor};

/// `transformers`' `LlamaAttention`: `q_proj` (`hidden → heads · d`), `k_proj` and `v_proj`
/// (`hidden → kv_heads · d`), rotary embeddings on queries and keys, causal attention, `o_proj`.
///
/// **Grouped-query attention** without copying keys and values: the `heads / kv_heads` query
/// heads that share a key/value head are stacked along the query axis
/// (`[b, kv_heads, group · len, d]`), so one attention call per key/value head serves the
/// whole group, with a causal mask that gives each stacked row its own position.
///
/// A clone shares the parameters (the same `Var`s).
#[derive(Module, Clone)]
pub struct LlamaAttention<B: Backend> {
    /// The query projection.
    pub q_proj: Linear<B>,
    /// The key projection.
    pub k_proj: Linear<B>,
    /// The value projection.
    pub v_proj: Linear<B>,
    /// The output projection.
    pub o_proj: Linear<B>,
    #[module(skip)]
    num_heads: usize,
    #[module(skip)]
    num_kv_heads: usize,
    #[module(skip)]
    head_dim: usize,
    #[module(skip)]
    precision: Precision,
    mode: TrainingMode,
}

/// `x: [b, t, heads · d]` as `[b, heads, t, d]` (a view).
fn split_heads<B: Backend>(x: &Var<B>, heads: usize, d: usize) -> Result<Var<B>> {
    let (b, t) = (x.dims()[0], x.dims()[1]);
    x.reshape([b, t, heads, d])?.permute(&[0, 2, 1, 3])
}

impl<B: Backend> LlamaAttention<B> {
    /// The layer over its four projections, checked for consistent widths.
    pub fn new(
        q_proj: Linear<B>,
        k_proj: Linear<B>,
        v_proj: Linear<B>,
        o_proj: Linear<B>,
        num_heads: usize,
        num_kv_heads: usize,
        precision: Precision,
    ) -> Result<Self> {
        let hidden = q_proj.in_features();
        let bad = num_heads == 0
            || num_kv_heads == 0
            || num_heads % num_kv_heads != 0
            || q_proj.out_features() % num_heads != 0;
        let d = if bad {
            0
        } else {
            q_proj.out_features() / num_heads
        };
        let consistent = !bad
            && k_proj.in_features() == hidden
            && v_proj.in_features() == hidden
            && k_proj.out_features() == num_kv_heads * d
            && v_proj.out_features() == num_kv_heads * d
            && o_proj.in_features() == num_heads * d
            && o_proj.out_features() == hidden;
        if !consistent {
            return Err(Error::InvalidArgument {
                op: "LlamaAttention",
                msg: format!(
                    "projections q {}x{}, k {}x{}, v {}x{}, o {}x{} do not fit {num_heads} \
                     query and {num_kv_heads} key/value heads",
                    q_proj.out_features(),
                    q_proj.in_features(),
                    k_proj.out_features(),
                    k_proj.in_features(),
                    v_proj.out_features(),
                    v_proj.in_features(),
                    o_proj.out_features(),
                    o_proj.in_features()
                ),
            });
        }
        Ok(LlamaAttention {
            q_proj,
            k_proj,
            v_proj,
            o_proj,
            num_heads,
            num_kv_heads,
            head_dim: d,
            precision,
            mode: TrainingMode::new(),
        })
    }

    /// Query heads.
    pub fn num_heads(&self) -> usize {
        self.num_heads
    }

    /// Key/value heads.
    pub fn num_kv_heads(&self) -> usize {
        self.num_kv_heads
    }

    /// The width of one head.
    pub fn head_dim(&self) -> usize {
        self.head_dim
    }

    /// The attention of `x: [batch, n, hidden]` at positions `start..start + n`; with a cache,
    /// over the cached positions too (whose keys and values it appends). Returns
    /// `[batch, n, hidden]`.
    pub fn forward_at(
        &self,
        x: &Var<B>,
        rope: &RotaryEmbedding,
        start: usize,
        cache: Option<&mut KvCache<B>>,
    ) -> Result<Var<B>> {
        if x.rank() != 3 || x.dims()[2] != self.q_proj.in_features() {
            return Err(Error::InvalidArgument {
                op: "LlamaAttention",
                msg: format!(
                    "input must be [batch, length, {}], got {}",
                    self.q_proj.in_features(),
                    x.shape()
                ),
            });
        }
        let (b, n) = (x.dims()[0], x.dims()[1]);
        let (h, kvh, d) = (self.num_heads, self.num_kv_heads, self.head_dim);
        let p = self.precision;
        let q = rope.apply(&split_heads(&self.q_proj.forward(x)?, h, d)?, start)?;
        let k = rope.apply(&split_heads(&self.k_proj.forward(x)?, kvh, d)?, start)?;
        let v = split_heads(&self.v_proj.forward(x)?, kvh, d)?;
        let (q, k, v) = (p.to_compute(&q)?, p.to_compute(&k)?, p.to_compute(&v)?);
        let (k, v) = match cache {
            None => (k, v),
            Some(cache) => {
                if cache.len() != start {
                    return Err(Error::InvalidArgument {
                        op: "LlamaAttention",
                        msg: format!(
                            "the cache holds {} positions, the input starts at {start}",
                            cache.len()
                        ),
                    });
                }
                let dtype = cache.dtype();
                let cast = |t: Tensor<B>| match t.dtype() == dtype {
                    true => Ok(t),
                    false => t.to_dtype(dtype),
                };
                let (keys, values) = cache.append(&cast(k.value())?, &cast(v.value())?)?;
                let back = |t: Tensor<B>| match t.dtype() == q.dtype() {
                    true => Ok(t),
                    false => t.to_dtype(q.dtype()),
                };
                (Var::constant(back(keys)?), Var::constant(back(values)?))
            }
        };
        let s = k.dims()[2];
        let group = h / kvh;
        // Query heads of one group stacked along the query axis: row r is the query at
        // position start + r % n; key j is at position start + n - s + j.
        let q = q.reshape([b, kvh, group * n, d])?;
        let mask;
        let mut options = AttentionOptions::new();
        if group == 1 && n == s {
            options = options.causal(n > 1);
        } else if n > 1 {
            let bits = (0..group * n)
                .flat_map(|r| (0..s).map(move |j| u8::from(j + n <= s + r % n)))
                .collect();
            mask = Tensor::from_host(HostData::Bool(bits), [group * n, s], x.value().backend())?;
            options = options.mask(&mask);
        }
        let y = q.scaled_dot_product_attention(&k, &v, &options)?;
        let merged = y
            .reshape([b, h, n, d])?
            .permute(&[0, 2, 1, 3])?
            .reshape([b, n, h * d])?;
        p.from_compute(self.o_proj.forward(&merged)?, x.dtype())
    }
}
