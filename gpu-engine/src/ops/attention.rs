//! Scaled dot-product attention and its gradient on a GPU, by the handle's
//! [`crate::AttentionRoute`]: materialised ([`super::attention_materialized`]) or fused. The
//! fused kernels (`attention.cl.c`) run one work-group per query row (forward, dQ) or key row
//! (dK, dV), the scores recomputed chunk by chunk, only the output and one log-sum-exp per row
//! written. Operands are made contiguous first (a head split costs one copy each); empty
//! operands fall back to the composite.
//!
//! Written at the tensor level; `impl Backend for Gpu<D>` forwards to [`forward`] and
//! [`backward`].

use super::attention_materialized as materialized;
use super::operands::{dense, scalar};
use crate::attention_route::AttentionPlan;
use crate::driver::{Driver, ModuleKey};
use crate::gpu::Gpu;
use crate::kernels::Program;
use crate::runtime::Arg;
use crate::storage::GpuStorage;
use tessera_core::attention::{AttentionGrads, AttentionInputs, AttentionOutput, AttentionParams};
use tessera_core::{composite, Backend, DType, Layout, Result, Tensor};

/// The attention program for `dtype`.
fn module(dtype: DType) -> ModuleKey {
    ModuleKey {
        program: Program::Attention,
        dtype,
        extra_defines: Vec::new(),
    }
}

fn gpu_of<D: Driver>(t: &Tensor<Gpu<D>>) -> &GpuStorage<D> {
    t.storage()
}

/// The operands as the kernels read them: contiguous q, k, v and mask with their offsets, and
/// the sizes.
struct Dense<Bk: Backend> {
    q: (Tensor<Bk>, i64),
    k: (Tensor<Bk>, i64),
    v: (Tensor<Bk>, i64),
    mask: Option<(Tensor<Bk>, i64)>,
    /// batch, L, S, E, Ev.
    sizes: [usize; 5],
}

impl<D: Driver> Dense<Gpu<D>> {
    /// The dense operands, or None when an empty dimension leaves the work to the composite.
    fn new(
        q: &Tensor<Gpu<D>>,
        k: &Tensor<Gpu<D>>,
        v: &Tensor<Gpu<D>>,
        mask: Option<&Tensor<Gpu<D>>>,
    ) -> Result<Option<Self>> {
        if q.numel() == 0 || k.numel() == 0 || v.numel() == 0 || !q.dtype().is_float() {
            return Ok(None);
        }
        let r = q.rank();
        let batch = q.dims()[..r - 2].iter().product();
        let sizes = [
            batch,
            q.dims()[r - 2],
            k.dims()[r - 2],
            q.dims()[r - 1],
            v.dims()[r - 1],
        ];
        Ok(Some(Dense {
            q: dense(q)?,
            k: dense(k)?,
            v: dense(v)?,
            mask: mask.map(dense).transpose()?,
            sizes,
        }))
    }

    /// The leading arguments every kernel takes: sizes (rows first), scale, causality, the
    /// operands, the mask and the dropout.
    fn args<'a>(
        &'a self,
        rows: usize,
        params: &AttentionParams,
        no_mask: &'a GpuStorage<D>,
    ) -> Vec<Arg<'a, D>> {
        let [_, l, s, e, ev] = self.sizes;
        let dtype = self.q.0.dtype();
        let i = |v: usize| Arg::I64(v as i64);
        let (bmask, fmask, m_off, kind) = match &self.mask {
            None => (no_mask, no_mask, 0, 0),
            Some((m, off)) if m.dtype() == DType::Bool => (gpu_of(m), no_mask, *off, 1),
            Some((m, off)) => (no_mask, gpu_of(m), *off, 2),
        };
        let (p, factor, seed, offset) = params.dropout.map_or((0.0, 1.0, 0, 0), |d| {
            (d.p, 1.0 / (1.0 - d.p), d.seed, d.offset)
        });
        vec![
            i(rows),
            i(l),
            i(s),
            i(e),
            i(ev),
            scalar(dtype, params.scale),
            Arg::I32(params.causal as i32),
            Arg::Buffer(gpu_of(&self.q.0)),
            Arg::I64(self.q.1),
            Arg::Buffer(gpu_of(&self.k.0)),
            Arg::I64(self.k.1),
            Arg::Buffer(gpu_of(&self.v.0)),
            Arg::I64(self.v.1),
            Arg::Buffer(bmask),
            Arg::Buffer(fmask),
            Arg::I64(m_off),
            Arg::I32(kind),
            Arg::I32(params.dropout.is_some() as i32),
            scalar(dtype, p),
            scalar(dtype, factor),
            Arg::U32(seed as u32),
            Arg::U32((seed >> 32) as u32),
            Arg::U64(offset),
        ]
    }
}

/// Wraps a fresh contiguous device storage of `dims` as a tensor of `backend`.
fn wrap<D: Driver>(
    backend: &Gpu<D>,
    storage: GpuStorage<D>,
    dims: Vec<usize>,
) -> Result<Tensor<Gpu<D>>> {
    Tensor::from_parts(backend, storage, Layout::contiguous(dims))
}

/// The handle's plan for queries `q: [..b, L, E]` over keys `k: [..b, S, E]`.
fn plan<D: Driver>(gpu: &Gpu<D>, q: &Tensor<Gpu<D>>, k: &Tensor<Gpu<D>>) -> AttentionPlan {
    let r = q.rank();
    let batch = q.dims()[..r - 2].iter().product();
    gpu.attention_route()
        .plan(batch, q.dims()[r - 2], k.dims()[r - 2])
}

/// [`tessera_core::Backend::scaled_dot_product_attention`] on a GPU.
pub(crate) fn forward<D: Driver>(
    gpu: &Gpu<D>,
    inputs: AttentionInputs<'_, Gpu<D>>,
    params: &AttentionParams,
) -> Result<AttentionOutput<Gpu<D>>> {
    let AttentionInputs { q, k, v, mask } = inputs;
    if let AttentionPlan::Chunks(chunks) = plan(gpu, q, k) {
        return materialized::forward(inputs, params, &chunks);
    }
    let Some(ops) = Dense::new(q, k, v, mask)? else {
        return composite::scaled_dot_product_attention(inputs, params);
    };
    let rt = gpu.runtime();
    let [batch, l, _, _, ev] = ops.sizes;
    let rows = batch * l;
    let dtype = q.dtype();
    let out = rt.alloc(dtype, rows * ev)?;
    let lse = rt.alloc(dtype, rows)?;
    let no_mask = rt.alloc(DType::Bool, 0)?;
    let mut args = ops.args(rows, params, &no_mask);
    args.extend([Arg::Buffer(&out), Arg::Buffer(&lse)]);
    let group = rt.info().reduce_group as usize;
    rt.launch(
        &module(dtype),
        "attention_forward",
        &args,
        [rows, 1, 1],
        [group, 1, 1],
    )?;
    drop(args);
    let r = q.rank();
    let mut out_dims = q.dims().to_vec();
    out_dims[r - 1] = ev;
    Ok(AttentionOutput {
        out: wrap(q.backend(), out, out_dims)?,
        logsumexp: wrap(q.backend(), lse, q.dims()[..r - 1].to_vec())?,
    })
}

/// [`tessera_core::Backend::scaled_dot_product_attention_backward`] on a GPU.
pub(crate) fn backward<D: Driver>(
    gpu: &Gpu<D>,
    grad_out: &Tensor<Gpu<D>>,
    inputs: AttentionInputs<'_, Gpu<D>>,
    forward: &AttentionOutput<Gpu<D>>,
    params: &AttentionParams,
) -> Result<AttentionGrads<Gpu<D>>> {
    let AttentionInputs { q, k, v, mask } = inputs;
    if let AttentionPlan::Chunks(chunks) = plan(gpu, q, k) {
        return materialized::backward(grad_out, inputs, forward, params, &chunks);
    }
    let Some(ops) = Dense::new(q, k, v, mask)? else {
        return composite::scaled_dot_product_attention_backward(grad_out, inputs, forward, params);
    };
    let rt = gpu.runtime();
    let [batch, l, s, e, ev] = ops.sizes;
    let (rows, keys) = (batch * l, batch * s);
    let dtype = q.dtype();
    let (g, g_off) = dense(grad_out)?;
    let (out, o_off) = dense(&forward.out)?;
    let (lse, l_off) = dense(&forward.logsumexp)?;
    let delta = rt.alloc(dtype, rows)?;
    let dq = rt.alloc(dtype, rows * e)?;
    let dk = rt.alloc(dtype, keys * e)?;
    let dv = rt.alloc(dtype, keys * ev)?;
    let no_mask = rt.alloc(DType::Bool, 0)?;
    let group = rt.info().reduce_group as usize;

    let mut args = ops.args(rows, params, &no_mask);
    args.extend([
        Arg::Buffer(gpu_of(&g)),
        Arg::I64(g_off),
        Arg::Buffer(gpu_of(&out)),
        Arg::I64(o_off),
        Arg::Buffer(gpu_of(&lse)),
        Arg::I64(l_off),
        Arg::Buffer(&delta),
        Arg::Buffer(&dq),
    ]);
    rt.launch(
        &module(dtype),
        "attention_backward_dq",
        &args,
        [rows, 1, 1],
        [group, 1, 1],
    )?;

    let mut args = ops.args(keys, params, &no_mask);
    args.extend([
        Arg::Buffer(gpu_of(&g)),
        Arg::I64(g_off),
        Arg::Buffer(gpu_of(&lse)),
        Arg::I64(l_off),
        Arg::Buffer(&delta),
        Arg::Buffer(&dk),
        Arg::Buffer(&dv),
    ]);
    rt.launch(
        &module(dtype),
        "attention_backward_dkdv",
        &args,
        [keys, 1, 1],
        [group, 1, 1],
    )?;
    drop(args);
    let backend = q.backend();
    Ok(AttentionGrads {
        q: wrap(backend, dq, q.dims().to_vec())?,
        k: wrap(backend, dk, k.dims().to_vec())?,
        v: wrap(backend, dv, v.dims().to_vec())?,
    })
}
