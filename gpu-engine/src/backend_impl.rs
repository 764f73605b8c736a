//! [`impl_gpu_backend!`]: the [`tessera_core::Backend`] implementation of a type that holds a
//! [`crate::Gpu`], written once for every driver.

/// Implements `tessera_core::Backend` for `$backend` with storage `$storage`.
///
/// `$backend` must have a method `fn gpu(&self) -> &tessera_gpu::Gpu<D>` and `$storage` must
/// implement [`crate::StorageOf<D>`]; the invoking crate must depend on `tessera_core`. Softmax,
/// log-softmax and log-sum-exp use the fused kernel where it applies, conv2d and its weight
/// gradient im2col plus the GEMM, scaled dot-product attention and its gradient the fused
/// kernels of `attention.cl.c`; every other composite keeps its default.
///
/// ```ignore
/// pub struct MyGpu { gpu: tessera_gpu::Gpu<MyDriver> }
/// impl MyGpu { fn gpu(&self) -> &tessera_gpu::Gpu<MyDriver> { &self.gpu } }
/// tessera_gpu::impl_gpu_backend!(MyGpu, tessera_gpu::GpuStorage<MyDriver>);
/// ```
#[macro_export]
macro_rules! impl_gpu_backend {
    ($backend:ty, $storage:ty) => {
        const _: () = {
            use $crate::__private::RowOp;
            use $crate::StorageOf;

            impl tessera_core::Backend for $backend {
                type Storage = $storage;

                fn name(&self) -> &'static str {
                    self.gpu().name()
                }

                fn device(&self) -> tessera_core::Device {
                    self.gpu().device()
                }

                fn supports_dtype(&self, _dtype: tessera_core::DType) -> bool {
                    true
                }

                fn upload(&self, data: tessera_core::HostData) -> tessera_core::Result<$storage> {
                    self.gpu().upload(data).map(StorageOf::wrap)
                }

                fn download(
                    &self,
                    storage: &$storage,
                    layout: &tessera_core::Layout,
                ) -> tessera_core::Result<tessera_core::HostData> {
                    self.gpu().download(storage.gpu(), layout)
                }

                fn full(
                    &self,
                    numel: usize,
                    dtype: tessera_core::DType,
                    value: f64,
                ) -> tessera_core::Result<$storage> {
                    self.gpu().full(numel, dtype, value).map(StorageOf::wrap)
                }

                fn copy_strided(
                    &self,
                    storage: &$storage,
                    layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .copy_strided(storage.gpu(), layout)
                        .map(StorageOf::wrap)
                }

                fn assign(
                    &self,
                    dst: &mut $storage,
                    dst_layout: &tessera_core::Layout,
                    src: &$storage,
                    src_layout: &tessera_core::Layout,
                    mode: tessera_core::AssignMode,
                ) -> tessera_core::Result<()> {
                    self.gpu()
                        .assign(dst.gpu(), dst_layout, src.gpu(), src_layout, mode)
                }

                fn cast(
                    &self,
                    storage: &$storage,
                    layout: &tessera_core::Layout,
                    dtype: tessera_core::DType,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .cast(storage.gpu(), layout, dtype)
                        .map(StorageOf::wrap)
                }

                fn unary(
                    &self,
                    op: tessera_core::UnaryOp,
                    x: &$storage,
                    layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu().unary(op, x.gpu(), layout).map(StorageOf::wrap)
                }

                fn binary(
                    &self,
                    op: tessera_core::BinaryOp,
                    lhs: &$storage,
                    lhs_layout: &tessera_core::Layout,
                    rhs: &$storage,
                    rhs_layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .binary(op, lhs.gpu(), lhs_layout, rhs.gpu(), rhs_layout)
                        .map(StorageOf::wrap)
                }

                fn compare(
                    &self,
                    op: tessera_core::CmpOp,
                    lhs: &$storage,
                    lhs_layout: &tessera_core::Layout,
                    rhs: &$storage,
                    rhs_layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .compare(op, lhs.gpu(), lhs_layout, rhs.gpu(), rhs_layout)
                        .map(StorageOf::wrap)
                }

                fn where_select(
                    &self,
                    cond: &$storage,
                    cond_layout: &tessera_core::Layout,
                    on_true: &$storage,
                    true_layout: &tessera_core::Layout,
                    on_false: &$storage,
                    false_layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .where_select(
                            (cond.gpu(), cond_layout),
                            (on_true.gpu(), true_layout),
                            (on_false.gpu(), false_layout),
                        )
                        .map(StorageOf::wrap)
                }

                fn reduce(
                    &self,
                    op: tessera_core::ReduceOp,
                    x: &$storage,
                    layout: &tessera_core::Layout,
                    axes: &[usize],
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .reduce(op, x.gpu(), layout, axes)
                        .map(StorageOf::wrap)
                }

                fn arg_reduce(
                    &self,
                    op: tessera_core::ArgReduceOp,
                    x: &$storage,
                    layout: &tessera_core::Layout,
                    axis: usize,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .arg_reduce(op, x.gpu(), layout, axis)
                        .map(StorageOf::wrap)
                }

                fn matmul(
                    &self,
                    lhs: &$storage,
                    lhs_layout: &tessera_core::Layout,
                    rhs: &$storage,
                    rhs_layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .matmul(lhs.gpu(), lhs_layout, rhs.gpu(), rhs_layout)
                        .map(StorageOf::wrap)
                }

                fn index_select(
                    &self,
                    x: &$storage,
                    layout: &tessera_core::Layout,
                    axis: usize,
                    indices: &$storage,
                    indices_layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .index_select(x.gpu(), layout, axis, indices.gpu(), indices_layout)
                        .map(StorageOf::wrap)
                }

                fn gather(
                    &self,
                    x: &$storage,
                    layout: &tessera_core::Layout,
                    axis: usize,
                    indices: &$storage,
                    indices_layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .gather(x.gpu(), layout, axis, indices.gpu(), indices_layout)
                        .map(StorageOf::wrap)
                }

                fn scatter_add(
                    &self,
                    base: &$storage,
                    base_layout: &tessera_core::Layout,
                    axis: usize,
                    indices: &$storage,
                    indices_layout: &tessera_core::Layout,
                    src: &$storage,
                    src_layout: &tessera_core::Layout,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .scatter_add(
                            (base.gpu(), base_layout),
                            axis,
                            (indices.gpu(), indices_layout),
                            (src.gpu(), src_layout),
                        )
                        .map(StorageOf::wrap)
                }

                fn random(
                    &self,
                    dist: tessera_core::Distribution,
                    numel: usize,
                    dtype: tessera_core::DType,
                    seed: u64,
                    offset: u64,
                ) -> tessera_core::Result<$storage> {
                    self.gpu()
                        .random(dist, numel, dtype, seed, offset)
                        .map(StorageOf::wrap)
                }

                fn synchronize(&self) -> tessera_core::Result<()> {
                    self.gpu().synchronize()
                }

                fn conv2d(
                    &self,
                    x: &tessera_core::Tensor<Self>,
                    weight: &tessera_core::Tensor<Self>,
                    params: tessera_core::Conv2dParams,
                ) -> tessera_core::Result<tessera_core::Tensor<Self>> {
                    if x.rank() != 4 || weight.rank() != 4 || !x.dtype().is_float() {
                        return tessera_core::composite::conv2d(x, weight, params);
                    }
                    let columns = |kernel, out_hw| {
                        let (s, l) = self.gpu().im2col(
                            x.storage().gpu(),
                            x.layout(),
                            kernel,
                            params,
                            out_hw,
                        )?;
                        tessera_core::Tensor::from_parts(self, StorageOf::wrap(s), l)
                    };
                    $crate::__private::conv2d(x, weight, params, &columns)
                }

                fn conv2d_backward_weight(
                    &self,
                    x: &tessera_core::Tensor<Self>,
                    grad_out: &tessera_core::Tensor<Self>,
                    weight_dims: &[usize],
                    params: tessera_core::Conv2dParams,
                ) -> tessera_core::Result<tessera_core::Tensor<Self>> {
                    if x.rank() != 4
                        || grad_out.rank() != 4
                        || weight_dims.len() != 4
                        || !x.dtype().is_float()
                    {
                        return tessera_core::composite::conv2d_backward_weight(
                            x,
                            grad_out,
                            weight_dims,
                            params,
                        );
                    }
                    let columns = |kernel, out_hw| {
                        let (s, l) = self.gpu().im2col(
                            x.storage().gpu(),
                            x.layout(),
                            kernel,
                            params,
                            out_hw,
                        )?;
                        tessera_core::Tensor::from_parts(self, StorageOf::wrap(s), l)
                    };
                    $crate::__private::conv2d_backward_weight(x, grad_out, weight_dims, &columns)
                }

                fn scaled_dot_product_attention(
                    &self,
                    q: &tessera_core::Tensor<Self>,
                    k: &tessera_core::Tensor<Self>,
                    v: &tessera_core::Tensor<Self>,
                    mask: Option<&tessera_core::Tensor<Self>>,
                    params: &tessera_core::AttentionParams,
                ) -> tessera_core::Result<tessera_core::AttentionOutput<Self>> {
                    $crate::__private::attention_forward(self.gpu(), q, k, v, mask, params)
                }

                fn scaled_dot_product_attention_backward(
                    &self,
                    grad_out: &tessera_core::Tensor<Self>,
                    q: &tessera_core::Tensor<Self>,
                    k: &tessera_core::Tensor<Self>,
                    v: &tessera_core::Tensor<Self>,
                    mask: Option<&tessera_core::Tensor<Self>>,
                    forward: &tessera_core::AttentionOutput<Self>,
                    params: &tessera_core::AttentionParams,
                ) -> tessera_core::Result<tessera_core::AttentionGrads<Self>> {
                    $crate::__private::attention_backward(
                        self.gpu(),
                        grad_out,
                        q,
                        k,
                        v,
                        mask,
                        forward,
                        params,
                    )
                }

                fn softmax(
                    &self,
                    x: &tessera_core::Tensor<Self>,
                    axis: usize,
                ) -> tessera_core::Result<tessera_core::Tensor<Self>> {
                    let fused = self.gpu().fused_rows(
                        RowOp::Softmax,
                        x.storage().gpu(),
                        x.layout(),
                        axis,
                    )?;
                    match fused {
                        Some((s, l)) => {
                            tessera_core::Tensor::from_parts(self, StorageOf::wrap(s), l)
                        }
                        None => tessera_core::composite::softmax(x, axis),
                    }
                }

                fn log_softmax(
                    &self,
                    x: &tessera_core::Tensor<Self>,
                    axis: usize,
                ) -> tessera_core::Result<tessera_core::Tensor<Self>> {
                    let fused = self.gpu().fused_rows(
                        RowOp::LogSoftmax,
                        x.storage().gpu(),
                        x.layout(),
                        axis,
                    )?;
                    match fused {
                        Some((s, l)) => {
                            tessera_core::Tensor::from_parts(self, StorageOf::wrap(s), l)
                        }
                        None => tessera_core::composite::log_softmax(x, axis),
                    }
                }

                fn logsumexp(
                    &self,
                    x: &tessera_core::Tensor<Self>,
                    axis: usize,
                ) -> tessera_core::Result<tessera_core::Tensor<Self>> {
                    let fused = self.gpu().fused_rows(
                        RowOp::LogSumExp,
                        x.storage().gpu(),
                        x.layout(),
                        axis,
                    )?;
                    match fused {
                        Some((s, l)) => {
                            tessera_core::Tensor::from_parts(self, StorageOf::wrap(s), l)
                        }
                        None => tessera_core::composite::logsumexp(x, axis),
                    }
                }
            }
        };
    };
}
