//! The 16-bit rule, applied once: "read `F16`/`BF16` into f32, compute, round once".
//!
//! Every call [`crate::Tensor`] makes to a compute op of a [`Backend`] goes through this
//! module. When the op's float inputs share one 16-bit dtype and the backend does not declare
//! ([`Backend::computes_16_bit`]) that it computes the op on that dtype itself, the inputs are
//! widened to f32 with [`Backend::cast`] (exact: every 16-bit value is an f32), the op runs in
//! f32, and each f32 result is rounded back once, to nearest even (the backend's `cast`).
//! Results of other dtypes (comparisons' bools, arg-reductions' indices) pass through. Inputs
//! that mix a 16-bit dtype with another float dtype are passed on unchanged, so the op reports
//! the mismatch as it would for any other pair.
//!
//! So the only error beyond the f32 op's is half an ulp of the 16-bit format, whatever the
//! number of steps a composite takes, and a backend that stores the 16-bit floats and casts
//! them gets every float op in 16 bits without a 16-bit kernel. Wrapper backends (such as
//! `tessera-checked`) call their inner backends through these functions too, so each inner
//! backend's declaration is honoured.
//!
//! The attention backward pass is the one op with more to it than widening: see
//! [`attention_backward`].

use crate::attention::{AttentionGrads, AttentionInputs, AttentionOutput, AttentionParams};
use crate::backend::{AdamTensors, AdamUpdate};
use crate::composite::in_f32::{attention_backward_in_f32, common_half_dtype, in_f32, Narrow};
use crate::layer_norm::{LayerNormGrads, LayerNormOutput};
use crate::operand::{Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape};
use crate::operand::{OperandMut, ScatterAdd};
use crate::{
    ArgReduceOp, Backend, BackendStorage, BinaryOp, CmpOp, Conv2dParams, DType, Layout,
    Pool2dParams, ReduceOp, Result, Tensor, UnaryOp,
};

/// The ops a backend may compute on the 16-bit floats itself (see
/// [`Backend::computes_16_bit`]); every other op on them is widened to f32 by the dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum HalfOp {
    /// [`Backend::unary`].
    Unary,
    /// [`Backend::binary`].
    Binary,
    /// [`Backend::compare`].
    Compare,
    /// [`Backend::where_select`].
    WhereSelect,
    /// [`Backend::reduce`].
    Reduce,
    /// [`Backend::arg_reduce`].
    ArgReduce,
    /// [`Backend::matmul`].
    Matmul,
    /// [`Backend::matmul_bias`]. Unlike the other composites, a backend that does not declare
    /// it gets its definition op by op in the 16-bit dtype (the product and the addition each
    /// under this rule), the values of a product followed by an addition, rather than the whole
    /// op widened to f32: its operands are the largest of a layer, and their 16-bit product is
    /// what a backend is most likely to compute natively.
    MatmulBias,
    /// [`Backend::index_select`].
    IndexSelect,
    /// [`Backend::gather`].
    Gather,
    /// [`Backend::scatter_add`].
    ScatterAdd,
    /// [`Backend::softmax`], [`Backend::log_softmax`] and [`Backend::logsumexp`].
    Softmax,
    /// [`Backend::conv2d`].
    Conv2d,
    /// [`Backend::conv2d_backward_input`] and [`Backend::conv2d_backward_weight`].
    Conv2dBackward,
    /// [`Backend::max_pool2d`], [`Backend::avg_pool2d`] and their gradients.
    Pool2d,
    /// [`Backend::scaled_dot_product_attention`].
    Attention,
    /// [`Backend::scaled_dot_product_attention_backward`].
    AttentionBackward,
    /// [`Backend::layer_norm`].
    LayerNorm,
    /// [`Backend::layer_norm_backward`].
    LayerNormBackward,
    /// [`Backend::relu_backward`].
    ReluBackward,
    /// [`Backend::gelu_backward`].
    GeluBackward,
    /// [`Backend::cross_entropy`].
    CrossEntropy,
    /// [`Backend::cross_entropy_backward`].
    CrossEntropyBackward,
    /// [`Backend::adam_update`].
    AdamUpdate,
}

impl HalfOp {
    /// Whether this is one of the `Backend`'s required primitives (the rest are composites,
    /// provided methods with defaults in [`crate::composite`]). A wrapper backend that forwards
    /// the primitives to an inner backend but runs the composites' defaults itself forwards
    /// its inner backend's declaration for these only.
    pub fn is_primitive(self) -> bool {
        matches!(
            self,
            HalfOp::Unary
                | HalfOp::Binary
                | HalfOp::Compare
                | HalfOp::WhereSelect
                | HalfOp::Reduce
                | HalfOp::ArgReduce
                | HalfOp::Matmul
                | HalfOp::IndexSelect
                | HalfOp::Gather
                | HalfOp::ScatterAdd
        )
    }

    /// Every op a backend may declare.
    pub const ALL: [HalfOp; 24] = [
        HalfOp::Unary,
        HalfOp::Binary,
        HalfOp::Compare,
        HalfOp::WhereSelect,
        HalfOp::Reduce,
        HalfOp::ArgReduce,
        HalfOp::Matmul,
        HalfOp::MatmulBias,
        HalfOp::IndexSelect,
        HalfOp::Gather,
        HalfOp::ScatterAdd,
        HalfOp::Softmax,
        HalfOp::Conv2d,
        HalfOp::Conv2dBackward,
        HalfOp::Pool2d,
        HalfOp::Attention,
        HalfOp::AttentionBackward,
        HalfOp::LayerNorm,
        HalfOp::LayerNormBackward,
        HalfOp::ReluBackward,
        HalfOp::GeluBackward,
        HalfOp::CrossEntropy,
        HalfOp::CrossEntropyBackward,
        HalfOp::AdamUpdate,
    ];
}

/// The 16-bit dtype to widen for `op` over inputs of `dtypes`, if any.
fn to_widen<B: Backend>(
    backend: &B,
    op: HalfOp,
    dtypes: impl IntoIterator<Item = DType>,
) -> Option<DType> {
    common_half_dtype(dtypes).filter(|&half| !backend.computes_16_bit(op, half))
}

/// A storage-level op on `inputs`, in f32 when the 16-bit rule says so (see the module docs).
fn primitive<B: Backend, const N: usize>(
    backend: &B,
    op: HalfOp,
    inputs: [Operand<'_, B::Storage>; N],
    call: impl for<'x> FnOnce([Operand<'x, B::Storage>; N]) -> Result<B::Storage>,
) -> Result<B::Storage> {
    if to_widen(backend, op, inputs.iter().map(|o| o.dtype())).is_none() {
        return call(inputs);
    }
    storage_in_f32(backend, inputs, call)
}

/// Runs the storage-level op `call` on `inputs` in f32 when their float inputs share one
/// 16-bit dtype, whatever the backend declares: the inputs of that dtype are widened with
/// [`Backend::cast`], and an f32 result is rounded back once. Without a shared 16-bit dtype it
/// is a plain call. For a backend that declares an op in [`Backend::computes_16_bit`] but
/// computes some shapes of it natively only (the CPU's bf16 GEMM takes 2-D products and
/// widens batched ones through this function).
pub fn storage_in_f32<B: Backend, const N: usize>(
    backend: &B,
    inputs: [Operand<'_, B::Storage>; N],
    call: impl for<'x> FnOnce([Operand<'x, B::Storage>; N]) -> Result<B::Storage>,
) -> Result<B::Storage> {
    let Some(half) = common_half_dtype(inputs.iter().map(|o| o.dtype())) else {
        return call(inputs);
    };
    let mut widened = Vec::with_capacity(N);
    for x in &inputs {
        widened.push(if x.dtype() == half {
            let storage = backend.cast(*x, DType::F32)?;
            Some((storage, Layout::contiguous(x.dims().to_vec())))
        } else {
            None
        });
    }
    let mut args = Vec::with_capacity(N);
    for (x, wide) in inputs.iter().zip(&widened) {
        args.push(match wide {
            Some((storage, layout)) => Operand::new("widen", storage, layout)?,
            None => *x,
        });
    }
    let args: [Operand<'_, B::Storage>; N] = args
        .try_into()
        .unwrap_or_else(|_| unreachable!("one operand per input"));
    let out = call(args)?;
    if out.dtype() != DType::F32 {
        return Ok(out);
    }
    let whole = Layout::contiguous([out.len()]);
    backend.cast(Operand::new("narrow", &out, &whole)?, half)
}

/// A tensor-level op (a composite) on `inputs`, in f32 when the 16-bit rule says so.
fn composite<B: Backend, const N: usize, T: Narrow>(
    backend: &B,
    op: HalfOp,
    inputs: [Option<&Tensor<B>>; N],
    call: impl FnOnce([Option<&Tensor<B>>; N]) -> Result<T>,
) -> Result<T> {
    if to_widen(backend, op, inputs.iter().flatten().map(|t| t.dtype())).is_none() {
        return call(inputs);
    }
    in_f32(inputs, call).unwrap_or_else(|| unreachable!("a 16-bit dtype was found"))
}

// ----- primitives -----

/// [`Backend::unary`] under the 16-bit rule.
pub fn unary<B: Backend>(
    backend: &B,
    op: UnaryOp,
    x: Operand<'_, B::Storage>,
) -> Result<B::Storage> {
    primitive(backend, HalfOp::Unary, [x], |[x]| backend.unary(op, x))
}

/// [`Backend::binary`] under the 16-bit rule.
pub fn binary<B: Backend>(
    backend: &B,
    op: BinaryOp,
    xs: SameShape<'_, B::Storage, 2>,
) -> Result<B::Storage> {
    primitive(backend, HalfOp::Binary, xs.operands(), |xs| {
        backend.binary(op, SameShape::new(op.name(), xs)?)
    })
}

/// [`Backend::compare`] under the 16-bit rule.
pub fn compare<B: Backend>(
    backend: &B,
    op: CmpOp,
    xs: SameShape<'_, B::Storage, 2>,
) -> Result<B::Storage> {
    primitive(backend, HalfOp::Compare, xs.operands(), |xs| {
        backend.compare(op, SameShape::new(op.name(), xs)?)
    })
}

/// [`Backend::where_select`] under the 16-bit rule.
pub fn where_select<B: Backend>(
    backend: &B,
    xs: SameShape<'_, B::Storage, 3>,
) -> Result<B::Storage> {
    primitive(backend, HalfOp::WhereSelect, xs.operands(), |xs| {
        backend.where_select(SameShape::new("where", xs)?)
    })
}

/// [`Backend::reduce`] under the 16-bit rule.
pub fn reduce<B: Backend>(
    backend: &B,
    op: ReduceOp,
    x: Operand<'_, B::Storage>,
    axes: &[usize],
) -> Result<B::Storage> {
    primitive(backend, HalfOp::Reduce, [x], |[x]| {
        backend.reduce(op, x, axes)
    })
}

/// [`Backend::arg_reduce`] under the 16-bit rule.
pub fn arg_reduce<B: Backend>(
    backend: &B,
    op: ArgReduceOp,
    x: Operand<'_, B::Storage>,
    axis: usize,
) -> Result<B::Storage> {
    primitive(backend, HalfOp::ArgReduce, [x], |[x]| {
        backend.arg_reduce(op, x, axis)
    })
}

/// [`Backend::matmul`] under the 16-bit rule.
pub fn matmul<B: Backend>(backend: &B, xs: MatmulOperands<'_, B::Storage>) -> Result<B::Storage> {
    primitive(backend, HalfOp::Matmul, [xs.lhs, xs.rhs], |[l, r]| {
        backend.matmul(MatmulOperands::new(l, r)?)
    })
}

/// [`Backend::index_select`] under the 16-bit rule.
pub fn index_select<B: Backend>(
    backend: &B,
    xs: IndexSelect<'_, B::Storage>,
) -> Result<B::Storage> {
    let axis = xs.axis;
    primitive(backend, HalfOp::IndexSelect, [xs.x, xs.indices], |[x, i]| {
        backend.index_select(IndexSelect::new(x, axis, i)?)
    })
}

/// [`Backend::gather`] under the 16-bit rule.
pub fn gather<B: Backend>(backend: &B, xs: Gather<'_, B::Storage>) -> Result<B::Storage> {
    let axis = xs.axis;
    primitive(backend, HalfOp::Gather, [xs.x, xs.indices], |[x, i]| {
        backend.gather(Gather::new(x, axis, i)?)
    })
}

/// [`Backend::scatter_add`] under the 16-bit rule (the sums accumulate in f32 and are rounded
/// once).
pub fn scatter_add<B: Backend>(backend: &B, xs: ScatterAdd<'_, B::Storage>) -> Result<B::Storage> {
    let axis = xs.axis;
    primitive(
        backend,
        HalfOp::ScatterAdd,
        [xs.base, xs.indices, xs.src],
        |[b, i, s]| backend.scatter_add(ScatterAdd::new(b, axis, i, s)?),
    )
}

/// [`Backend::assign`] on a destination and a source given as storages and layouts, checked
/// into an [`Assignment`] (a memory op: no 16-bit rule).
pub fn assign<B: Backend>(
    backend: &B,
    dst: (&mut B::Storage, &Layout),
    src: (&B::Storage, &Layout),
    mode: crate::AssignMode,
) -> Result<()> {
    let dst = OperandMut::new("assign", dst.0, dst.1)?;
    let src = Operand::new("assign", src.0, src.1)?;
    backend.assign(Assignment::new("assign", dst, src)?, mode)
}

// ----- composites -----

/// The row-wise softmax-family op a call dispatches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowOp {
    /// [`Backend::softmax`].
    Softmax,
    /// [`Backend::log_softmax`].
    LogSoftmax,
    /// [`Backend::logsumexp`].
    LogSumExp,
}

/// [`Backend::softmax`], [`Backend::log_softmax`] or [`Backend::logsumexp`] under the 16-bit
/// rule.
pub fn softmax_family<B: Backend>(op: RowOp, x: &Tensor<B>, axis: usize) -> Result<Tensor<B>> {
    let backend = x.backend();
    composite(backend, HalfOp::Softmax, [Some(x)], |[x]| {
        let x = x.expect("given");
        match op {
            RowOp::Softmax => backend.softmax(x, axis),
            RowOp::LogSoftmax => backend.log_softmax(x, axis),
            RowOp::LogSumExp => backend.logsumexp(x, axis),
        }
    })
}

/// [`Backend::conv2d`] under the 16-bit rule.
pub fn conv2d<B: Backend>(
    x: &Tensor<B>,
    weight: &Tensor<B>,
    params: Conv2dParams,
) -> Result<Tensor<B>> {
    let backend = x.backend();
    composite(backend, HalfOp::Conv2d, [Some(x), Some(weight)], |[x, w]| {
        backend.conv2d(x.expect("given"), w.expect("given"), params)
    })
}

/// [`Backend::conv2d_backward_input`] under the 16-bit rule.
pub fn conv2d_backward_input<B: Backend>(
    grad_out: &Tensor<B>,
    weight: &Tensor<B>,
    input_dims: &[usize],
    params: Conv2dParams,
) -> Result<Tensor<B>> {
    let backend = grad_out.backend();
    let inputs = [Some(grad_out), Some(weight)];
    composite(backend, HalfOp::Conv2dBackward, inputs, |[g, w]| {
        backend.conv2d_backward_input(g.expect("given"), w.expect("given"), input_dims, params)
    })
}

/// [`Backend::conv2d_backward_weight`] under the 16-bit rule.
pub fn conv2d_backward_weight<B: Backend>(
    x: &Tensor<B>,
    grad_out: &Tensor<B>,
    weight_dims: &[usize],
    params: Conv2dParams,
) -> Result<Tensor<B>> {
    let backend = x.backend();
    let inputs = [Some(x), Some(grad_out)];
    composite(backend, HalfOp::Conv2dBackward, inputs, |[x, g]| {
        backend.conv2d_backward_weight(x.expect("given"), g.expect("given"), weight_dims, params)
    })
}

/// [`Backend::max_pool2d`] under the 16-bit rule (the window positions pass through).
pub fn max_pool2d<B: Backend>(
    x: &Tensor<B>,
    params: Pool2dParams,
) -> Result<(Tensor<B>, Tensor<B>)> {
    let backend = x.backend();
    composite(backend, HalfOp::Pool2d, [Some(x)], |[x]| {
        backend.max_pool2d(x.expect("given"), params)
    })
}

/// [`Backend::max_pool2d_backward`] under the 16-bit rule.
pub fn max_pool2d_backward<B: Backend>(
    grad_out: &Tensor<B>,
    window_argmax: &Tensor<B>,
    input_dims: &[usize],
    params: Pool2dParams,
) -> Result<Tensor<B>> {
    let backend = grad_out.backend();
    composite(backend, HalfOp::Pool2d, [Some(grad_out)], |[g]| {
        backend.max_pool2d_backward(g.expect("given"), window_argmax, input_dims, params)
    })
}

/// [`Backend::avg_pool2d`] under the 16-bit rule.
pub fn avg_pool2d<B: Backend>(x: &Tensor<B>, params: Pool2dParams) -> Result<Tensor<B>> {
    let backend = x.backend();
    composite(backend, HalfOp::Pool2d, [Some(x)], |[x]| {
        backend.avg_pool2d(x.expect("given"), params)
    })
}

/// [`Backend::avg_pool2d_backward`] under the 16-bit rule.
pub fn avg_pool2d_backward<B: Backend>(
    grad_out: &Tensor<B>,
    input_dims: &[usize],
    params: Pool2dParams,
) -> Result<Tensor<B>> {
    let backend = grad_out.backend();
    composite(backend, HalfOp::Pool2d, [Some(grad_out)], |[g]| {
        backend.avg_pool2d_backward(g.expect("given"), input_dims, params)
    })
}

/// [`Backend::scaled_dot_product_attention`] under the 16-bit rule (the log-sum-exp stays
/// f32).
pub fn attention<B: Backend>(
    inputs: AttentionInputs<'_, B>,
    params: &AttentionParams,
) -> Result<AttentionOutput<B>> {
    let backend = inputs.q.backend();
    let tensors = [Some(inputs.q), Some(inputs.k), Some(inputs.v), inputs.mask];
    composite(backend, HalfOp::Attention, tensors, |[q, k, v, mask]| {
        let inputs = AttentionInputs {
            q: q.expect("given"),
            k: k.expect("given"),
            v: v.expect("given"),
            mask,
        };
        backend.scaled_dot_product_attention(inputs, params)
    })
}

/// [`Backend::scaled_dot_product_attention_backward`] under the 16-bit rule. Widened, the
/// forward pass is run again in f32 for the output and log-sum-exp the backward pass reads
/// (see [`attention_backward_in_f32`]: the saved 16-bit output would cost the gradients of `q`
/// and `k` more than an ulp).
pub fn attention_backward<B: Backend>(
    grad_out: &Tensor<B>,
    inputs: AttentionInputs<'_, B>,
    forward: &AttentionOutput<B>,
    params: &AttentionParams,
) -> Result<AttentionGrads<B>> {
    let backend = grad_out.backend();
    let dtypes = [grad_out, inputs.q, inputs.k, inputs.v, &forward.out]
        .into_iter()
        .chain(inputs.mask)
        .map(|t| t.dtype());
    if to_widen(backend, HalfOp::AttentionBackward, dtypes).is_none() {
        return backend.scaled_dot_product_attention_backward(grad_out, inputs, forward, params);
    }
    attention_backward_in_f32(
        grad_out,
        inputs,
        forward,
        |inputs| backend.scaled_dot_product_attention(inputs, params),
        |g, inputs, forward| {
            backend.scaled_dot_product_attention_backward(g, inputs, forward, params)
        },
    )
    .unwrap_or_else(|| unreachable!("a 16-bit dtype was found"))
}

/// [`Backend::relu_backward`] under the 16-bit rule.
pub fn relu_backward<B: Backend>(x: &Tensor<B>, grad: &Tensor<B>) -> Result<Tensor<B>> {
    let backend = x.backend();
    composite(
        backend,
        HalfOp::ReluBackward,
        [Some(x), Some(grad)],
        |[x, g]| backend.relu_backward(x.expect("given"), g.expect("given")),
    )
}

/// [`Backend::gelu_backward`] under the 16-bit rule.
pub fn gelu_backward<B: Backend>(x: &Tensor<B>, grad: &Tensor<B>) -> Result<Tensor<B>> {
    let backend = x.backend();
    composite(
        backend,
        HalfOp::GeluBackward,
        [Some(x), Some(grad)],
        |[x, g]| backend.gelu_backward(x.expect("given"), g.expect("given")),
    )
}

/// [`Backend::matmul_bias`] under the 16-bit rule, which for this op runs the definition op
/// by op in a 16-bit dtype the backend does not declare (see [`HalfOp::MatmulBias`]).
pub fn matmul_bias<B: Backend>(
    lhs: &Tensor<B>,
    rhs: &Tensor<B>,
    bias: &Tensor<B>,
) -> Result<Tensor<B>> {
    let backend = lhs.backend();
    let dtypes = [lhs.dtype(), rhs.dtype(), bias.dtype()];
    if to_widen(backend, HalfOp::MatmulBias, dtypes).is_some() {
        return crate::composite::matmul_bias(lhs, rhs, bias);
    }
    backend.matmul_bias(lhs, rhs, bias)
}

/// [`Backend::cross_entropy`] under the 16-bit rule: 16-bit logits are widened, so the row
/// sums and log-sum-exp run in f32 and each row's loss is rounded once.
pub fn cross_entropy<B: Backend>(
    logits: &Tensor<B>,
    targets: &Tensor<B>,
    label_smoothing: f64,
) -> Result<Tensor<B>> {
    let backend = logits.backend();
    composite(
        backend,
        HalfOp::CrossEntropy,
        [Some(logits), Some(targets)],
        |[x, t]| backend.cross_entropy(x.expect("given"), t.expect("given"), label_smoothing),
    )
}

/// [`Backend::cross_entropy_backward`] under the 16-bit rule.
pub fn cross_entropy_backward<B: Backend>(
    logits: &Tensor<B>,
    targets: &Tensor<B>,
    grad: &Tensor<B>,
    label_smoothing: f64,
) -> Result<Tensor<B>> {
    let backend = logits.backend();
    composite(
        backend,
        HalfOp::CrossEntropyBackward,
        [Some(logits), Some(targets), Some(grad)],
        |[x, t, g]| {
            let (x, t, g) = (x.expect("given"), t.expect("given"), g.expect("given"));
            backend.cross_entropy_backward(x, t, g, label_smoothing)
        },
    )
}

/// [`Backend::layer_norm`] under the 16-bit rule (a widened input's statistics stay in f32).
pub fn layer_norm<B: Backend>(
    x: &Tensor<B>,
    weight: Option<&Tensor<B>>,
    bias: Option<&Tensor<B>>,
    eps: f64,
) -> Result<LayerNormOutput<B>> {
    let backend = x.backend();
    composite(
        backend,
        HalfOp::LayerNorm,
        [Some(x), weight, bias],
        |[x, w, b]| backend.layer_norm(x.expect("given"), w, b, eps),
    )
}

/// [`Backend::layer_norm_backward`] under the 16-bit rule.
pub fn layer_norm_backward<B: Backend>(
    grad: &Tensor<B>,
    x: &Tensor<B>,
    weight: Option<&Tensor<B>>,
    (mean, rstd): (&Tensor<B>, &Tensor<B>),
    with_bias: bool,
) -> Result<LayerNormGrads<B>> {
    let backend = x.backend();
    // The statistics do not decide the widening (a widened forward pass left them in f32):
    // the backend receives them in the dtype of the `x` it computes on.
    composite(
        backend,
        HalfOp::LayerNormBackward,
        [Some(grad), Some(x), weight],
        |[g, x, w]| {
            let x = x.expect("given");
            let (mean, rstd) = (mean.to_dtype(x.dtype())?, rstd.to_dtype(x.dtype())?);
            backend.layer_norm_backward(g.expect("given"), x, w, (&mean, &rstd), with_bias)
        },
    )
}

/// [`Backend::adam_update`] under the 16-bit rule (the moments are updated in f32 and each
/// result rounded once).
pub fn adam_update<B: Backend>(
    param: &Tensor<B>,
    grad: &Tensor<B>,
    (exp_avg, exp_avg_sq): (&Tensor<B>, &Tensor<B>),
    max_exp_avg_sq: Option<&Tensor<B>>,
    update: AdamUpdate,
) -> Result<AdamTensors<B>> {
    let backend = param.backend();
    let inputs = [
        Some(param),
        Some(grad),
        Some(exp_avg),
        Some(exp_avg_sq),
        max_exp_avg_sq,
    ];
    composite(backend, HalfOp::AdamUpdate, inputs, |[p, g, m, v, vmax]| {
        let (p, g) = (p.expect("given"), g.expect("given"));
        let (m, v) = (m.expect("given"), v.expect("given"));
        backend.adam_update(p, g, m, v, vmax, update)
    })
}
