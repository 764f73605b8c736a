//! The [`Cpu`] backend: the [`Backend`] implementation that dispatches to the kernels.

use crate::checks::unsupported;
use crate::kernels::softmax::{self, RowOp};
use crate::kernels::{
    arg_reduce, binary, cast, compare, copy, fill, gather, gemm_bf16, index_select, matmul, random,
    reduce, scatter_add, select, unary,
};
use crate::storage::map_storage;
use crate::CpuStorage;
use crate::{attention_ops, cross_entropy_ops, fused_ops, layer_norm_ops, matmul_bias_ops, nn_ops};
use tessera_core::attention::{AttentionGrads, AttentionInputs, AttentionOutput, AttentionParams};
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::dispatch::{self, HalfOp};
use tessera_core::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape, ScatterAdd,
};
use tessera_core::{
    composite, ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, HostData, LayerNormGrads, LayerNormOutput, Layout, Pool2dParams, ReduceOp,
    Result, Tensor, UnaryOp,
};

/// The CPU device: computes eagerly on the host with `rayon` threads and `matrixmultiply` GEMM.
/// It is the reference the other backends are tested against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cpu;

impl Default for Cpu {
    fn default() -> Self {
        Cpu::new()
    }
}

impl Cpu {
    /// The CPU backend (a unit value; every `Cpu` is the same device). Creating one has no
    /// process-wide effect; see [`crate::tune_allocator`] for the opt-in allocator tuning and
    /// [`crate::join_thread_pool`] for the opt-in thread set-up that training programs want.
    pub fn new() -> Self {
        Cpu
    }
}

impl Backend for Cpu {
    type Storage = CpuStorage;

    fn name(&self) -> &'static str {
        "cpu"
    }

    fn device(&self) -> Device {
        Device {
            kind: "cpu",
            ordinal: 0,
        }
    }

    fn supports_dtype(&self, _dtype: DType) -> bool {
        true
    }

    fn upload(&self, data: HostData) -> Result<CpuStorage> {
        CpuStorage::from_host(data)
    }

    fn computes_16_bit(&self, op: HalfOp, dtype: DType) -> bool {
        // The bf16 GEMMs of `kernels::gemm_amx` / `kernels::gemm_bf16` (on CPUs without
        // either, `matmul` below widens), the convolutions built on them where present, and
        // the element-wise maps, which read bf16 into f32 lanes and round each result once
        // (`kernels::lanes`: one pass instead of widen, compute, round); and attention in
        // either 16-bit dtype, whose backward pass then needs no second forward pass
        // (`attention_ops`); and the selections (`index_select`, `gather`, `where`), which
        // compute nothing and copy the stored 16 bits (widened, an embedding lookup converted
        // the whole table on every call); and bf16 pooling, one plane at a time through f32
        // (`kernels::pool_bf16`), and bf16 reductions, read as f32 and rounded once
        // (`kernels::reduce`).
        (dtype.is_half()
            && matches!(
                op,
                HalfOp::Attention
                    | HalfOp::AttentionBackward
                    | HalfOp::IndexSelect
                    | HalfOp::Gather
                    | HalfOp::WhereSelect
            ))
            || dtype == DType::BF16
                && (matches!(
                    op,
                    HalfOp::Matmul
                        | HalfOp::Unary
                        | HalfOp::Binary
                        | HalfOp::GeluBackward
                        | HalfOp::ReluBackward
                        | HalfOp::Pool2d
                        | HalfOp::Reduce
                ) || (matches!(op, HalfOp::Conv2d | HalfOp::Conv2dBackward)
                    && nn_ops::bf16_convolutions()))
    }

    fn download(&self, x: Operand<'_, CpuStorage>) -> Result<HostData> {
        Ok(map_storage!(x.storage(), v => copy::copy_strided(v, x.layout())?).into_host())
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<CpuStorage> {
        Ok(match dtype {
            DType::F32 => CpuStorage::F32(fill::full(numel, value)?),
            DType::F64 => CpuStorage::F64(fill::full(numel, value)?),
            DType::I64 => CpuStorage::I64(fill::full(numel, value)?),
            DType::Bool => CpuStorage::Bool(fill::full(numel, value)?),
            DType::F16 => CpuStorage::F16(fill::full(numel, value)?),
            DType::BF16 => CpuStorage::BF16(fill::full(numel, value)?),
            other => return Err(unsupported("full", other)),
        })
    }

    fn copy_strided(&self, x: Operand<'_, CpuStorage>) -> Result<CpuStorage> {
        Ok(map_storage!(x.storage(), v => copy::copy_strided(v, x.layout())?))
    }

    fn assign(&self, to: Assignment<'_, CpuStorage>, mode: AssignMode) -> Result<()> {
        let Assignment { mut dst, src } = to;
        let (storage, layout) = dst.parts();
        copy::assign_storage(storage, layout, src.storage(), src.layout(), mode)
    }

    fn cast(&self, x: Operand<'_, CpuStorage>, dtype: DType) -> Result<CpuStorage> {
        cast::cast(x.storage(), x.layout(), dtype)
    }

    fn unary(&self, op: UnaryOp, x: Operand<'_, CpuStorage>) -> Result<CpuStorage> {
        unary::unary(op, x.storage(), x.layout())
    }

    fn binary(&self, op: BinaryOp, xs: SameShape<'_, CpuStorage, 2>) -> Result<CpuStorage> {
        let [a, b] = xs.operands();
        binary::binary(op, a.storage(), a.layout(), b.storage(), b.layout())
    }

    fn compare(&self, op: CmpOp, xs: SameShape<'_, CpuStorage, 2>) -> Result<CpuStorage> {
        let [a, b] = xs.operands();
        compare::compare(op, a.storage(), a.layout(), b.storage(), b.layout())
    }

    fn where_select(&self, xs: SameShape<'_, CpuStorage, 3>) -> Result<CpuStorage> {
        let [c, t, f] = xs.operands();
        select::where_select(
            c.storage(),
            c.layout(),
            t.storage(),
            t.layout(),
            f.storage(),
            f.layout(),
        )
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: Operand<'_, CpuStorage>,
        axes: &[usize],
    ) -> Result<CpuStorage> {
        reduce::reduce(op, x.storage(), x.layout(), axes)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: Operand<'_, CpuStorage>,
        axis: usize,
    ) -> Result<CpuStorage> {
        arg_reduce::arg_reduce(op, x.storage(), x.layout(), axis)
    }

    fn matmul(&self, xs: MatmulOperands<'_, CpuStorage>) -> Result<CpuStorage> {
        let (l, r) = (xs.lhs, xs.rhs);
        if let Some(out) = gemm_bf16::try_matmul(l.storage(), l.layout(), r.storage(), r.layout())?
        {
            return Ok(out);
        }
        // bf16 products the GEMM above does not take are widened to f32 here (see
        // `computes_16_bit`); every other 16-bit op is widened by tensor-core's dispatch.
        dispatch::storage_in_f32(self, [l, r], |[a, b]| {
            matmul::matmul(a.storage(), a.layout(), b.storage(), b.layout())
        })
    }

    fn index_select(&self, xs: IndexSelect<'_, CpuStorage>) -> Result<CpuStorage> {
        let (x, i) = (xs.x, xs.indices);
        index_select::index_select(x.storage(), x.layout(), xs.axis, i.storage(), i.layout())
    }

    fn gather(&self, xs: Gather<'_, CpuStorage>) -> Result<CpuStorage> {
        let (x, i) = (xs.x, xs.indices);
        gather::gather(x.storage(), x.layout(), xs.axis, i.storage(), i.layout())
    }

    fn scatter_add(&self, xs: ScatterAdd<'_, CpuStorage>) -> Result<CpuStorage> {
        let (b, i, s) = (xs.base, xs.indices, xs.src);
        scatter_add::scatter_add(
            b.storage(),
            b.layout(),
            xs.axis,
            i.storage(),
            i.layout(),
            s.storage(),
            s.layout(),
        )
    }

    fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<CpuStorage> {
        random::random(dist, numel, dtype, seed, offset)
    }

    // ----- fused composites (called in f32 for 16-bit tensors: see `computes_16_bit`) -----

    fn softmax(&self, x: &Tensor<Cpu>, axis: usize) -> Result<Tensor<Cpu>> {
        match fused_rows(RowOp::Softmax, x, axis)? {
            Some(t) => Ok(t),
            None => composite::softmax(x, axis),
        }
    }

    fn log_softmax(&self, x: &Tensor<Cpu>, axis: usize) -> Result<Tensor<Cpu>> {
        match fused_rows(RowOp::LogSoftmax, x, axis)? {
            Some(t) => Ok(t),
            None => composite::log_softmax(x, axis),
        }
    }

    fn logsumexp(&self, x: &Tensor<Cpu>, axis: usize) -> Result<Tensor<Cpu>> {
        match fused_rows(RowOp::LogSumExp, x, axis)? {
            Some(t) => Ok(t),
            None => composite::logsumexp(x, axis),
        }
    }

    fn conv2d(
        &self,
        x: &Tensor<Cpu>,
        weight: &Tensor<Cpu>,
        params: Conv2dParams,
    ) -> Result<Tensor<Cpu>> {
        match nn_ops::conv2d(x, weight, params)? {
            Some(t) => Ok(t),
            None => composite::conv2d(x, weight, params),
        }
    }

    fn conv2d_backward_input(
        &self,
        grad_out: &Tensor<Cpu>,
        weight: &Tensor<Cpu>,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Cpu>> {
        match nn_ops::conv2d_backward_input(grad_out, weight, input_dims, params)? {
            Some(t) => Ok(t),
            None => composite::conv2d_backward_input(grad_out, weight, input_dims, params),
        }
    }

    fn conv2d_backward_weight(
        &self,
        x: &Tensor<Cpu>,
        grad_out: &Tensor<Cpu>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Cpu>> {
        match nn_ops::conv2d_backward_weight(x, grad_out, weight_dims, params)? {
            Some(t) => Ok(t),
            None => composite::conv2d_backward_weight(x, grad_out, weight_dims, params),
        }
    }

    fn max_pool2d(
        &self,
        x: &Tensor<Cpu>,
        params: Pool2dParams,
    ) -> Result<(Tensor<Cpu>, Tensor<Cpu>)> {
        match nn_ops::max_pool2d(x, params)? {
            Some(pair) => Ok(pair),
            None => composite::max_pool2d(x, params),
        }
    }

    fn max_pool2d_backward(
        &self,
        grad_out: &Tensor<Cpu>,
        window_argmax: &Tensor<Cpu>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Cpu>> {
        match nn_ops::max_pool2d_backward(grad_out, window_argmax, input_dims, params)? {
            Some(t) => Ok(t),
            None => composite::max_pool2d_backward(grad_out, window_argmax, input_dims, params),
        }
    }

    fn avg_pool2d(&self, x: &Tensor<Cpu>, params: Pool2dParams) -> Result<Tensor<Cpu>> {
        match nn_ops::avg_pool2d(x, params)? {
            Some(t) => Ok(t),
            None => composite::avg_pool2d(x, params),
        }
    }

    fn avg_pool2d_backward(
        &self,
        grad_out: &Tensor<Cpu>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Cpu>> {
        match nn_ops::avg_pool2d_backward(grad_out, input_dims, params)? {
            Some(t) => Ok(t),
            None => composite::avg_pool2d_backward(grad_out, input_dims, params),
        }
    }

    fn scaled_dot_product_attention(
        &self,
        inputs: AttentionInputs<'_, Cpu>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Cpu>> {
        let AttentionInputs { q, k, v, mask } = inputs;
        tessera_core::attention::check_attention_operands(q, k, v, mask, params)?;
        match attention_ops::attention(q, k, v, mask, params)? {
            Some(out) => Ok(out),
            None => composite::scaled_dot_product_attention(inputs, params),
        }
    }

    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Cpu>,
        inputs: AttentionInputs<'_, Cpu>,
        forward: &AttentionOutput<Cpu>,
        params: &AttentionParams,
    ) -> Result<AttentionGrads<Cpu>> {
        let AttentionInputs { q, k, v, mask } = inputs;
        let qkv = (q, k, v);
        tessera_core::attention::check_attention_backward_operands(
            grad_out, qkv, mask, forward, params,
        )?;
        match attention_ops::attention_backward(grad_out, qkv, mask, forward, params)? {
            Some(grads) => Ok(grads),
            None => {
                composite::scaled_dot_product_attention_backward(grad_out, inputs, forward, params)
            }
        }
    }

    fn relu_backward(&self, x: &Tensor<Cpu>, grad: &Tensor<Cpu>) -> Result<Tensor<Cpu>> {
        match fused_ops::relu_backward(x, grad)? {
            Some(t) => Ok(t),
            None => composite::relu_backward(x, grad),
        }
    }

    fn gelu_backward(&self, x: &Tensor<Cpu>, grad: &Tensor<Cpu>) -> Result<Tensor<Cpu>> {
        match fused_ops::gelu_backward(x, grad)? {
            Some(t) => Ok(t),
            None => composite::gelu_backward(x, grad),
        }
    }

    fn matmul_bias(
        &self,
        lhs: &Tensor<Cpu>,
        rhs: &Tensor<Cpu>,
        bias: &Tensor<Cpu>,
    ) -> Result<Tensor<Cpu>> {
        match matmul_bias_ops::matmul_bias(lhs, rhs, bias)? {
            Some(t) => Ok(t),
            None => composite::matmul_bias(lhs, rhs, bias),
        }
    }

    fn cross_entropy(
        &self,
        logits: &Tensor<Cpu>,
        targets: &Tensor<Cpu>,
        label_smoothing: f64,
    ) -> Result<Tensor<Cpu>> {
        match cross_entropy_ops::cross_entropy(logits, targets, label_smoothing)? {
            Some(t) => Ok(t),
            None => composite::cross_entropy(logits, targets, label_smoothing),
        }
    }

    fn cross_entropy_backward(
        &self,
        logits: &Tensor<Cpu>,
        targets: &Tensor<Cpu>,
        grad: &Tensor<Cpu>,
        label_smoothing: f64,
    ) -> Result<Tensor<Cpu>> {
        match cross_entropy_ops::cross_entropy_backward(logits, targets, grad, label_smoothing)? {
            Some(t) => Ok(t),
            None => composite::cross_entropy_backward(logits, targets, grad, label_smoothing),
        }
    }

    fn layer_norm(
        &self,
        x: &Tensor<Cpu>,
        weight: Option<&Tensor<Cpu>>,
        bias: Option<&Tensor<Cpu>>,
        eps: f64,
    ) -> Result<LayerNormOutput<Cpu>> {
        match layer_norm_ops::layer_norm(x, weight, bias, eps)? {
            Some(out) => Ok(out),
            None => composite::layer_norm(x, weight, bias, eps),
        }
    }

    fn layer_norm_backward(
        &self,
        grad: &Tensor<Cpu>,
        x: &Tensor<Cpu>,
        weight: Option<&Tensor<Cpu>>,
        stats: (&Tensor<Cpu>, &Tensor<Cpu>),
        with_bias: bool,
    ) -> Result<LayerNormGrads<Cpu>> {
        match layer_norm_ops::layer_norm_backward(grad, x, weight, stats, with_bias)? {
            Some(grads) => Ok(grads),
            None => composite::layer_norm_backward(grad, x, weight, stats, with_bias),
        }
    }

    fn adam_update(
        &self,
        param: &Tensor<Cpu>,
        grad: &Tensor<Cpu>,
        exp_avg: &Tensor<Cpu>,
        exp_avg_sq: &Tensor<Cpu>,
        max_exp_avg_sq: Option<&Tensor<Cpu>>,
        update: AdamUpdate,
    ) -> Result<AdamTensors<Cpu>> {
        match fused_ops::adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)? {
            Some(t) => Ok(t),
            None => {
                composite::adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
            }
        }
    }
}

/// The fused last-axis kernel for `op` wrapped as a tensor, or `None` when the composite
/// default must run instead.
fn fused_rows(op: RowOp, x: &Tensor<Cpu>, axis: usize) -> Result<Option<Tensor<Cpu>>> {
    let Some(storage) = softmax::last_axis(op, x.storage(), x.layout(), axis) else {
        return Ok(None);
    };
    let storage = storage?;
    let mut dims = x.dims().to_vec();
    if op == RowOp::LogSumExp {
        dims[axis] = 1;
    }
    Tensor::from_parts(x.backend(), storage, Layout::contiguous(dims)).map(Some)
}
