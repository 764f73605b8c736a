//! [`Gpu`]: every primitive of the [`tessera_core::Backend`] contract at the storage level, over
//! any [`Driver`]: operand checks, then the op. `tessera_cuda::Cuda` holds a `Gpu<CudaDriver>`,
//! `tessera_opencl::OpenCl` a `Gpu<OpenClDriver>`.

use crate::checks::check_operand;
use crate::driver::Driver;
use crate::gemm::GemmOptions;
use crate::ops::softmax::RowOp;
use crate::ops::{conv, elementwise, indexing, matmul, random, reduce, softmax, transfer};
use crate::runtime::Runtime;
use crate::storage::GpuStorage;
use std::sync::Arc;
use tessera_core::{
    ArgReduceOp, AssignMode, BackendStorage, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, Error, HostData, Layout, ReduceOp, Result, UnaryOp,
};

/// A handle on one device: its shared runtime and this handle's GEMM options. Cheap to clone;
/// handles with different options on one device share everything else.
pub struct Gpu<D: Driver> {
    rt: Arc<Runtime<D>>,
    options: GemmOptions,
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
    /// A handle on `rt` whose matrix products follow `options`.
    pub fn new(rt: Arc<Runtime<D>>, options: GemmOptions) -> Self {
        Gpu { rt, options }
    }

    /// The shared runtime.
    pub fn runtime(&self) -> &Arc<Runtime<D>> {
        &self.rt
    }

    /// This handle's options.
    pub fn options(&self) -> &GemmOptions {
        &self.options
    }

    fn check(&self, op: &'static str, s: &GpuStorage<D>, l: &Layout) -> Result<()> {
        check_operand(op, &self.rt, s, l)
    }

    /// The backend name.
    pub fn name(&self) -> &'static str {
        self.rt.backend()
    }

    /// The device.
    pub fn device(&self) -> Device {
        Device {
            kind: self.rt.backend(),
            ordinal: self.rt.info().ordinal,
        }
    }

    /// Whether the device computes in `dtype` (f64 needs [`crate::DriverInfo::supports_f64`]).
    pub fn supports_dtype(&self, dtype: DType) -> bool {
        dtype != DType::F64 || self.rt.info().supports_f64
    }

    /// Errors unless the device computes in `dtype`.
    fn check_dtype(&self, op: &'static str, dtype: DType) -> Result<()> {
        if self.supports_dtype(dtype) {
            Ok(())
        } else {
            Err(Error::UnsupportedDType { op, dtype })
        }
    }

    /// [`tessera_core::Backend::upload`] at the storage level (operands checked first).
    pub fn upload(&self, data: HostData) -> Result<GpuStorage<D>> {
        self.check_dtype("upload", data.dtype())?;
        self.rt.upload(&data)
    }

    /// [`tessera_core::Backend::download`] at the storage level (operands checked first).
    pub fn download(&self, s: &GpuStorage<D>, l: &Layout) -> Result<HostData> {
        self.check("download", s, l)?;
        transfer::download(&self.rt, s, l)
    }

    /// [`tessera_core::Backend::full`] at the storage level (operands checked first).
    pub fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<GpuStorage<D>> {
        self.check_dtype("full", dtype)?;
        transfer::full(&self.rt, numel, dtype, value)
    }

    /// [`tessera_core::Backend::copy_strided`] at the storage level (operands checked first).
    pub fn copy_strided(&self, s: &GpuStorage<D>, l: &Layout) -> Result<GpuStorage<D>> {
        self.check("copy_strided", s, l)?;
        elementwise::copy_strided(&self.rt, s, l)
    }

    /// [`tessera_core::Backend::assign`] at the storage level (operands checked first).
    pub fn assign(
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

    /// [`tessera_core::Backend::cast`] at the storage level (operands checked first).
    pub fn cast(&self, s: &GpuStorage<D>, l: &Layout, dtype: DType) -> Result<GpuStorage<D>> {
        self.check("cast", s, l)?;
        self.check_dtype("cast", dtype)?;
        elementwise::cast(&self.rt, s, l, dtype)
    }

    /// [`tessera_core::Backend::unary`] at the storage level (operands checked first).
    pub fn unary(&self, op: UnaryOp, x: &GpuStorage<D>, l: &Layout) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, l)?;
        elementwise::unary(&self.rt, op, x, l)
    }

    /// [`tessera_core::Backend::binary`] at the storage level (operands checked first).
    pub fn binary(
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

    /// [`tessera_core::Backend::compare`] at the storage level (operands checked first).
    pub fn compare(
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

    /// [`tessera_core::Backend::where_select`] at the storage level (operands checked first).
    pub fn where_select(
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

    /// [`tessera_core::Backend::reduce`] at the storage level (operands checked first).
    pub fn reduce(
        &self,
        op: ReduceOp,
        x: &GpuStorage<D>,
        l: &Layout,
        axes: &[usize],
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, l)?;
        reduce::reduce(&self.rt, op, x, l, axes)
    }

    /// [`tessera_core::Backend::arg_reduce`] at the storage level (operands checked first).
    pub fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &GpuStorage<D>,
        l: &Layout,
        axis: usize,
    ) -> Result<GpuStorage<D>> {
        self.check(op.name(), x, l)?;
        reduce::arg_reduce(&self.rt, op, x, l, axis)
    }

    /// [`tessera_core::Backend::matmul`] at the storage level (operands checked first).
    pub fn matmul(
        &self,
        a: &GpuStorage<D>,
        la: &Layout,
        b: &GpuStorage<D>,
        lb: &Layout,
    ) -> Result<GpuStorage<D>> {
        self.check("matmul", a, la)?;
        self.check("matmul", b, lb)?;
        matmul::matmul(&self.rt, &self.options, a, la, b, lb)
    }

    /// [`tessera_core::Backend::index_select`] at the storage level (operands checked first).
    pub fn index_select(
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

    /// [`tessera_core::Backend::gather`] at the storage level (operands checked first).
    pub fn gather(
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

    /// [`tessera_core::Backend::scatter_add`] at the storage level (operands checked first).
    pub fn scatter_add(
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

    /// [`tessera_core::Backend::random`] at the storage level (operands checked first).
    pub fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<GpuStorage<D>> {
        self.check_dtype("random", dtype)?;
        random::random(&self.rt, dist, numel, dtype, seed, offset)
    }

    /// [`tessera_core::Backend::synchronize`] at the storage level (operands checked first).
    pub fn synchronize(&self) -> Result<()> {
        self.rt.finish()
    }

    /// The im2col columns of `x` for a kernel and output size (see `ops::conv`).
    pub fn im2col(
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
    pub fn fused_rows(
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

/// A backend's storage type seen as a [`GpuStorage`]: the bridge [`crate::impl_gpu_backend!`]
/// goes through (identity for `GpuStorage` itself, or a newtype such as `CudaStorage`).
pub trait StorageOf<D: Driver>: BackendStorage + Sized {
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
