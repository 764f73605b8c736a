//! [`ExampleBackend`]: the `Backend` impl. Every primitive follows the same three steps: read
//! the inputs through their layouts into contiguous vectors, run the kernel, wrap the result as
//! a fresh contiguous storage. The composites keep the defaults of `tessera_core::composite`,
//! run in f32 for the 16-bit floats (the end of the file).

use crate::strided::read;
use crate::{elementwise, indexing, matmul, memory, reduce, ExampleStorage};
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::composite::{self, in_f32};
use tessera_core::{
    ArgReduceOp, AssignMode, AttentionGrads, AttentionOutput, AttentionParams, Backend,
    BackendStorage, BinaryOp, CmpOp, Conv2dParams, DType, Device, Distribution, Error, HostData,
    Layout, Pool2dParams, ReduceOp, Result, Tensor, UnaryOp,
};

/// The example device: naive, single-threaded, every dtype. `ExampleBackend::new()` is the only
/// device of its kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExampleBackend;

impl ExampleBackend {
    /// The example device.
    pub fn new() -> Self {
        ExampleBackend
    }
}

fn wrap(data: HostData) -> Result<ExampleStorage> {
    Ok(ExampleStorage::new(data))
}

impl Backend for ExampleBackend {
    type Storage = ExampleStorage;

    fn name(&self) -> &'static str {
        "example"
    }

    fn device(&self) -> Device {
        Device {
            kind: "example",
            ordinal: 0,
        }
    }

    /// Every dtype: f32, f64, i64, bool, and the 16-bit floats f16 and bf16 (stored in 16
    /// bits, computed in f64 here and rounded once; see `floats.rs`).
    fn supports_dtype(&self, dtype: DType) -> bool {
        matches!(
            dtype,
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I64 | DType::Bool
        )
    }

    // ----- memory -----

    fn upload(&self, data: HostData) -> Result<ExampleStorage> {
        if !self.supports_dtype(data.dtype()) {
            return Err(tessera_core::Error::UnsupportedDType {
                op: "upload",
                dtype: data.dtype(),
            });
        }
        wrap(data)
    }

    fn download(&self, storage: &ExampleStorage, layout: &Layout) -> Result<HostData> {
        read("download", storage, layout)
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<ExampleStorage> {
        wrap(memory::full(numel, dtype, value)?)
    }

    fn copy_strided(&self, storage: &ExampleStorage, layout: &Layout) -> Result<ExampleStorage> {
        wrap(read("copy_strided", storage, layout)?)
    }

    fn assign(
        &self,
        dst: &mut ExampleStorage,
        dst_layout: &Layout,
        src: &ExampleStorage,
        src_layout: &Layout,
        mode: AssignMode,
    ) -> Result<()> {
        dst_layout.check_same_shape("assign", src_layout)?;
        dst_layout.check_fits("assign", dst.len())?;
        let src = read("assign", src, src_layout)?;
        memory::assign(dst.data_mut(), dst_layout, src, mode)
    }

    fn cast(
        &self,
        storage: &ExampleStorage,
        layout: &Layout,
        dtype: DType,
    ) -> Result<ExampleStorage> {
        if !self.supports_dtype(dtype) {
            return Err(Error::UnsupportedDType { op: "cast", dtype });
        }
        wrap(elementwise::cast(read("cast", storage, layout)?, dtype)?)
    }

    // ----- element-wise -----

    fn unary(&self, op: UnaryOp, x: &ExampleStorage, layout: &Layout) -> Result<ExampleStorage> {
        wrap(elementwise::unary(op, read(op.name(), x, layout)?)?)
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &ExampleStorage,
        lhs_layout: &Layout,
        rhs: &ExampleStorage,
        rhs_layout: &Layout,
    ) -> Result<ExampleStorage> {
        lhs_layout.check_same_shape(op.name(), rhs_layout)?;
        let a = read(op.name(), lhs, lhs_layout)?;
        let b = read(op.name(), rhs, rhs_layout)?;
        wrap(elementwise::binary(op, a, b)?)
    }

    fn compare(
        &self,
        op: CmpOp,
        lhs: &ExampleStorage,
        lhs_layout: &Layout,
        rhs: &ExampleStorage,
        rhs_layout: &Layout,
    ) -> Result<ExampleStorage> {
        lhs_layout.check_same_shape(op.name(), rhs_layout)?;
        let a = read(op.name(), lhs, lhs_layout)?;
        let b = read(op.name(), rhs, rhs_layout)?;
        wrap(elementwise::compare(op, a, b)?)
    }

    fn where_select(
        &self,
        cond: &ExampleStorage,
        cond_layout: &Layout,
        on_true: &ExampleStorage,
        true_layout: &Layout,
        on_false: &ExampleStorage,
        false_layout: &Layout,
    ) -> Result<ExampleStorage> {
        cond_layout.check_same_shape("where", true_layout)?;
        cond_layout.check_same_shape("where", false_layout)?;
        let c = read("where", cond, cond_layout)?;
        let t = read("where", on_true, true_layout)?;
        let f = read("where", on_false, false_layout)?;
        wrap(elementwise::where_select(c, t, f)?)
    }

    // ----- reductions -----

    fn reduce(
        &self,
        op: ReduceOp,
        x: &ExampleStorage,
        layout: &Layout,
        axes: &[usize],
    ) -> Result<ExampleStorage> {
        if let Some(&axis) = axes.iter().find(|&&a| a >= layout.rank()) {
            return Err(Error::AxisOutOfRange {
                op: op.name(),
                axis: axis as isize,
                rank: layout.rank(),
            });
        }
        let data = read(op.name(), x, layout)?;
        wrap(reduce::reduce(op, data, layout.dims(), axes)?)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &ExampleStorage,
        layout: &Layout,
        axis: usize,
    ) -> Result<ExampleStorage> {
        if axis >= layout.rank() || layout.dims()[axis] == 0 {
            return Err(Error::InvalidArgument {
                op: op.name(),
                msg: format!(
                    "axis {axis} of shape {} is missing or empty",
                    layout.shape()
                ),
            });
        }
        let data = read(op.name(), x, layout)?;
        wrap(reduce::arg_reduce(op, data, layout.dims(), axis)?)
    }

    // ----- linear algebra -----

    fn matmul(
        &self,
        lhs: &ExampleStorage,
        lhs_layout: &Layout,
        rhs: &ExampleStorage,
        rhs_layout: &Layout,
    ) -> Result<ExampleStorage> {
        let (l, r) = (lhs_layout.dims(), rhs_layout.dims());
        let rank = l.len();
        if rank < 2
            || r.len() != rank
            || l[..rank - 2] != r[..rank - 2]
            || l[rank - 1] != r[rank - 2]
        {
            return Err(Error::MatmulShape {
                lhs: lhs_layout.shape().clone(),
                rhs: rhs_layout.shape().clone(),
            });
        }
        let a = read("matmul", lhs, lhs_layout)?;
        let b = read("matmul", rhs, rhs_layout)?;
        wrap(matmul::matmul(a, l, b, r)?)
    }

    // ----- indexing -----

    fn index_select(
        &self,
        x: &ExampleStorage,
        layout: &Layout,
        axis: usize,
        indices: &ExampleStorage,
        indices_layout: &Layout,
    ) -> Result<ExampleStorage> {
        // `tensor-core` checks these before calling; a direct call may not have.
        layout.check_axis("index_select", axis)?;
        if indices_layout.rank() != 1 {
            return Err(Error::InvalidArgument {
                op: "index_select",
                msg: format!("indices must have rank 1, got {}", indices_layout.shape()),
            });
        }
        let data = read("index_select", x, layout)?;
        let idx = read("index_select", indices, indices_layout)?;
        wrap(indexing::index_select(data, layout.dims(), axis, &idx)?)
    }

    fn gather(
        &self,
        x: &ExampleStorage,
        layout: &Layout,
        axis: usize,
        indices: &ExampleStorage,
        indices_layout: &Layout,
    ) -> Result<ExampleStorage> {
        layout.check_axis("gather", axis)?;
        layout.check_indices_fit("gather", axis, indices_layout)?;
        let data = read("gather", x, layout)?;
        let idx = read("gather", indices, indices_layout)?;
        wrap(indexing::gather(
            data,
            layout.dims(),
            axis,
            &idx,
            indices_layout.dims(),
        )?)
    }

    fn scatter_add(
        &self,
        base: &ExampleStorage,
        base_layout: &Layout,
        axis: usize,
        indices: &ExampleStorage,
        indices_layout: &Layout,
        src: &ExampleStorage,
        src_layout: &Layout,
    ) -> Result<ExampleStorage> {
        base_layout.check_axis("scatter_add", axis)?;
        indices_layout.check_same_shape("scatter_add", src_layout)?;
        base_layout.check_indices_fit("scatter_add", axis, indices_layout)?;
        let data = read("scatter_add", base, base_layout)?;
        let idx = read("scatter_add", indices, indices_layout)?;
        let src = read("scatter_add", src, src_layout)?;
        let dims = base_layout.dims();
        wrap(indexing::scatter_add(
            data,
            dims,
            axis,
            &idx,
            indices_layout.dims(),
            src,
        )?)
    }

    // ----- random -----

    fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<ExampleStorage> {
        wrap(memory::random(dist, numel, dtype, seed, offset)?)
    }

    // ----- composites -----
    //
    // The defaults of `tessera_core::composite` chain several primitives. In F16/BF16 each of
    // those primitives rounds its result to 16 bits, and the chain drifts several 16-bit ulps
    // from the f32 result rounded once, which is what the contract asks for. So every
    // multi-step default runs in f32 between two casts: `in_f32` widens the 16-bit inputs, runs
    // the default, and rounds each f32 result once; it returns `None` for f32/f64 inputs, which
    // take the default as it is. (`concat` only copies and keeps its default.) A backend with a
    // fused kernel that computes 16-bit inputs in f32 and rounds once needs no wrapper.

    fn softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        in_f32([Some(x)], |[x]| composite::softmax(x.unwrap(), axis))
            .unwrap_or_else(|| composite::softmax(x, axis))
    }

    fn log_softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        in_f32([Some(x)], |[x]| composite::log_softmax(x.unwrap(), axis))
            .unwrap_or_else(|| composite::log_softmax(x, axis))
    }

    fn logsumexp(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        in_f32([Some(x)], |[x]| composite::logsumexp(x.unwrap(), axis))
            .unwrap_or_else(|| composite::logsumexp(x, axis))
    }

    fn conv2d(
        &self,
        x: &Tensor<Self>,
        weight: &Tensor<Self>,
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        in_f32([Some(x), Some(weight)], |[x, w]| {
            composite::conv2d(x.unwrap(), w.unwrap(), params)
        })
        .unwrap_or_else(|| composite::conv2d(x, weight, params))
    }

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

    fn conv2d_backward_weight(
        &self,
        x: &Tensor<Self>,
        grad_out: &Tensor<Self>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        in_f32([Some(x), Some(grad_out)], |[x, g]| {
            composite::conv2d_backward_weight(x.unwrap(), g.unwrap(), weight_dims, params)
        })
        .unwrap_or_else(|| composite::conv2d_backward_weight(x, grad_out, weight_dims, params))
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
        in_f32([Some(grad_out)], |[g]| {
            composite::max_pool2d_backward(g.unwrap(), window_argmax, input_dims, params)
        })
        .unwrap_or_else(|| {
            composite::max_pool2d_backward(grad_out, window_argmax, input_dims, params)
        })
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
        in_f32([Some(grad_out)], |[g]| {
            composite::avg_pool2d_backward(g.unwrap(), input_dims, params)
        })
        .unwrap_or_else(|| composite::avg_pool2d_backward(grad_out, input_dims, params))
    }

    fn scaled_dot_product_attention(
        &self,
        q: &Tensor<Self>,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        mask: Option<&Tensor<Self>>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Self>> {
        in_f32([Some(q), Some(k), Some(v), mask], |[q, k, v, m]| {
            composite::scaled_dot_product_attention(q.unwrap(), k.unwrap(), v.unwrap(), m, params)
        })
        .unwrap_or_else(|| composite::scaled_dot_product_attention(q, k, v, mask, params))
    }

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
        // In 16 bits this helper widens the operands and recomputes the forward pass in f32
        // (the saved 16-bit output is rounded, and the backward pass cancels against it).
        composite::attention_backward_in_f32(
            grad_out,
            (q, k, v),
            mask,
            forward,
            |(q, k, v), m| composite::scaled_dot_product_attention(q, k, v, m, params),
            |g, (q, k, v), m, f| {
                composite::scaled_dot_product_attention_backward(g, q, k, v, m, f, params)
            },
        )
        .unwrap_or_else(|| {
            composite::scaled_dot_product_attention_backward(
                grad_out, q, k, v, mask, forward, params,
            )
        })
    }

    fn relu_backward(&self, x: &Tensor<Self>, grad: &Tensor<Self>) -> Result<Tensor<Self>> {
        in_f32([Some(x), Some(grad)], |[x, g]| {
            composite::relu_backward(x.unwrap(), g.unwrap())
        })
        .unwrap_or_else(|| composite::relu_backward(x, grad))
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
