//! [`Gpu`]: every primitive of the [`tensor_core::Backend`] contract at the storage level, over
//! any [`Driver`]: operand checks, then the op. [`crate::Cuda`] is a `Gpu<CudaDriver>`; this
//! crate's tests also run a `Gpu` over an OpenCL driver.

use crate::engine::checks::check_operand;
use crate::engine::driver::Driver;
use crate::engine::ops::softmax::RowOp;
use crate::engine::ops::{conv, elementwise, indexing, matmul, random, reduce, softmax, transfer};
use crate::engine::runtime::Runtime;
use crate::engine::storage::GpuStorage;
use crate::options::CudaOptions;
use std::sync::Arc;
use tensor_core::{
    ArgReduceOp, AssignMode, BackendStorage, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, HostData, Layout, ReduceOp, Result, UnaryOp,
};

/// A handle on one device: its shared runtime and this handle's options.
pub(crate) struct Gpu<D: Driver> {
    rt: Arc<Runtime<D>>,
    options: CudaOptions,
}

impl<D: Driver> Clone for Gpu<D> {
    fn clone(&self) -> Self {
        Gpu {
            rt: self.rt.clone(),
            options: self.options,
        }
    }
}

impl<D: Driver> std::fmt::Debug for Gpu<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gpu")
            .field("device", &self.rt.info().to_string())
            .field("options", &self.options)
            .finish()
    }
}

impl<D: Driver> Gpu<D> {
    /// A handle on `rt` with `options`.
    pub(crate) fn new(rt: Arc<Runtime<D>>, options: CudaOptions) -> Self {
        Gpu { rt, options }
    }

    /// The shared runtime.
    pub(crate) fn runtime(&self) -> &Arc<Runtime<D>> {
        &self.rt
    }

    /// This handle's options.
    pub(crate) fn options(&self) -> &CudaOptions {
        &self.options
    }

    fn check(&self, op: &'static str, s: &GpuStorage<D>, l: &Layout) -> Result<()> {
        check_operand(op, &self.rt, s, l)
    }

    /// The backend name.
    pub(crate) fn name(&self) -> &'static str {
        self.rt.backend()
    }

    /// The device.
    pub(crate) fn device(&self) -> Device {
        Device {
            kind: self.rt.backend(),
            ordinal: self.rt.info().ordinal,
        }
    }

    pub(crate) fn upload(&self, data: HostData) -> Result<GpuStorage<D>> {
        self.rt.upload(&data)
    }

    pub(crate) fn download(&self, s: &GpuStorage<D>, l: &Layout) -> Result<HostData> {
        self.check("download", s, l)?;
        transfer::download(&self.rt, s, l)
    }

    pub(crate) fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<GpuStorage<D>> {
        transfer::full(&self.rt, numel, dtype, value)
    }

    pub(crate) fn copy_strided(&self, s: &GpuStorage<D>, l: &Layout) -> Result<GpuStorage<D>> {
        self.check("copy_strided", s, l)?;
        elementwise::copy_strided(&self.rt, s, l)
    }

    pub(crate) fn assign(
        &self,
        dst: &GpuStorage<D>,
        dst_layout: &Layout,
        src: &GpuStorage<D>,
        src_layout: &Layout,
        mode: AssignMode,
    ) -> Result<()> {
        self.check("assign", dst, dst_layout)?;
        self.check("assign", src, src_layout)?;
        elementwise::assign(&self.rt, dst, dst_layout, src, src_layout, mode)
    }

    pub(crate) fn cast(
        &self,
        s: &GpuStorage<D>,
        l: &Layout,
        dtype: DType,
    ) -> Result<GpuStorage<D>> {
        self.check("cast", s, l)?;
        elementwise::cast(&self.rt, s, l, dtype)
    }

    pub(crate) fn unary(
        &self,
        op: UnaryOp,
        x: &GpuStorage<D>,
        l: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, l)?;
        elementwise::unary(&self.rt, op, x, l)
    }

    pub(crate) fn binary(
        &self,
        op: BinaryOp,
        a: &GpuStorage<D>,
        la: &Layout,
        b: &GpuStorage<D>,
        lb: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), a, la)?;
        self.check(op.name(), b, lb)?;
        elementwise::binary(&self.rt, op, a, la, b, lb)
    }

    pub(crate) fn compare(
        &self,
        op: CmpOp,
        a: &GpuStorage<D>,
        la: &Layout,
        b: &GpuStorage<D>,
        lb: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), a, la)?;
        self.check(op.name(), b, lb)?;
        elementwise::compare(&self.rt, op, a, la, b, lb)
    }

    pub(crate) fn where_select(
        &self,
        cond: (&GpuStorage<D>, &Layout),
        on_true: (&GpuStorage<D>, &Layout),
        on_false: (&GpuStorage<D>, &Layout),
    ) -> Result<GpuStorage<D>> {
        for (s, l) in [cond, on_true, on_false] {
            self.check("where", s, l)?;
        }
        elementwise::where_select(&self.rt, cond, on_true, on_false)
    }

    pub(crate) fn reduce(
        &self,
        op: ReduceOp,
        x: &GpuStorage<D>,
        l: &Layout,
        axes: &[usize],
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, l)?;
        reduce::reduce(&self.rt, op, x, l, axes)
    }

    pub(crate) fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &GpuStorage<D>,
        l: &Layout,
        axis: usize,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, l)?;
        reduce::arg_reduce(&self.rt, op, x, l, axis)
    }

    pub(crate) fn matmul(
        &self,
        a: &GpuStorage<D>,
        la: &Layout,
        b: &GpuStorage<D>,
        lb: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check("matmul", a, la)?;
        self.check("matmul", b, lb)?;
        let o = &self.options;
        matmul::matmul(&self.rt, o.gemm, &o.tiles, a, la, b, lb)
    }

    pub(crate) fn index_select(
        &self,
        x: &GpuStorage<D>,
        l: &Layout,
        axis: usize,
        indices: &GpuStorage<D>,
        il: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check("index_select", x, l)?;
        self.check("index_select", indices, il)?;
        indexing::index_select(&self.rt, x, l, axis, indices, il)
    }

    pub(crate) fn gather(
        &self,
        x: &GpuStorage<D>,
        l: &Layout,
        axis: usize,
        indices: &GpuStorage<D>,
        il: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check("gather", x, l)?;
        self.check("gather", indices, il)?;
        indexing::gather(&self.rt, x, l, axis, indices, il)
    }

    pub(crate) fn scatter_add(
        &self,
        base: (&GpuStorage<D>, &Layout),
        axis: usize,
        indices: (&GpuStorage<D>, &Layout),
        src: (&GpuStorage<D>, &Layout),
    ) -> Result<GpuStorage<D>> {
        for (s, l) in [base, indices, src] {
            self.check("scatter_add", s, l)?;
        }
        indexing::scatter_add(
            &self.rt, base.0, base.1, axis, indices.0, indices.1, src.0, src.1,
        )
    }

    pub(crate) fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<GpuStorage<D>> {
        random::random(&self.rt, dist, numel, dtype, seed, offset)
    }

    pub(crate) fn synchronize(&self) -> Result<()> {
        self.rt.finish()
    }

    /// The im2col columns of `x` for a kernel and output size (see `ops::conv`).
    pub(crate) fn im2col(
        &self,
        x: &GpuStorage<D>,
        l: &Layout,
        kernel: (usize, usize),
        p: Conv2dParams,
        out_hw: (usize, usize),
    ) -> Result<(GpuStorage<D>, Layout)> {
        self.check("conv2d", x, l)?;
        conv::im2col(&self.rt, x, l, kernel, p, out_hw)
    }

    /// The fused row kernel for `op`, or None when the composite default must run instead.
    pub(crate) fn fused_rows(
        &self,
        op: RowOp,
        x: &GpuStorage<D>,
        l: &Layout,
        axis: usize,
    ) -> Result<Option<(GpuStorage<D>, Layout)>> {
        self.check("softmax", x, l)?;
        softmax::last_axis(&self.rt, op, x, l, axis)
    }
}

/// A backend's storage type seen as a [`GpuStorage`]: the bridge the Backend implementation
/// macro goes through (identity for `GpuStorage` itself, a newtype for `CudaStorage`).
pub(crate) trait StorageOf<D: Driver>: BackendStorage + Sized {
    /// The device storage.
    fn gpu(&self) -> &GpuStorage<D>;
    /// Wraps a device storage.
    fn wrap(storage: GpuStorage<D>) -> Self;
}

impl<D: Driver> StorageOf<D> for GpuStorage<D> {
    fn gpu(&self) -> &GpuStorage<D> {
        self
    }

    fn wrap(storage: GpuStorage<D>) -> Self {
        storage
    }
}
