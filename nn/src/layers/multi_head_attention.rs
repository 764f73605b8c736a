//! [`MultiHeadAttention`]: PyTorch's `nn.MultiheadAttention` (with `batch_first=True`) on the
//! fused scaled dot-product attention op, and its [`MultiHeadAttentionConfig`].

use super::kv_cache::KvCache;
use super::{Linear, LinearConfig};
use crate::init;
use crate::module::{Forward, RandomStream, TrainingMode};
use crate::precision::Precision;
use crate::{Config, Module};
use tessera_autograd::{no_grad, Var};
use tessera_core::{
    AttentionDropout, AttentionOptions, Backend, DType, Error, Generator, HostData, Result, Tensor,
};

/// The hyper-parameters of a [`MultiHeadAttention`] (PyTorch's `nn.MultiheadAttention`
/// arguments: `embed_dim`, `num_heads`, `dropout = 0`, `bias = true`).
///
/// ```
/// # fn main() -> tessera_core::Result<()> {
/// use tessera_nn::layers::MultiHeadAttentionConfig;
/// use tessera_nn::Module;
/// let (dev, mut g) = (tessera_cpu::Cpu::new(), tessera_core::Generator::new(0));
/// let attn = MultiHeadAttentionConfig::new(64, 4).dropout(0.1).init(&dev, &mut g)?;
/// let names: Vec<String> = attn.parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias"]);
/// # Ok(()) }
/// ```
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct MultiHeadAttentionConfig {
    /// The model width `E` (inputs and outputs are `[batch, length, E]`).
    pub embed_dim: usize,
    /// The number of heads; must divide `embed_dim`.
    pub num_heads: usize,
    /// Dropout on the attention weights during training.
    #[config(default = 0.0)]
    pub dropout: f64,
    /// Whether the input and output projections learn biases.
    #[config(default = true)]
    pub bias: bool,
    /// The dtype of the parameters.
    #[config(default = DType::F32)]
    pub dtype: DType,
    /// The dtype the projections and the attention are computed in ([`Precision`]); the
    /// parameters keep `dtype`.
    #[config(default = Precision::F32)]
    pub precision: Precision,
}

impl MultiHeadAttentionConfig {
    /// The layer with PyTorch's initialisation: `in_proj_weight` Xavier-uniform, biases zero,
    /// `out_proj.weight` like a `Linear` (`U(-1/√E, 1/√E)`); the dropout stream is forked from
    /// `generator`.
    pub fn init<B: Backend>(
        &self,
        backend: &B,
        generator: &mut Generator,
    ) -> Result<MultiHeadAttention<B>> {
        let (e, h) = (self.embed_dim, self.num_heads);
        if h == 0 || e % h != 0 {
            return Err(Error::InvalidArgument {
                op: "MultiHeadAttention",
                msg: format!("embed_dim {e} must be a positive multiple of num_heads {h}"),
            });
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(Error::InvalidArgument {
                op: "MultiHeadAttention",
                msg: format!("dropout must be in [0, 1), got {}", self.dropout),
            });
        }
        let dtype = self.dtype;
        let e3 = e.checked_mul(3).ok_or(Error::SizeOverflow {
            op: "MultiHeadAttention",
            msg: format!("3 x embed_dim {e}"),
        })?;
        let in_proj_weight = init::xavier_uniform([e3, e], 1.0, dtype, generator, backend)?;
        let in_proj_bias = self
            .bias
            .then(|| Tensor::zeros([e3], dtype, backend))
            .transpose()?;
        let out = LinearConfig::new(e, e)
            .bias(false)
            .dtype(dtype)
            .init(backend, generator)?;
        let out_bias = self
            .bias
            .then(|| Tensor::zeros([e], dtype, backend))
            .transpose()?;
        Ok(MultiHeadAttention {
            in_proj_weight: Var::param(in_proj_weight),
            in_proj_bias: in_proj_bias.map(Var::param),
            out_proj: Linear::from_tensors(out.weight().value(), out_bias)?
                .with_precision(self.precision),
            num_heads: h,
            dropout: self.dropout,
            generator: RandomStream::new(generator.fork()),
            mode: TrainingMode::new(),
            precision: self.precision,
        })
    }
}

/// Multi-head attention with PyTorch's parameters and layout: `in_proj_weight: [3E, E]` (the
/// query, key and value projections stacked), `in_proj_bias: [3E]`, and `out_proj`, a
/// `Linear(E, E)`; a checkpoint of `nn.MultiheadAttention(E, H, batch_first=True)` loads into
/// it. Inputs are `[batch, length, E]`; heads are split out of the projections as views and
/// attended to by [`Tensor::scaled_dot_product_attention`] (fused kernels where the backend has
/// them), with dropout on the attention weights in training mode.
///
/// Masks follow the attention op: causal masking, and/or a mask broadcastable to
/// `[batch, heads, L, S]` that is bool (`true` = may attend; note that PyTorch's
/// `key_padding_mask` uses the opposite convention) or additive. See
/// [`MultiHeadAttention::key_padding_mask`].
///
/// Under a 16-bit [`Precision`] ([`MultiHeadAttentionConfig::precision`]) the projections and
/// the attention compute in the 16-bit dtype and the output is cast back to the input's dtype;
/// the parameters keep theirs (see [`crate::precision`]).
///
/// A clone shares the parameters (the same `Var`s); its random streams and training mode
/// are copies that continue from the same point.
#[derive(Module, Clone)]
pub struct MultiHeadAttention<B: Backend> {
    in_proj_weight: Var<B>,
    in_proj_bias: Option<Var<B>>,
    out_proj: Linear<B>,
    #[module(skip)]
    num_heads: usize,
    #[module(skip)]
    dropout: f64,
    generator: RandomStream,
    mode: TrainingMode,
    #[module(skip)]
    precision: Precision,
}

/// `x: [b, t, i] · wᵀ + bias` for `w: [o, i]`: `[b, t, o]` (a rank-2 product over the rows),
/// computed under `precision` and left in its compute dtype.
fn project<B: Backend>(
    x: &Var<B>,
    w: &Var<B>,
    bias: Option<&Var<B>>,
    precision: Precision,
) -> Result<Var<B>> {
    let d = x.dims().to_vec();
    let rows = precision.to_compute(&x.reshape([d[0] * d[1], d[2]])?)?;
    let w_t = precision.to_compute(w)?.t()?;
    let y = match bias {
        Some(b) => rows.matmul_bias(&w_t, &precision.to_compute(b)?)?,
        None => rows.matmul(&w_t)?,
    };
    y.reshape([d[0], d[1], w.dims()[0]])
}

impl<B: Backend> MultiHeadAttention<B> {
    /// The model width `E`.
    pub fn embed_dim(&self) -> usize {
        self.in_proj_weight.dims()[1]
    }

    /// The number of heads.
    pub fn num_heads(&self) -> usize {
        self.num_heads
    }

    /// The width of one head, `E / heads`.
    pub fn head_dim(&self) -> usize {
        self.embed_dim() / self.num_heads
    }

    /// The attention-weight dropout probability.
    pub fn dropout(&self) -> f64 {
        self.dropout
    }

    /// The same layer computing under `precision` (the output projection too); the parameters
    /// are not converted.
    pub fn with_precision(mut self, precision: Precision) -> Self {
        self.precision = precision;
        self.out_proj = self.out_proj.with_precision(precision);
        self
    }

    /// The policy the layer computes under.
    pub fn precision(&self) -> Precision {
        self.precision
    }

    /// The stacked input projections `[3E, E]`.
    pub fn in_proj_weight(&self) -> &Var<B> {
        &self.in_proj_weight
    }

    /// The stacked input biases `[3E]`, if any.
    pub fn in_proj_bias(&self) -> Option<&Var<B>> {
        self.in_proj_bias.as_ref()
    }

    /// The output projection.
    pub fn out_proj(&self) -> &Linear<B> {
        &self.out_proj
    }

    /// A bool mask `[batch, 1, 1, S]` (true = may attend) from per-key flags `keep: [batch, S]`,
    /// ready to pass as `mask`.
    pub fn key_padding_mask(keep: &Tensor<B>) -> Result<Tensor<B>> {
        let d = keep.dims();
        if d.len() != 2 {
            return Err(Error::InvalidArgument {
                op: "key_padding_mask",
                msg: format!("expected [batch, keys], got {}", keep.shape()),
            });
        }
        keep.to_dtype(DType::Bool)?.reshape([d[0], 1, 1, d[1]])
    }

    fn check_input(&self, what: &str, x: &Var<B>) -> Result<()> {
        let e = self.embed_dim();
        if x.rank() != 3 || x.dims()[2] != e {
            return Err(Error::InvalidArgument {
                op: "MultiHeadAttention",
                msg: format!("{what} must be [batch, length, {e}], got {}", x.shape()),
            });
        }
        Ok(())
    }

    /// `[b, t, ...]` columns `start..start + E` of a projection as heads `[b, heads, t, E/heads]`
    /// (a view).
    fn heads(&self, x: &Var<B>, start: usize) -> Result<Var<B>> {
        let (b, t) = (x.dims()[0], x.dims()[1]);
        let (h, d) = (self.num_heads, self.head_dim());
        x.narrow(2, start, h * d)?
            .reshape([b, t, h, d])?
            .permute(&[0, 2, 1, 3])
    }

    /// `[b, heads, t, d]` back to `[b, t, E]`, through the output projection, cast to `dtype`
    /// (the input's).
    fn merge(&self, y: &Var<B>, dtype: DType) -> Result<Var<B>> {
        let (b, t) = (y.dims()[0], y.dims()[2]);
        let merged = y
            .permute(&[0, 2, 1, 3])?
            .reshape([b, t, self.embed_dim()])?;
        // The projection computes in the dtype of `y` (the compute dtype under a 16-bit
        // policy) and returns it; one cast back here.
        self.precision
            .from_compute(self.out_proj.forward(&merged)?, dtype)
    }

    /// `mask` in the dtype attention runs in: an additive float mask of the input's dtype is
    /// cast to the compute dtype (a bool mask, or one of another dtype, which the op then
    /// reports, is passed as it is).
    fn compute_mask(&self, mask: Option<&Tensor<B>>, input: DType) -> Result<Option<Tensor<B>>> {
        match (mask, self.precision.compute_dtype()) {
            (Some(m), Some(low)) if m.dtype() == input && m.dtype().is_float() => {
                Ok(Some(m.to_dtype(low)?))
            }
            (m, _) => Ok(m.cloned()),
        }
    }

    /// The dropout of one attention call over `numel` weights, in training mode.
    fn attention_dropout(&self, numel: usize) -> Option<AttentionDropout> {
        (self.mode.get() && self.dropout > 0.0)
            .then(|| AttentionDropout::draw(self.dropout, &mut self.generator.lock(), numel))
    }

    /// Attends `q: [b, h, l, d]` over `k`, `v: [b, h, s, d]`.
    fn attend(
        &self,
        q: &Var<B>,
        k: &Var<B>,
        v: &Var<B>,
        causal: bool,
        mask: Option<&Tensor<B>>,
    ) -> Result<Var<B>> {
        let (b, h, l, s) = (q.dims()[0], q.dims()[1], q.dims()[2], k.dims()[2]);
        let mut options = AttentionOptions::new().causal(causal);
        if let Some(m) = mask {
            options = options.mask(m);
        }
        if let Some(d) = self.attention_dropout(b * h * l * s) {
            options = options.dropout(d);
        }
        q.scaled_dot_product_attention(k, v, &options)
    }

    /// Self-attention of `x: [batch, length, E]`: one projection to queries, keys and values,
    /// heads split as views, attention (causal and/or masked), heads merged, output
    /// projection. Returns `[batch, length, E]`.
    pub fn forward_self(
        &self,
        x: &Var<B>,
        causal: bool,
        mask: Option<&Tensor<B>>,
    ) -> Result<Var<B>> {
        self.check_input("input", x)?;
        let e = self.embed_dim();
        let qkv = project(
            x,
            &self.in_proj_weight,
            self.in_proj_bias.as_ref(),
            self.precision,
        )?;
        let (q, k, v) = (
            self.heads(&qkv, 0)?,
            self.heads(&qkv, e)?,
            self.heads(&qkv, 2 * e)?,
        );
        let mask = self.compute_mask(mask, x.dtype())?;
        let y = self.attend(&q, &k, &v, causal, mask.as_ref())?;
        self.merge(&y, x.dtype())
    }

    /// Attention of `query: [batch, L, E]` over `key`, `value: [batch, S, E]` (PyTorch's
    /// `forward(query, key, value)`): each input through its third of the projections.
    pub fn forward_qkv(
        &self,
        query: &Var<B>,
        key: &Var<B>,
        value: &Var<B>,
        causal: bool,
        mask: Option<&Tensor<B>>,
    ) -> Result<Var<B>> {
        self.check_input("query", query)?;
        self.check_input("key", key)?;
        self.check_input("value", value)?;
        if key.dims()[..2] != value.dims()[..2] || key.dims()[0] != query.dims()[0] {
            return Err(Error::InvalidArgument {
                op: "MultiHeadAttention",
                msg: format!(
                    "query {}, key {} and value {} must share the batch, key and value the length",
                    query.shape(),
                    key.shape(),
                    value.shape()
                ),
            });
        }
        let e = self.embed_dim();
        let part = |x: &Var<B>, i: usize| -> Result<Var<B>> {
            let w = self.in_proj_weight.narrow(0, i * e, e)?;
            let b = self
                .in_proj_bias
                .as_ref()
                .map(|b| b.narrow(0, i * e, e))
                .transpose()?;
            self.heads(&project(x, &w, b.as_ref(), self.precision)?, 0)
        };
        let (q, k, v) = (part(query, 0)?, part(key, 1)?, part(value, 2)?);
        let mask = self.compute_mask(mask, query.dtype())?;
        let y = self.attend(&q, &k, &v, causal, mask.as_ref())?;
        self.merge(&y, query.dtype())
    }

    /// Causal self-attention of the new positions `x: [batch, n, E]` after those already in
    /// `cache` (inference: no gradient, no dropout). Their keys and values are appended to the
    /// cache, so each new query costs attention over the cached length only; the result equals
    /// the rows of [`MultiHeadAttention::forward_self`] (causal) over the whole sequence.
    pub fn forward_cached(&self, x: &Var<B>, cache: &mut KvCache<B>) -> Result<Var<B>> {
        self.check_input("input", x)?;
        no_grad(|| {
            let e = self.embed_dim();
            let qkv = project(
                x,
                &self.in_proj_weight,
                self.in_proj_bias.as_ref(),
                self.precision,
            )?;
            let q = self.heads(&qkv, 0)?.value();
            // The cache keeps its own dtype (`GptCache` allocates the compute dtype, so there
            // is nothing to cast); attention runs in the dtype of the queries.
            let cache_dtype = cache.dtype();
            let in_cache_dtype = |t: Tensor<B>| match t.dtype() == cache_dtype {
                true => Ok(t),
                false => t.to_dtype(cache_dtype),
            };
            let (k, v) = (
                in_cache_dtype(self.heads(&qkv, e)?.value())?,
                in_cache_dtype(self.heads(&qkv, 2 * e)?.value())?,
            );
            let start = cache.len();
            let n = x.dims()[1];
            let (keys, values) = cache.append(&k, &v)?;
            let in_query_dtype = |t: Tensor<B>| match t.dtype() == q.dtype() {
                true => Ok(t),
                false => t.to_dtype(q.dtype()),
            };
            let (keys, values) = (in_query_dtype(keys)?, in_query_dtype(values)?);
            // One new position sees the whole cache; several new positions after a non-empty
            // cache need the causal mask aligned to the end.
            let mask = if n > 1 && start > 0 {
                let bits = (0..n)
                    .flat_map(|i| (0..start + n).map(move |j| u8::from(j <= start + i)))
                    .collect();
                Some(Tensor::from_host(
                    HostData::Bool(bits),
                    [n, start + n],
                    x.value().backend(),
                )?)
            } else {
                None
            };
            let mut options = AttentionOptions::new().causal(n > 1 && start == 0);
            if let Some(m) = &mask {
                options = options.mask(m);
            }
            let y = q.scaled_dot_product_attention(&keys, &values, &options)?;
            drop((keys, values));
            self.merge(&Var::constant(y), x.dtype())
        })
    }
}

impl<B: Backend> Forward<B> for MultiHeadAttention<B> {
    /// Unmasked self-attention of `x: [batch, length, E]`.
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.forward_self(x, false, None)
    }
}
