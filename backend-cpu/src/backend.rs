//! The [`Cpu`] backend: the [`Backend`] implementation that dispatches to the kernels.

use crate::checks::{check_storage, unsupported};
use crate::half_ops::primitive_in_f32;
use crate::kernels::softmax::{self, RowOp};
use crate::kernels::{
    arg_reduce, binary, cast, compare, copy, fill, gather, gemm_bf16, index_select, matmul, random,
    reduce, scatter_add, select, unary,
};
use crate::storage::map_storage;
use crate::CpuStorage;
use crate::{attention_ops, fused_ops, nn_ops};
use tessera_core::attention::{AttentionGrads, AttentionOutput, AttentionParams};
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::composite::in_f32;
use tessera_core::{
    composite, ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, HostData, Layout, Pool2dParams, ReduceOp, Result, Tensor, UnaryOp,
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
    /// process-wide effect; see [`crate::tune_allocator`] for the opt-in allocator tuning that
    /// training programs want.
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

    fn download(&self, storage: &CpuStorage, layout: &Layout) -> Result<HostData> {
        check_storage("download", storage, layout)?;
        Ok(map_storage!(storage, v => copy::copy_strided(v, layout)?).into_host())
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

    fn copy_strided(&self, storage: &CpuStorage, layout: &Layout) -> Result<CpuStorage> {
        check_storage("copy_strided", storage, layout)?;
        Ok(map_storage!(storage, v => copy::copy_strided(v, layout)?))
    }

    fn assign(
        &self,
        dst: &mut CpuStorage,
        dst_layout: &Layout,
        src: &CpuStorage,
        src_layout: &Layout,
        mode: AssignMode,
    ) -> Result<()> {
        check_storage("assign", dst, dst_layout)?;
        check_storage("assign", src, src_layout)?;
        dst_layout.check_same_shape("assign", src_layout)?;
        copy::assign_storage(dst, dst_layout, src, src_layout, mode)
    }

    fn cast(&self, storage: &CpuStorage, layout: &Layout, dtype: DType) -> Result<CpuStorage> {
        check_storage("cast", storage, layout)?;
        cast::cast(storage, layout, dtype)
    }

    fn unary(&self, op: UnaryOp, x: &CpuStorage, layout: &Layout) -> Result<CpuStorage> {
        check_storage(op.name(), x, layout)?;
        primitive_in_f32([(x, layout)], |[(x, l)]| unary::unary(op, x, l))
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &CpuStorage,
        lhs_layout: &Layout,
        rhs: &CpuStorage,
        rhs_layout: &Layout,
    ) -> Result<CpuStorage> {
        check_storage(op.name(), lhs, lhs_layout)?;
        check_storage(op.name(), rhs, rhs_layout)?;
        lhs_layout.check_same_shape(op.name(), rhs_layout)?;
        primitive_in_f32(
            [(lhs, lhs_layout), (rhs, rhs_layout)],
            |[(a, la), (b, lb)]| binary::binary(op, a, la, b, lb),
        )
    }

    fn compare(
        &self,
        op: CmpOp,
        lhs: &CpuStorage,
        lhs_layout: &Layout,
        rhs: &CpuStorage,
        rhs_layout: &Layout,
    ) -> Result<CpuStorage> {
        check_storage(op.name(), lhs, lhs_layout)?;
        check_storage(op.name(), rhs, rhs_layout)?;
        lhs_layout.check_same_shape(op.name(), rhs_layout)?;
        primitive_in_f32(
            [(lhs, lhs_layout), (rhs, rhs_layout)],
            |[(a, la), (b, lb)]| compare::compare(op, a, la, b, lb),
        )
    }

    fn where_select(
        &self,
        cond: &CpuStorage,
        cond_layout: &Layout,
        on_true: &CpuStorage,
        true_layout: &Layout,
        on_false: &CpuStorage,
        false_layout: &Layout,
    ) -> Result<CpuStorage> {
        check_storage("where", cond, cond_layout)?;
        check_storage("where", on_true, true_layout)?;
        check_storage("where", on_false, false_layout)?;
        cond_layout.check_same_shape("where", true_layout)?;
        cond_layout.check_same_shape("where", false_layout)?;
        primitive_in_f32(
            [
                (cond, cond_layout),
                (on_true, true_layout),
                (on_false, false_layout),
            ],
            |[(c, lc), (t, lt), (f, lf)]| select::where_select(c, lc, t, lt, f, lf),
        )
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: &CpuStorage,
        layout: &Layout,
        axes: &[usize],
    ) -> Result<CpuStorage> {
        check_storage(op.name(), x, layout)?;
        primitive_in_f32([(x, layout)], |[(x, l)]| reduce::reduce(op, x, l, axes))
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &CpuStorage,
        layout: &Layout,
        axis: usize,
    ) -> Result<CpuStorage> {
        check_storage(op.name(), x, layout)?;
        primitive_in_f32([(x, layout)], |[(x, l)]| {
            arg_reduce::arg_reduce(op, x, l, axis)
        })
    }

    fn matmul(
        &self,
        lhs: &CpuStorage,
        lhs_layout: &Layout,
        rhs: &CpuStorage,
        rhs_layout: &Layout,
    ) -> Result<CpuStorage> {
        check_storage("matmul", lhs, lhs_layout)?;
        check_storage("matmul", rhs, rhs_layout)?;
        if let Some(out) = gemm_bf16::try_matmul(lhs, lhs_layout, rhs, rhs_layout)? {
            return Ok(out);
        }
        primitive_in_f32(
            [(lhs, lhs_layout), (rhs, rhs_layout)],
            |[(a, la), (b, lb)]| matmul::matmul(a, la, b, lb),
        )
    }

    fn index_select(
        &self,
        x: &CpuStorage,
        layout: &Layout,
        axis: usize,
        indices: &CpuStorage,
        indices_layout: &Layout,
    ) -> Result<CpuStorage> {
        check_storage("index_select", x, layout)?;
        check_storage("index_select", indices, indices_layout)?;
        primitive_in_f32(
            [(x, layout), (indices, indices_layout)],
            |[(x, l), (i, li)]| index_select::index_select(x, l, axis, i, li),
        )
    }

    fn gather(
        &self,
        x: &CpuStorage,
        layout: &Layout,
        axis: usize,
        indices: &CpuStorage,
        indices_layout: &Layout,
    ) -> Result<CpuStorage> {
        check_storage("gather", x, layout)?;
        check_storage("gather", indices, indices_layout)?;
        primitive_in_f32(
            [(x, layout), (indices, indices_layout)],
            |[(x, l), (i, li)]| gather::gather(x, l, axis, i, li),
        )
    }

    fn scatter_add(
        &self,
        base: &CpuStorage,
        base_layout: &Layout,
        axis: usize,
        indices: &CpuStorage,
        indices_layout: &Layout,
        src: &CpuStorage,
        src_layout: &Layout,
    ) -> Result<CpuStorage> {
        check_storage("scatter_add", base, base_layout)?;
        check_storage("scatter_add", indices, indices_layout)?;
        check_storage("scatter_add", src, src_layout)?;
        primitive_in_f32(
            [
                (base, base_layout),
                (indices, indices_layout),
                (src, src_layout),
            ],
            |[(b, lb), (i, li), (s, ls)]| scatter_add::scatter_add(b, lb, axis, i, li, s, ls),
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

    // ----- fused composites -----

    fn softmax(&self, x: &Tensor<Cpu>, axis: usize) -> Result<Tensor<Cpu>> {
        if let Some(out) = in_f32([Some(x)], |[x]| self.softmax(x.unwrap(), axis)) {
            return out;
        }
        match fused_rows(RowOp::Softmax, x, axis)? {
            Some(t) => Ok(t),
            None => composite::softmax(x, axis),
        }
    }

    fn log_softmax(&self, x: &Tensor<Cpu>, axis: usize) -> Result<Tensor<Cpu>> {
        if let Some(out) = in_f32([Some(x)], |[x]| self.log_softmax(x.unwrap(), axis)) {
            return out;
        }
        match fused_rows(RowOp::LogSoftmax, x, axis)? {
            Some(t) => Ok(t),
            None => composite::log_softmax(x, axis),
        }
    }

    fn logsumexp(&self, x: &Tensor<Cpu>, axis: usize) -> Result<Tensor<Cpu>> {
        if let Some(out) = in_f32([Some(x)], |[x]| self.logsumexp(x.unwrap(), axis)) {
            return out;
        }
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
        if let Some(out) = in_f32([Some(x), Some(weight)], |[x, w]| {
            self.conv2d(x.unwrap(), w.unwrap(), params)
        }) {
            return out;
        }
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
        if let Some(out) = in_f32([Some(grad_out), Some(weight)], |[g, w]| {
            self.conv2d_backward_input(g.unwrap(), w.unwrap(), input_dims, params)
        }) {
            return out;
        }
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
        if let Some(out) = in_f32([Some(x), Some(grad_out)], |[x, g]| {
            self.conv2d_backward_weight(x.unwrap(), g.unwrap(), weight_dims, params)
        }) {
            return out;
        }
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
        if let Some(out) = in_f32([Some(x)], |[x]| self.max_pool2d(x.unwrap(), params)) {
            return out;
        }
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
        if let Some(out) = in_f32([Some(grad_out)], |[g]| {
            self.max_pool2d_backward(g.unwrap(), window_argmax, input_dims, params)
        }) {
            return out;
        }
        match nn_ops::max_pool2d_backward(grad_out, window_argmax, input_dims, params)? {
            Some(t) => Ok(t),
            None => composite::max_pool2d_backward(grad_out, window_argmax, input_dims, params),
        }
    }

    fn avg_pool2d(&self, x: &Tensor<Cpu>, params: Pool2dParams) -> Result<Tensor<Cpu>> {
        if let Some(out) = in_f32([Some(x)], |[x]| self.avg_pool2d(x.unwrap(), params)) {
            return out;
        }
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
        if let Some(out) = in_f32([Some(grad_out)], |[g]| {
            self.avg_pool2d_backward(g.unwrap(), input_dims, params)
        }) {
            return out;
        }
        match nn_ops::avg_pool2d_backward(grad_out, input_dims, params)? {
            Some(t) => Ok(t),
            None => composite::avg_pool2d_backward(grad_out, input_dims, params),
        }
    }

    fn scaled_dot_product_attention(
        &self,
        q: &Tensor<Cpu>,
        k: &Tensor<Cpu>,
        v: &Tensor<Cpu>,
        mask: Option<&Tensor<Cpu>>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Cpu>> {
        tessera_core::attention::check_attention_operands(q, k, v, mask, params)?;
        if let Some(out) = in_f32([Some(q), Some(k), Some(v), mask], |[q, k, v, m]| {
            self.scaled_dot_product_attention(q.unwrap(), k.unwrap(), v.unwrap(), m, params)
        }) {
            return out;
        }
        match attention_ops::attention(q, k, v, mask, params)? {
            Some(out) => Ok(out),
            None => composite::scaled_dot_product_attention(q, k, v, mask, params),
        }
    }

    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Cpu>,
        q: &Tensor<Cpu>,
        k: &Tensor<Cpu>,
        v: &Tensor<Cpu>,
        mask: Option<&Tensor<Cpu>>,
        forward: &AttentionOutput<Cpu>,
        params: &AttentionParams,
    ) -> Result<AttentionGrads<Cpu>> {
        tessera_core::attention::check_attention_backward_operands(
            grad_out,
            (q, k, v),
            mask,
            forward,
            params,
        )?;
        let widened = composite::attention_backward_in_f32(
            grad_out,
            (q, k, v),
            mask,
            forward,
            |(q, k, v), m| self.scaled_dot_product_attention(q, k, v, m, params),
            |g, (q, k, v), m, f| {
                self.scaled_dot_product_attention_backward(g, q, k, v, m, f, params)
            },
        );
        if let Some(out) = widened {
            return out;
        }
        match attention_ops::attention_backward(grad_out, (q, k, v), mask, forward, params)? {
            Some(grads) => Ok(grads),
            None => composite::scaled_dot_product_attention_backward(
                grad_out, q, k, v, mask, forward, params,
            ),
        }
    }

    fn relu_backward(&self, x: &Tensor<Cpu>, grad: &Tensor<Cpu>) -> Result<Tensor<Cpu>> {
        if let Some(out) = in_f32([Some(x), Some(grad)], |[x, g]| {
            self.relu_backward(x.unwrap(), g.unwrap())
        }) {
            return out;
        }
        match fused_ops::relu_backward(x, grad)? {
            Some(t) => Ok(t),
            None => composite::relu_backward(x, grad),
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
        let inputs = [
            Some(param),
            Some(grad),
            Some(exp_avg),
            Some(exp_avg_sq),
            max_exp_avg_sq,
        ];
        if let Some(out) = in_f32(inputs, |[p, g, m, v, vmax]| {
            let (p, g, m, v) = (p.unwrap(), g.unwrap(), m.unwrap(), v.unwrap());
            self.adam_update(p, g, m, v, vmax, update)
        }) {
            return out;
        }
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
    check_storage("softmax", x.storage(), x.layout())?;
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
