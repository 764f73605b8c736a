//! The `Backend` impl of [`Checked`]. Every primitive runs on the backend under test and on the
//! reference (each through tensor-core's dispatch, so each applies its own 16-bit rule), the two
//! outputs are compared with the op's tolerance (`settle.rs`), and the first divergence beyond it
//! is returned as [`tessera_core::Error::Divergence`].

use crate::settle::{with_axes_kept, OpSpec};
use crate::storage::CheckedStorage;
use crate::tolerance::Tolerance;
use crate::Checked;
use std::sync::Arc;
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::dispatch::{self, HalfOp};
use tessera_core::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape, ScatterAdd,
};
use tessera_core::{
    ArgReduceOp, AssignMode, AttentionInputs, Backend, BackendStorage, BinaryOp, CmpOp,
    Conv2dParams, DType, Device, Distribution, HostData, Layout, Pool2dParams, ReduceOp, Result,
    Tensor, UnaryOp,
};

impl<B: Backend, R: Backend> Backend for Checked<B, R> {
    type Storage = CheckedStorage<B, R>;

    fn name(&self) -> &'static str {
        "checked"
    }

    fn device(&self) -> Device {
        Device {
            kind: "checked",
            ordinal: self.under_test.device().ordinal,
        }
    }

    fn supports_dtype(&self, dtype: DType) -> bool {
        self.under_test.supports_dtype(dtype) && self.reference.supports_dtype(dtype)
    }

    fn synchronize(&self) -> Result<()> {
        self.under_test.synchronize()?;
        self.reference.synchronize()
    }

    /// Every op: each inner backend receives its calls through tensor-core's dispatch, which
    /// applies its own 16-bit rule.
    fn computes_16_bit(&self, _op: HalfOp, _dtype: DType) -> bool {
        true
    }

    // ----- memory -----

    fn upload(&self, data: HostData) -> Result<Self::Storage> {
        Ok(CheckedStorage {
            reference: Arc::new(self.reference.upload(data.clone())?),
            under_test: Arc::new(self.under_test.upload(data)?),
        })
    }

    fn download(&self, x: Operand<'_, Self::Storage>) -> Result<HostData> {
        let (xb, xr) = Self::sides("download", x)?;
        let got = self.under_test.download(xb)?;
        let expected = self.reference.download(xr)?;
        let spec = OpSpec::new("download", &[x.layout()], x.dims(), Tolerance::SAME_VALUE);
        self.compare(&spec, &got, &expected, None)?;
        Ok(got)
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<Self::Storage> {
        let spec = OpSpec::new("full", &[], &[numel], Tolerance::SAME_VALUE);
        let b = self.under_test.full(numel, dtype, value)?;
        let r = self.reference.full(numel, dtype, value)?;
        self.settle(spec, b, r, None)
    }

    fn copy_strided(&self, x: Operand<'_, Self::Storage>) -> Result<Self::Storage> {
        let spec = OpSpec::new(
            "copy_strided",
            &[x.layout()],
            x.dims(),
            Tolerance::SAME_VALUE,
        );
        let (xb, xr) = Self::sides("copy_strided", x)?;
        let b = self.under_test.copy_strided(xb)?;
        let r = self.reference.copy_strided(xr)?;
        self.settle(spec, b, r, None)
    }

    fn assign(&self, to: Assignment<'_, Self::Storage>, mode: AssignMode) -> Result<()> {
        let Assignment { mut dst, src } = to;
        let tolerance = match mode {
            AssignMode::Overwrite => Tolerance::SAME_VALUE,
            AssignMode::Accumulate => Tolerance::simple(dst.dtype()),
        };
        let (dst_layout, src_layout) = (dst.layout(), src.layout());
        let spec = OpSpec::new(
            "assign",
            &[dst_layout, src_layout],
            &[dst.storage_len()],
            tolerance,
        );
        let dst = dst.storage();
        // The buffers are shared only while a composite runs; copy them if they are.
        let whole = Layout::contiguous([dst.len()]);
        if Arc::get_mut(&mut dst.under_test).is_none() {
            let copy =
                self.under_test
                    .copy_strided(Operand::new("assign", &*dst.under_test, &whole)?)?;
            dst.under_test = Arc::new(copy);
        }
        if Arc::get_mut(&mut dst.reference).is_none() {
            let copy =
                self.reference
                    .copy_strided(Operand::new("assign", &*dst.reference, &whole)?)?;
            dst.reference = Arc::new(copy);
        }
        let b = Arc::get_mut(&mut dst.under_test).expect("unique after the copy");
        let src_b = src.with_storage("assign", &*src.storage().under_test)?;
        dispatch::assign(
            &self.under_test,
            (b, dst_layout),
            (src_b.storage(), src_layout),
            mode,
        )?;
        let r = Arc::get_mut(&mut dst.reference).expect("unique after the copy");
        let src_r = src.with_storage("assign", &*src.storage().reference)?;
        dispatch::assign(
            &self.reference,
            (r, dst_layout),
            (src_r.storage(), src_layout),
            mode,
        )?;
        let got = self.host_b(&dst.under_test)?;
        let expected = self.host_r(&dst.reference)?;
        self.compare(&spec, &got, &expected, None)?;
        dst.reference = Arc::new(self.reference.upload(got)?);
        Ok(())
    }

    fn cast(&self, x: Operand<'_, Self::Storage>, dtype: DType) -> Result<Self::Storage> {
        let spec = OpSpec::new("cast", &[x.layout()], x.dims(), Tolerance::SAME_VALUE);
        let (xb, xr) = Self::sides("cast", x)?;
        let b = self.under_test.cast(xb, dtype)?;
        let r = self.reference.cast(xr, dtype)?;
        self.settle(spec, b, r, None)
    }

    // ----- element-wise -----

    fn unary(&self, op: UnaryOp, x: Operand<'_, Self::Storage>) -> Result<Self::Storage> {
        let tolerance = Tolerance::of_unary(op, x.dtype());
        let spec = OpSpec::new(op.name(), &[x.layout()], x.dims(), tolerance);
        let (xb, xr) = Self::sides(op.name(), x)?;
        let b = dispatch::unary(&self.under_test, op, xb)?;
        let r = dispatch::unary(&self.reference, op, xr)?;
        // gelu's `x/2 * (1 + erf(x/√2))` cancels for negative x: its rounding is relative to
        // `|x| / 2`, not to the (small) result.
        let magnitude = match op {
            UnaryOp::Gelu => self
                .magnitude_of(x.dtype(), [xr], |r, [abs]| r.copy_strided(abs))?
                .map(|m| m.into_iter().map(|v| 0.5 * v).collect()),
            _ => None,
        };
        self.settle(spec, b, r, magnitude)
    }

    fn binary(&self, op: BinaryOp, xs: SameShape<'_, Self::Storage, 2>) -> Result<Self::Storage> {
        let [lhs, rhs] = xs.operands();
        let tolerance = Tolerance::of_binary(op, lhs.dtype());
        let spec = OpSpec::new(
            op.name(),
            &[lhs.layout(), rhs.layout()],
            xs.dims(),
            tolerance,
        );
        let (bs, rs) = Self::all_sides(op.name(), xs.operands())?;
        let b = dispatch::binary(&self.under_test, op, SameShape::new(op.name(), bs)?)?;
        let r = dispatch::binary(&self.reference, op, SameShape::new(op.name(), rs)?)?;
        self.settle(spec, b, r, None)
    }

    fn compare(&self, op: CmpOp, xs: SameShape<'_, Self::Storage, 2>) -> Result<Self::Storage> {
        let [lhs, rhs] = xs.operands();
        let layouts = [lhs.layout(), rhs.layout()];
        let spec = OpSpec::new(op.name(), &layouts, xs.dims(), Tolerance::SAME_VALUE);
        let (bs, rs) = Self::all_sides(op.name(), xs.operands())?;
        let b = dispatch::compare(&self.under_test, op, SameShape::new(op.name(), bs)?)?;
        let r = dispatch::compare(&self.reference, op, SameShape::new(op.name(), rs)?)?;
        self.settle(spec, b, r, None)
    }

    fn where_select(&self, xs: SameShape<'_, Self::Storage, 3>) -> Result<Self::Storage> {
        let layouts = xs.operands().map(|x| x.layout());
        let spec = OpSpec::new("where", &layouts, xs.dims(), Tolerance::SAME_VALUE);
        let (bs, rs) = Self::all_sides("where", xs.operands())?;
        let b = dispatch::where_select(&self.under_test, SameShape::new("where", bs)?)?;
        let r = dispatch::where_select(&self.reference, SameShape::new("where", rs)?)?;
        self.settle(spec, b, r, None)
    }

    // ----- reductions -----

    fn reduce(
        &self,
        op: ReduceOp,
        x: Operand<'_, Self::Storage>,
        axes: &[usize],
    ) -> Result<Self::Storage> {
        let dtype = x.dtype();
        let terms: usize = axes.iter().filter_map(|&a| x.dims().get(a)).product();
        let (xb, xr) = Self::sides(op.name(), x)?;
        let (tolerance, magnitude) = match op {
            ReduceOp::Max | ReduceOp::Min => (Tolerance::SAME_VALUE, None),
            ReduceOp::Prod => (Tolerance::accumulation(dtype, terms), None),
            ReduceOp::Sum => {
                let m = self.magnitude_of(dtype, [xr], |r, [abs]| {
                    dispatch::reduce(r, ReduceOp::Sum, abs, axes)
                })?;
                (Tolerance::accumulation(dtype, terms), m)
            }
        };
        let output = with_axes_kept(x.dims(), axes);
        let spec = OpSpec::new(op.name(), &[x.layout()], &output, tolerance);
        let b = dispatch::reduce(&self.under_test, op, xb, axes)?;
        let r = dispatch::reduce(&self.reference, op, xr, axes)?;
        self.settle(spec, b, r, magnitude)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: Operand<'_, Self::Storage>,
        axis: usize,
    ) -> Result<Self::Storage> {
        let output = with_axes_kept(x.dims(), &[axis]);
        let spec = OpSpec::new(op.name(), &[x.layout()], &output, Tolerance::SAME_VALUE);
        let (xb, xr) = Self::sides(op.name(), x)?;
        let b = dispatch::arg_reduce(&self.under_test, op, xb, axis)?;
        let r = dispatch::arg_reduce(&self.reference, op, xr, axis)?;
        self.settle(spec, b, r, None)
    }

    // ----- linear algebra -----

    fn matmul(&self, xs: MatmulOperands<'_, Self::Storage>) -> Result<Self::Storage> {
        let (_, _, k, _) = xs.sizes();
        let dtype = xs.lhs.dtype();
        let ([lb, rb], [lr, rr]) = Self::all_sides("matmul", [xs.lhs, xs.rhs])?;
        let magnitude = self.magnitude_of(dtype, [lr, rr], |r, [l, rhs]| {
            dispatch::matmul(r, MatmulOperands::new(l, rhs)?)
        })?;
        let layouts = [xs.lhs.layout(), xs.rhs.layout()];
        let tolerance = Tolerance::accumulation(dtype, k);
        let spec = OpSpec::new("matmul", &layouts, &xs.output_dims(), tolerance);
        let b = dispatch::matmul(&self.under_test, MatmulOperands::new(lb, rb)?)?;
        let r = dispatch::matmul(&self.reference, MatmulOperands::new(lr, rr)?)?;
        self.settle(spec, b, r, magnitude)
    }

    // ----- indexing -----

    fn index_select(&self, xs: IndexSelect<'_, Self::Storage>) -> Result<Self::Storage> {
        const OP: &str = "index_select";
        let layouts = [xs.x.layout(), xs.indices.layout()];
        let spec = OpSpec::new(OP, &layouts, &xs.output_dims(), Tolerance::SAME_VALUE);
        let ([xb, ib], [xr, ir]) = Self::all_sides(OP, [xs.x, xs.indices])?;
        let b = dispatch::index_select(&self.under_test, IndexSelect::new(xb, xs.axis, ib)?)?;
        let r = dispatch::index_select(&self.reference, IndexSelect::new(xr, xs.axis, ir)?)?;
        self.settle(spec, b, r, None)
    }

    fn gather(&self, xs: Gather<'_, Self::Storage>) -> Result<Self::Storage> {
        const OP: &str = "gather";
        let layouts = [xs.x.layout(), xs.indices.layout()];
        let spec = OpSpec::new(OP, &layouts, xs.indices.dims(), Tolerance::SAME_VALUE);
        let ([xb, ib], [xr, ir]) = Self::all_sides(OP, [xs.x, xs.indices])?;
        let b = dispatch::gather(&self.under_test, Gather::new(xb, xs.axis, ib)?)?;
        let r = dispatch::gather(&self.reference, Gather::new(xr, xs.axis, ir)?)?;
        self.settle(spec, b, r, None)
    }

    fn scatter_add(&self, xs: ScatterAdd<'_, Self::Storage>) -> Result<Self::Storage> {
        const OP: &str = "scatter_add";
        let (dtype, axis) = (xs.base.dtype(), xs.axis);
        let terms = 1 + xs.indices.dims().get(axis).copied().unwrap_or(0);
        let ([bb, ib, sb], [br, ir, sr]) = Self::all_sides(OP, [xs.base, xs.indices, xs.src])?;
        let magnitude = self.magnitude_of(dtype, [br, sr], |r, [base, src]| {
            dispatch::scatter_add(r, ScatterAdd::new(base, axis, ir, src)?)
        })?;
        let layouts = [xs.base.layout(), xs.indices.layout(), xs.src.layout()];
        let tolerance = Tolerance::accumulation(dtype, terms);
        let spec = OpSpec::new(OP, &layouts, xs.base.dims(), tolerance);
        let b = dispatch::scatter_add(&self.under_test, ScatterAdd::new(bb, axis, ib, sb)?)?;
        let r = dispatch::scatter_add(&self.reference, ScatterAdd::new(br, axis, ir, sr)?)?;
        self.settle(spec, b, r, magnitude)
    }

    // ----- random -----

    fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<Self::Storage> {
        // Uniform draws are bit-identical everywhere; normal ones go through the device's
        // log and cos, so they agree to a few ulps (tessera_core::random).
        let tolerance = match dist {
            Distribution::Uniform { .. } => Tolerance::SAME_VALUE,
            Distribution::Normal { .. } => Tolerance::transcendental(dtype),
        };
        let spec = OpSpec::new("random", &[], &[numel], tolerance);
        let b = self.under_test.random(dist, numel, dtype, seed, offset)?;
        let r = self.reference.random(dist, numel, dtype, seed, offset)?;
        self.settle(spec, b, r, None)
    }

    // ----- composites: the override of each backend, compared -----

    fn concat(&self, tensors: &[&Tensor<Self>], axis: usize) -> Result<Tensor<Self>> {
        self.checked_concat(tensors, axis)
    }

    fn softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.checked_softmax_family(crate::composites::RowOp::Softmax, x, axis)
    }

    fn log_softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.checked_softmax_family(crate::composites::RowOp::LogSoftmax, x, axis)
    }

    fn logsumexp(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.checked_softmax_family(crate::composites::RowOp::LogSumExp, x, axis)
    }

    fn conv2d(
        &self,
        x: &Tensor<Self>,
        weight: &Tensor<Self>,
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_conv2d(x, weight, params)
    }

    fn conv2d_backward_input(
        &self,
        grad_out: &Tensor<Self>,
        weight: &Tensor<Self>,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_conv2d_backward_input(grad_out, weight, input_dims, params)
    }

    fn conv2d_backward_weight(
        &self,
        x: &Tensor<Self>,
        grad_out: &Tensor<Self>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_conv2d_backward_weight(x, grad_out, weight_dims, params)
    }

    fn max_pool2d(
        &self,
        x: &Tensor<Self>,
        params: Pool2dParams,
    ) -> Result<(Tensor<Self>, Tensor<Self>)> {
        self.checked_max_pool2d(x, params)
    }

    fn max_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        window_argmax: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_max_pool2d_backward(grad_out, window_argmax, input_dims, params)
    }

    fn avg_pool2d(&self, x: &Tensor<Self>, params: Pool2dParams) -> Result<Tensor<Self>> {
        self.checked_avg_pool2d(x, params)
    }

    fn avg_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_avg_pool2d_backward(grad_out, input_dims, params)
    }

    fn scaled_dot_product_attention(
        &self,
        inputs: AttentionInputs<'_, Self>,
        params: &tessera_core::AttentionParams,
    ) -> Result<tessera_core::AttentionOutput<Self>> {
        self.checked_attention(inputs, params)
    }

    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Self>,
        inputs: AttentionInputs<'_, Self>,
        forward: &tessera_core::AttentionOutput<Self>,
        params: &tessera_core::AttentionParams,
    ) -> Result<tessera_core::AttentionGrads<Self>> {
        self.checked_attention_backward(grad_out, inputs, forward, params)
    }

    fn relu_backward(&self, x: &Tensor<Self>, grad: &Tensor<Self>) -> Result<Tensor<Self>> {
        self.checked_relu_backward(x, grad)
    }

    fn gelu_backward(&self, x: &Tensor<Self>, grad: &Tensor<Self>) -> Result<Tensor<Self>> {
        self.checked_gelu_backward(x, grad)
    }

    fn matmul_bias(
        &self,
        lhs: &Tensor<Self>,
        rhs: &Tensor<Self>,
        bias: &Tensor<Self>,
    ) -> Result<Tensor<Self>> {
        self.checked_matmul_bias(lhs, rhs, bias)
    }

    fn cross_entropy(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        self.checked_cross_entropy(logits, targets, label_smoothing)
    }

    fn cross_entropy_backward(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        grad: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        self.checked_cross_entropy_backward(logits, targets, grad, label_smoothing)
    }

    fn layer_norm(
        &self,
        x: &Tensor<Self>,
        weight: Option<&Tensor<Self>>,
        bias: Option<&Tensor<Self>>,
        eps: f64,
    ) -> Result<tessera_core::LayerNormOutput<Self>> {
        self.checked_layer_norm(x, weight, bias, eps)
    }

    fn layer_norm_backward(
        &self,
        grad: &Tensor<Self>,
        x: &Tensor<Self>,
        weight: Option<&Tensor<Self>>,
        stats: (&Tensor<Self>, &Tensor<Self>),
        with_bias: bool,
    ) -> Result<tessera_core::LayerNormGrads<Self>> {
        self.checked_layer_norm_backward(grad, x, weight, stats, with_bias)
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
        self.checked_adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
    }
}
