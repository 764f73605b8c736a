//! The [`tessera_core::Backend`] of every GPU backend, written once: `impl<D: Driver> Backend for
//! Gpu<D>`. Each primitive checks its operands (they live on this device, their layouts stay
//! inside their storages, the dtype is one the device computes in), then runs the op of
//! `crate::ops`. Softmax, log-softmax and log-sum-exp use the fused kernel where it applies,
//! conv2d and its weight gradient im2col plus the GEMM; every other composite keeps
//! tensor-core's default.
//!
//! The 16-bit floats: primitives run their 16-bit kernels (u16 storage, f32 arithmetic, one
//! rounding per result). Composites that would otherwise chain several 16-bit roundings (the
//! conv gradients, pooling, attention, Adam, softmax off the last axis) run in f32 between
//! casts through [`composite::in_f32`], as on the CPU, so their error is one 16-bit rounding
//! too; conv2d runs natively (im2col is exact and the GEMM accumulates in f32).

use crate::checks::check_operand;
use crate::driver::Driver;
use crate::gpu::Gpu;
use crate::ops::softmax::RowOp;
use crate::ops::{
    attention, conv, elementwise, indexing, matmul, random, reduce, softmax, transfer,
};
use crate::storage::GpuStorage;
use tessera_core::attention::{AttentionGrads, AttentionOutput, AttentionParams};
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::composite::in_f32;
use tessera_core::{
    composite, ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, Error, HostData, Layout, Pool2dParams, ReduceOp, Result, Tensor, UnaryOp,
};

impl<D: Driver> Gpu<D> {
    /// Errors unless `storage` lives on this device and `layout` stays inside it.
    fn check(&self, op: &'static str, storage: &GpuStorage<D>, layout: &Layout) -> Result<()> {
        check_operand(op, self.runtime(), storage, layout)
    }

    /// Errors unless the device computes in `dtype`.
    fn check_dtype(&self, op: &'static str, dtype: DType) -> Result<()> {
        if self.supports_dtype(dtype) {
            Ok(())
        } else {
            Err(Error::UnsupportedDType { op, dtype })
        }
    }

    /// The im2col columns of `x` for a kernel and output size, as a tensor.
    fn columns(
        &self,
        x: &Tensor<Self>,
        kernel: (usize, usize),
        params: Conv2dParams,
        out_hw: (usize, usize),
    ) -> Result<Tensor<Self>> {
        self.check("conv2d", x.storage(), x.layout())?;
        let (storage, layout) = conv::im2col(
            self.runtime(),
            x.storage(),
            x.layout(),
            kernel,
            params,
            out_hw,
        )?;
        Tensor::from_parts(self, storage, layout)
    }

    /// The fused row kernel for `op` on `x`, or `fallback` (the composite) where it does not
    /// apply.
    fn fused_rows(
        &self,
        op: RowOp,
        x: &Tensor<Self>,
        axis: usize,
        fallback: fn(&Tensor<Self>, usize) -> Result<Tensor<Self>>,
    ) -> Result<Tensor<Self>> {
        self.check("softmax", x.storage(), x.layout())?;
        match softmax::last_axis(self.runtime(), op, x.storage(), x.layout(), axis)? {
            Some((storage, layout)) => Tensor::from_parts(self, storage, layout),
            None => in_f32([Some(x)], |[x]| fallback(x.unwrap(), axis))
                .unwrap_or_else(|| fallback(x, axis)),
        }
    }
}

impl<D: Driver> Backend for Gpu<D> {
    type Storage = GpuStorage<D>;

    fn name(&self) -> &'static str {
        self.runtime().backend()
    }

    fn device(&self) -> Device {
        Device {
            kind: self.runtime().backend(),
            ordinal: self.runtime().info().ordinal,
        }
    }

    /// f32, f16, bf16, i64 and bool always; f64 where the device computes in it
    /// ([`crate::DriverInfo::supports_f64`]: OpenCL devices with `cl_khr_fp64`, every CUDA
    /// device). Every op on an unsupported dtype is [`Error::UnsupportedDType`].
    /// The 16-bit floats are stored in 16 bits and computed in f32 on every device (no
    /// `cl_khr_fp16` needed; see `kernels/half.cl.c`).
    fn supports_dtype(&self, dtype: DType) -> bool {
        crate::runtime::has_kernels(dtype)
            && (dtype != DType::F64 || self.runtime().info().supports_f64)
    }

    fn upload(&self, data: HostData) -> Result<GpuStorage<D>> {
        self.check_dtype("upload", data.dtype())?;
        self.runtime().upload(&data)
    }

    fn download(&self, storage: &GpuStorage<D>, layout: &Layout) -> Result<HostData> {
        self.check("download", storage, layout)?;
        transfer::download(self.runtime(), storage, layout)
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<GpuStorage<D>> {
        self.check_dtype("full", dtype)?;
        transfer::full(self.runtime(), numel, dtype, value)
    }

    fn copy_strided(&self, storage: &GpuStorage<D>, layout: &Layout) -> Result<GpuStorage<D>> {
        self.check("copy_strided", storage, layout)?;
        elementwise::copy_strided(self.runtime(), storage, layout)
    }

    fn assign(
        &self,
        dst: &mut GpuStorage<D>,
        dst_layout: &Layout,
        src: &GpuStorage<D>,
        src_layout: &Layout,
        mode: AssignMode,
    ) -> Result<()> {
        self.check("assign", dst, dst_layout)?;
        self.check("assign", src, src_layout)?;
        elementwise::assign(self.runtime(), dst, dst_layout, src, src_layout, mode)
    }

    fn cast(
        &self,
        storage: &GpuStorage<D>,
        layout: &Layout,
        dtype: DType,
    ) -> Result<GpuStorage<D>> {
        self.check("cast", storage, layout)?;
        self.check_dtype("cast", dtype)?;
        elementwise::cast(self.runtime(), storage, layout, dtype)
    }

    fn unary(&self, op: UnaryOp, x: &GpuStorage<D>, layout: &Layout) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, layout)?;
        elementwise::unary(self.runtime(), op, x, layout)
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &GpuStorage<D>,
        lhs_layout: &Layout,
        rhs: &GpuStorage<D>,
        rhs_layout: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), lhs, lhs_layout)?;
        self.check(op.name(), rhs, rhs_layout)?;
        elementwise::binary(self.runtime(), op, lhs, lhs_layout, rhs, rhs_layout)
    }

    fn compare(
        &self,
        op: CmpOp,
        lhs: &GpuStorage<D>,
        lhs_layout: &Layout,
        rhs: &GpuStorage<D>,
        rhs_layout: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), lhs, lhs_layout)?;
        self.check(op.name(), rhs, rhs_layout)?;
        elementwise::compare(self.runtime(), op, lhs, lhs_layout, rhs, rhs_layout)
    }

    fn where_select(
        &self,
        cond: &GpuStorage<D>,
        cond_layout: &Layout,
        on_true: &GpuStorage<D>,
        true_layout: &Layout,
        on_false: &GpuStorage<D>,
        false_layout: &Layout,
    ) -> Result<GpuStorage<D>> {
        let operands = [
            (cond, cond_layout),
            (on_true, true_layout),
            (on_false, false_layout),
        ];
        for (storage, layout) in operands {
            self.check("where", storage, layout)?;
        }
        let [cond, on_true, on_false] = operands;
        elementwise::where_select(self.runtime(), cond, on_true, on_false)
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: &GpuStorage<D>,
        layout: &Layout,
        axes: &[usize],
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, layout)?;
        reduce::reduce(self.runtime(), op, x, layout, axes)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &GpuStorage<D>,
        layout: &Layout,
        axis: usize,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, layout)?;
        reduce::arg_reduce(self.runtime(), op, x, layout, axis)
    }

    fn matmul(
        &self,
        lhs: &GpuStorage<D>,
        lhs_layout: &Layout,
        rhs: &GpuStorage<D>,
        rhs_layout: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check("matmul", lhs, lhs_layout)?;
        self.check("matmul", rhs, rhs_layout)?;
        matmul::matmul(
            self.runtime(),
            self.options(),
            lhs,
            lhs_layout,
            rhs,
            rhs_layout,
        )
    }

    fn index_select(
        &self,
        x: &GpuStorage<D>,
        layout: &Layout,
        axis: usize,
        indices: &GpuStorage<D>,
        indices_layout: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check("index_select", x, layout)?;
        self.check("index_select", indices, indices_layout)?;
        indexing::index_select(self.runtime(), x, layout, axis, indices, indices_layout)
    }

    fn gather(
        &self,
        x: &GpuStorage<D>,
        layout: &Layout,
        axis: usize,
        indices: &GpuStorage<D>,
        indices_layout: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check("gather", x, layout)?;
        self.check("gather", indices, indices_layout)?;
        indexing::gather(self.runtime(), x, layout, axis, indices, indices_layout)
    }

    fn scatter_add(
        &self,
        base: &GpuStorage<D>,
        base_layout: &Layout,
        axis: usize,
        indices: &GpuStorage<D>,
        indices_layout: &Layout,
        src: &GpuStorage<D>,
        src_layout: &Layout,
    ) -> Result<GpuStorage<D>> {
        for (storage, layout) in [
            (base, base_layout),
            (indices, indices_layout),
            (src, src_layout),
        ] {
            self.check("scatter_add", storage, layout)?;
        }
        indexing::scatter_add(
            self.runtime(),
            base,
            base_layout,
            axis,
            indices,
            indices_layout,
            src,
            src_layout,
        )
    }

    fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<GpuStorage<D>> {
        self.check_dtype("random", dtype)?;
        random::random(self.runtime(), dist, numel, dtype, seed, offset)
    }

    fn synchronize(&self) -> Result<()> {
        self.runtime().finish()
    }

    fn conv2d(
        &self,
        x: &Tensor<Self>,
        weight: &Tensor<Self>,
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        if x.rank() != 4 || weight.rank() != 4 || !x.dtype().is_float() {
            return composite::conv2d(x, weight, params);
        }
        let columns = |kernel, out_hw| self.columns(x, kernel, params, out_hw);
        conv::conv2d(x, weight, params, &columns)
    }

    fn scaled_dot_product_attention(
        &self,
        q: &Tensor<Self>,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        mask: Option<&Tensor<Self>>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Self>> {
        tessera_core::attention::check_attention_operands(q, k, v, mask, params)?;
        // The fused kernels accumulate in their outputs: 16-bit attention runs them in f32.
        if let Some(out) = in_f32([Some(q), Some(k), Some(v), mask], |[q, k, v, m]| {
            attention::forward(self, q.unwrap(), k.unwrap(), v.unwrap(), m, params)
        }) {
            return out;
        }
        attention::forward(self, q, k, v, mask, params)
    }

    #[allow(clippy::too_many_arguments)]
    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Self>,
        q: &Tensor<Self>,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        mask: Option<&Tensor<Self>>,
        forward: &AttentionOutput<Self>,
        params: &AttentionParams,
    ) -> Result<AttentionGrads<Self>> {
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
            |g, (q, k, v), m, f| attention::backward(self, g, q, k, v, m, f, params),
        );
        if let Some(grads) = widened {
            return grads;
        }
        attention::backward(self, grad_out, q, k, v, mask, forward, params)
    }

    fn conv2d_backward_weight(
        &self,
        x: &Tensor<Self>,
        grad_out: &Tensor<Self>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        if let Some(out) = in_f32([Some(x), Some(grad_out)], |[x, g]| {
            self.conv2d_backward_weight(x.unwrap(), g.unwrap(), weight_dims, params)
        }) {
            return out;
        }
        if x.rank() != 4 || grad_out.rank() != 4 || weight_dims.len() != 4 || !x.dtype().is_float()
        {
            return composite::conv2d_backward_weight(x, grad_out, weight_dims, params);
        }
        let columns = |kernel, out_hw| self.columns(x, kernel, params, out_hw);
        conv::conv2d_backward_weight(x, grad_out, weight_dims, &columns)
    }

    fn softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.fused_rows(RowOp::Softmax, x, axis, composite::softmax)
    }

    fn log_softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.fused_rows(RowOp::LogSoftmax, x, axis, composite::log_softmax)
    }

    fn logsumexp(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.fused_rows(RowOp::LogSumExp, x, axis, composite::logsumexp)
    }

    // ----- composites that run in f32 for the 16-bit floats (tensor-core's default else) -----

    fn conv2d_backward_input(
        &self,
        grad_out: &Tensor<Self>,
        weight: &Tensor<Self>,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        in_f32([Some(grad_out), Some(weight)], |[g, w]| {
            composite::conv2d_backward_input(g.unwrap(), w.unwrap(), input_dims, params)
        })
        .unwrap_or_else(|| composite::conv2d_backward_input(grad_out, weight, input_dims, params))
    }

    fn max_pool2d(
        &self,
        x: &Tensor<Self>,
        params: Pool2dParams,
    ) -> Result<(Tensor<Self>, Tensor<Self>)> {
        in_f32([Some(x)], |[x]| composite::max_pool2d(x.unwrap(), params))
            .unwrap_or_else(|| composite::max_pool2d(x, params))
    }

    fn max_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        window_argmax: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        let backward =
            |g: &Tensor<Self>| composite::max_pool2d_backward(g, window_argmax, input_dims, params);
        in_f32([Some(grad_out)], |[g]| backward(g.unwrap())).unwrap_or_else(|| backward(grad_out))
    }

    fn avg_pool2d(&self, x: &Tensor<Self>, params: Pool2dParams) -> Result<Tensor<Self>> {
        in_f32([Some(x)], |[x]| composite::avg_pool2d(x.unwrap(), params))
            .unwrap_or_else(|| composite::avg_pool2d(x, params))
    }

    fn avg_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        let backward = |g: &Tensor<Self>| composite::avg_pool2d_backward(g, input_dims, params);
        in_f32([Some(grad_out)], |[g]| backward(g.unwrap())).unwrap_or_else(|| backward(grad_out))
    }

    fn adam_update(
        &self,
        param: &Tensor<Self>,
        grad: &Tensor<Self>,
        exp_avg: &Tensor<Self>,
        exp_avg_sq: &Tensor<Self>,
        max_exp_avg_sq: Option<&Tensor<Self>>,
        update: AdamUpdate,
    ) -> Result<AdamTensors<Self>> {
        let inputs = [
            Some(param),
            Some(grad),
            Some(exp_avg),
            Some(exp_avg_sq),
            max_exp_avg_sq,
        ];
        in_f32(inputs, |[p, g, m, v, vmax]| {
            let (p, g, m, v) = (p.unwrap(), g.unwrap(), m.unwrap(), v.unwrap());
            composite::adam_update(p, g, m, v, vmax, update)
        })
        .unwrap_or_else(|| {
            composite::adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
        })
    }
}
