//! The [`tessera_core::Backend`] of every GPU backend, written once: `impl<D: Driver> Backend for
//! Gpu<D>`. Each primitive checks what its operand types do not guarantee (the storages live on
//! this device, the dtype is one the device computes in), then runs the op of `crate::ops`. Softmax, log-softmax and log-sum-exp use the fused kernel where it applies,
//! conv2d and its weight gradient im2col plus the GEMM; every other composite keeps
//! tensor-core's default.
//!
//! The 16-bit floats: primitives run their 16-bit kernels (u16 storage, f32 arithmetic, one
//! rounding per result), and so do conv2d (im2col is exact and the GEMM accumulates in f32)
//! and the last-axis softmax kernels (see `computes_16_bit`). The other composites (the conv
//! gradients, pooling, attention, Adam) are widened to f32 by tensor-core's dispatch, as on
//! every backend, so their error is one 16-bit rounding too.

use crate::checks::check_device;
use crate::driver::Driver;
use crate::gpu::Gpu;
use crate::ops::softmax::RowOp;
use crate::ops::{
    adam, attention, conv, cross_entropy, elementwise, indexing, matmul, random, reduce, softmax,
    transfer,
};
use crate::storage::GpuStorage;
use tessera_core::attention::{AttentionGrads, AttentionInputs, AttentionOutput, AttentionParams};
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::composite::in_f32;
use tessera_core::dispatch::HalfOp;
use tessera_core::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape, ScatterAdd,
};
use tessera_core::{
    composite, ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, Error, HostData, Layout, ReduceOp, Result, Tensor, UnaryOp,
};

/// A storage and its layout, as the ops of `crate::ops` take them.
type Pair<'a, D> = (&'a GpuStorage<D>, &'a Layout);

impl<D: Driver> Gpu<D> {
    /// Errors unless `x` lives on this device (its layout fits it: the operand type says so).
    fn check(&self, op: &'static str, x: Operand<'_, GpuStorage<D>>) -> Result<()> {
        check_device(op, self.runtime(), x.storage())
    }

    /// [`Gpu::check`] on each operand; their storages and layouts.
    fn check_all<'a, const N: usize>(
        &self,
        op: &'static str,
        xs: [Operand<'a, GpuStorage<D>>; N],
    ) -> Result<[Pair<'a, D>; N]> {
        for x in xs {
            self.check(op, x)?;
        }
        Ok(xs.map(|x| (x.storage(), x.layout())))
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
        self.check("conv2d", x.operand("conv2d")?)?;
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
        self.check("softmax", x.operand("softmax")?)?;
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

    /// The primitives but `scatter_add` (whose sums must not round per addition) read and write
    /// 16-bit storage directly (f32 arithmetic, one rounding per result), as do conv2d (im2col is exact and the GEMM accumulates in f32) and the
    /// last-axis softmax kernels; everything else is widened by tensor-core's dispatch.
    fn computes_16_bit(&self, op: HalfOp, _dtype: DType) -> bool {
        (op.is_primitive() && op != HalfOp::ScatterAdd)
            || matches!(op, HalfOp::Softmax | HalfOp::Conv2d)
    }

    fn download(&self, x: Operand<'_, GpuStorage<D>>) -> Result<HostData> {
        self.check("download", x)?;
        transfer::download(self.runtime(), x.storage(), x.layout())
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<GpuStorage<D>> {
        self.check_dtype("full", dtype)?;
        transfer::full(self.runtime(), numel, dtype, value)
    }

    fn copy_strided(&self, x: Operand<'_, GpuStorage<D>>) -> Result<GpuStorage<D>> {
        self.check("copy_strided", x)?;
        elementwise::copy_strided(self.runtime(), x.storage(), x.layout())
    }

    fn assign(&self, to: Assignment<'_, GpuStorage<D>>, mode: AssignMode) -> Result<()> {
        let Assignment { mut dst, src } = to;
        self.check("assign", src)?;
        let (storage, layout) = dst.parts();
        check_device("assign", self.runtime(), storage)?;
        elementwise::assign(
            self.runtime(),
            storage,
            layout,
            src.storage(),
            src.layout(),
            mode,
        )
    }

    fn cast(&self, x: Operand<'_, GpuStorage<D>>, dtype: DType) -> Result<GpuStorage<D>> {
        self.check("cast", x)?;
        self.check_dtype("cast", dtype)?;
        elementwise::cast(self.runtime(), x.storage(), x.layout(), dtype)
    }

    fn unary(&self, op: UnaryOp, x: Operand<'_, GpuStorage<D>>) -> Result<GpuStorage<D>> {
        self.check(op.name(), x)?;
        elementwise::unary(self.runtime(), op, x.storage(), x.layout())
    }

    fn binary(&self, op: BinaryOp, xs: SameShape<'_, GpuStorage<D>, 2>) -> Result<GpuStorage<D>> {
        let [a, b] = self.check_all(op.name(), xs.operands())?;
        elementwise::binary(self.runtime(), op, a.0, a.1, b.0, b.1)
    }

    fn compare(&self, op: CmpOp, xs: SameShape<'_, GpuStorage<D>, 2>) -> Result<GpuStorage<D>> {
        let [a, b] = self.check_all(op.name(), xs.operands())?;
        elementwise::compare(self.runtime(), op, a.0, a.1, b.0, b.1)
    }

    fn where_select(&self, xs: SameShape<'_, GpuStorage<D>, 3>) -> Result<GpuStorage<D>> {
        let [cond, on_true, on_false] = self.check_all("where", xs.operands())?;
        elementwise::where_select(self.runtime(), cond, on_true, on_false)
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: Operand<'_, GpuStorage<D>>,
        axes: &[usize],
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x)?;
        reduce::reduce(self.runtime(), op, x.storage(), x.layout(), axes)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: Operand<'_, GpuStorage<D>>,
        axis: usize,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x)?;
        reduce::arg_reduce(self.runtime(), op, x.storage(), x.layout(), axis)
    }

    fn matmul(&self, xs: MatmulOperands<'_, GpuStorage<D>>) -> Result<GpuStorage<D>> {
        let [l, r] = self.check_all("matmul", [xs.lhs, xs.rhs])?;
        matmul::matmul(self.runtime(), self.options(), l.0, l.1, r.0, r.1)
    }

    fn index_select(&self, xs: IndexSelect<'_, GpuStorage<D>>) -> Result<GpuStorage<D>> {
        self.check_all("index_select", [xs.x, xs.indices])?;
        indexing::index_select(self.runtime(), xs)
    }

    fn gather(&self, xs: Gather<'_, GpuStorage<D>>) -> Result<GpuStorage<D>> {
        self.check_all("gather", [xs.x, xs.indices])?;
        indexing::gather(self.runtime(), xs)
    }

    fn scatter_add(&self, xs: ScatterAdd<'_, GpuStorage<D>>) -> Result<GpuStorage<D>> {
        self.check_all("scatter_add", [xs.base, xs.indices, xs.src])?;
        indexing::scatter_add(self.runtime(), xs)
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
        inputs: AttentionInputs<'_, Self>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Self>> {
        let AttentionInputs { q, k, v, mask } = inputs;
        tessera_core::attention::check_attention_operands(q, k, v, mask, params)?;
        attention::forward(self, inputs, params)
    }

    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Self>,
        inputs: AttentionInputs<'_, Self>,
        forward: &AttentionOutput<Self>,
        params: &AttentionParams,
    ) -> Result<AttentionGrads<Self>> {
        let AttentionInputs { q, k, v, mask } = inputs;
        tessera_core::attention::check_attention_backward_operands(
            grad_out,
            (q, k, v),
            mask,
            forward,
            params,
        )?;
        attention::backward(self, grad_out, inputs, forward, params)
    }

    fn conv2d_backward_weight(
        &self,
        x: &Tensor<Self>,
        grad_out: &Tensor<Self>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
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

    fn cross_entropy(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        const OP: &str = "cross_entropy";
        for t in [logits, targets] {
            self.check(OP, t.operand(OP)?)?;
        }
        match cross_entropy::cross_entropy(self, logits, targets, label_smoothing)? {
            Some(losses) => Ok(losses),
            None => composite::cross_entropy(logits, targets, label_smoothing),
        }
    }

    fn cross_entropy_backward(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        grad: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        const OP: &str = "cross_entropy_backward";
        for t in [logits, targets, grad] {
            self.check(OP, t.operand(OP)?)?;
        }
        match cross_entropy::cross_entropy_backward(self, logits, targets, grad, label_smoothing)? {
            Some(dx) => Ok(dx),
            None => composite::cross_entropy_backward(logits, targets, grad, label_smoothing),
        }
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
        const OP: &str = "adam_update";
        for t in [param, grad, exp_avg, exp_avg_sq]
            .into_iter()
            .chain(max_exp_avg_sq)
        {
            self.check(OP, t.operand(OP)?)?;
        }
        let moments = (exp_avg, exp_avg_sq);
        match adam::adam_update(self, param, grad, moments, max_exp_avg_sq, update)? {
            Some(step) => Ok(step),
            None => {
                composite::adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
            }
        }
    }
}
