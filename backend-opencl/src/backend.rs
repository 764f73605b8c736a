//! [`OpenCl`]: the [`Backend`] implementation, dispatching every primitive to the kernels.

use crate::autotune::GemmConfig;
use crate::checks::check_operand;
use crate::counters::RuntimeStats;
use crate::device::{DeviceInfo, DeviceSelector};
use crate::ops::softmax::{last_axis, RowOp};
use crate::ops::{conv, elementwise, indexing, matmul, random, reduce, transfer};
use crate::runtime::Runtime;
use crate::storage::OpenClStorage;
use std::fmt;
use std::sync::Arc;
use tensor_core::{
    composite, ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, HostData, Layout, ReduceOp, Result, Tensor, UnaryOp,
};

/// An OpenCL device. Cheap to clone; every handle on one device shares its context, queue,
/// program cache and buffer pool.
///
/// Ops enqueue kernels on the device's in-order queue and return at once; only reading data back
/// ([`Tensor::to_vec`] and friends, i.e. [`Backend::download`]) and [`Backend::synchronize`] wait
/// for the device. Errors detected by kernels (an index out of range) are reported there.
#[derive(Clone)]
pub struct OpenCl {
    rt: Arc<Runtime>,
}

impl OpenCl {
    /// The default device: the one [`crate::DEVICE_ENV_VAR`] names, else the first GPU, else
    /// the first device.
    ///
    /// # Errors
    /// [`tensor_core::Error::NoDevice`] (saying what to install) when there is no OpenCL runtime
    /// or device; a driver error when the context cannot be created.
    pub fn new() -> Result<Self> {
        Self::select(DeviceSelector::Default)
    }

    /// The device at position `ordinal` of [`crate::list_devices`].
    pub fn from_ordinal(ordinal: usize) -> Result<Self> {
        Self::select(DeviceSelector::Ordinal(ordinal))
    }

    /// Device `device` of platform `platform`.
    pub fn from_platform_device(platform: usize, device: usize) -> Result<Self> {
        Self::select(DeviceSelector::PlatformDevice(platform, device))
    }

    /// The device `selector` designates.
    pub fn select(selector: DeviceSelector) -> Result<Self> {
        Ok(OpenCl {
            rt: Runtime::open(selector)?,
        })
    }

    /// What the device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.rt.info
    }

    /// The device's counters: host synchronisations, buffers created and reused, kernels
    /// launched, programs built (shared by every handle on the device, cumulative).
    pub fn stats(&self) -> RuntimeStats {
        self.rt.stats()
    }

    /// Bytes of free buffers the pool keeps for reuse.
    pub fn pooled_bytes(&self) -> usize {
        self.rt.cached_bytes()
    }

    /// The GEMM kernel and tiles used for `dtype` (tuned on first use, see
    /// [`crate::autotune`]).
    pub fn gemm_config(&self, dtype: DType) -> Result<GemmConfig> {
        crate::autotune::gemm_config(&self.rt, dtype)
    }

    pub(crate) fn runtime(&self) -> &Arc<Runtime> {
        &self.rt
    }

    /// Checks that `storage` is on this device and `layout` fits it.
    fn check(&self, op: &'static str, storage: &OpenClStorage, layout: &Layout) -> Result<()> {
        check_operand(op, &self.rt, storage, layout)
    }
}

impl fmt::Debug for OpenCl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OpenCl({})", self.rt.info)
    }
}

impl Backend for OpenCl {
    type Storage = OpenClStorage;

    fn name(&self) -> &'static str {
        "opencl"
    }

    fn device(&self) -> Device {
        Device {
            kind: "opencl",
            ordinal: self.rt.info.ordinal,
        }
    }

    fn supports_dtype(&self, dtype: DType) -> bool {
        dtype != DType::F64 || self.rt.info.has_fp64
    }

    fn upload(&self, data: HostData) -> Result<OpenClStorage> {
        if !self.supports_dtype(data.dtype()) {
            return Err(tensor_core::Error::UnsupportedDType {
                op: "upload",
                dtype: data.dtype(),
            });
        }
        self.rt.upload(data)
    }

    fn download(&self, storage: &OpenClStorage, layout: &Layout) -> Result<HostData> {
        self.check("download", storage, layout)?;
        transfer::download(&self.rt, storage, layout)
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<OpenClStorage> {
        if !self.supports_dtype(dtype) {
            return Err(tensor_core::Error::UnsupportedDType { op: "full", dtype });
        }
        transfer::full(&self.rt, numel, dtype, value)
    }

    fn copy_strided(&self, storage: &OpenClStorage, layout: &Layout) -> Result<OpenClStorage> {
        self.check("copy_strided", storage, layout)?;
        elementwise::copy_strided(&self.rt, storage, layout)
    }

    fn assign(
        &self,
        dst: &mut OpenClStorage,
        dst_layout: &Layout,
        src: &OpenClStorage,
        src_layout: &Layout,
        mode: AssignMode,
    ) -> Result<()> {
        self.check("assign", dst, dst_layout)?;
        self.check("assign", src, src_layout)?;
        elementwise::assign(&self.rt, dst, dst_layout, src, src_layout, mode)
    }

    fn cast(
        &self,
        storage: &OpenClStorage,
        layout: &Layout,
        dtype: DType,
    ) -> Result<OpenClStorage> {
        self.check("cast", storage, layout)?;
        elementwise::cast(&self.rt, storage, layout, dtype)
    }

    fn unary(&self, op: UnaryOp, x: &OpenClStorage, layout: &Layout) -> Result<OpenClStorage> {
        self.check(op.name(), x, layout)?;
        elementwise::unary(&self.rt, op, x, layout)
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &OpenClStorage,
        lhs_layout: &Layout,
        rhs: &OpenClStorage,
        rhs_layout: &Layout,
    ) -> Result<OpenClStorage> {
        self.check(op.name(), lhs, lhs_layout)?;
        self.check(op.name(), rhs, rhs_layout)?;
        elementwise::binary(&self.rt, op, lhs, lhs_layout, rhs, rhs_layout)
    }

    fn compare(
        &self,
        op: CmpOp,
        lhs: &OpenClStorage,
        lhs_layout: &Layout,
        rhs: &OpenClStorage,
        rhs_layout: &Layout,
    ) -> Result<OpenClStorage> {
        self.check(op.name(), lhs, lhs_layout)?;
        self.check(op.name(), rhs, rhs_layout)?;
        elementwise::compare(&self.rt, op, lhs, lhs_layout, rhs, rhs_layout)
    }

    fn where_select(
        &self,
        cond: &OpenClStorage,
        cond_layout: &Layout,
        on_true: &OpenClStorage,
        true_layout: &Layout,
        on_false: &OpenClStorage,
        false_layout: &Layout,
    ) -> Result<OpenClStorage> {
        self.check("where", cond, cond_layout)?;
        self.check("where", on_true, true_layout)?;
        self.check("where", on_false, false_layout)?;
        elementwise::where_select(
            &self.rt,
            (cond, cond_layout),
            (on_true, true_layout),
            (on_false, false_layout),
        )
    }

    fn reduce(
        &self,
        op: ReduceOp,
        x: &OpenClStorage,
        layout: &Layout,
        axes: &[usize],
    ) -> Result<OpenClStorage> {
        self.check(op.name(), x, layout)?;
        reduce::reduce(&self.rt, op, x, layout, axes)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &OpenClStorage,
        layout: &Layout,
        axis: usize,
    ) -> Result<OpenClStorage> {
        self.check(op.name(), x, layout)?;
        reduce::arg_reduce(&self.rt, op, x, layout, axis)
    }

    fn matmul(
        &self,
        lhs: &OpenClStorage,
        lhs_layout: &Layout,
        rhs: &OpenClStorage,
        rhs_layout: &Layout,
    ) -> Result<OpenClStorage> {
        self.check("matmul", lhs, lhs_layout)?;
        self.check("matmul", rhs, rhs_layout)?;
        matmul::matmul(&self.rt, lhs, lhs_layout, rhs, rhs_layout)
    }

    fn index_select(
        &self,
        x: &OpenClStorage,
        layout: &Layout,
        axis: usize,
        indices: &OpenClStorage,
        indices_layout: &Layout,
    ) -> Result<OpenClStorage> {
        self.check("index_select", x, layout)?;
        self.check("index_select", indices, indices_layout)?;
        indexing::index_select(&self.rt, x, layout, axis, indices, indices_layout)
    }

    fn gather(
        &self,
        x: &OpenClStorage,
        layout: &Layout,
        axis: usize,
        indices: &OpenClStorage,
        indices_layout: &Layout,
    ) -> Result<OpenClStorage> {
        self.check("gather", x, layout)?;
        self.check("gather", indices, indices_layout)?;
        indexing::gather(&self.rt, x, layout, axis, indices, indices_layout)
    }

    fn scatter_add(
        &self,
        base: &OpenClStorage,
        base_layout: &Layout,
        axis: usize,
        indices: &OpenClStorage,
        indices_layout: &Layout,
        src: &OpenClStorage,
        src_layout: &Layout,
    ) -> Result<OpenClStorage> {
        self.check("scatter_add", base, base_layout)?;
        self.check("scatter_add", indices, indices_layout)?;
        self.check("scatter_add", src, src_layout)?;
        indexing::scatter_add(
            &self.rt,
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
    ) -> Result<OpenClStorage> {
        if !self.supports_dtype(dtype) {
            return Err(tensor_core::Error::UnsupportedDType {
                op: "random",
                dtype,
            });
        }
        random::random(&self.rt, dist, numel, dtype, seed, offset)
    }

    fn synchronize(&self) -> Result<()> {
        self.rt.finish()
    }

    // ----- fused composites -----

    fn conv2d(
        &self,
        x: &Tensor<OpenCl>,
        weight: &Tensor<OpenCl>,
        params: Conv2dParams,
    ) -> Result<Tensor<OpenCl>> {
        if x.rank() != 4 || weight.rank() != 4 || !x.dtype().is_float() {
            return composite::conv2d(x, weight, params);
        }
        conv::conv2d(self, x, weight, params)
    }

    fn conv2d_backward_weight(
        &self,
        x: &Tensor<OpenCl>,
        grad_out: &Tensor<OpenCl>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<OpenCl>> {
        if x.rank() != 4 || grad_out.rank() != 4 || weight_dims.len() != 4 || !x.dtype().is_float()
        {
            return composite::conv2d_backward_weight(x, grad_out, weight_dims, params);
        }
        conv::conv2d_backward_weight(self, x, grad_out, weight_dims, params)
    }

    fn softmax(&self, x: &Tensor<OpenCl>, axis: usize) -> Result<Tensor<OpenCl>> {
        match last_axis(self, RowOp::Softmax, x, axis)? {
            Some(t) => Ok(t),
            None => composite::softmax(x, axis),
        }
    }

    fn log_softmax(&self, x: &Tensor<OpenCl>, axis: usize) -> Result<Tensor<OpenCl>> {
        match last_axis(self, RowOp::LogSoftmax, x, axis)? {
            Some(t) => Ok(t),
            None => composite::log_softmax(x, axis),
        }
    }

    fn logsumexp(&self, x: &Tensor<OpenCl>, axis: usize) -> Result<Tensor<OpenCl>> {
        match last_axis(self, RowOp::LogSumExp, x, axis)? {
            Some(t) => Ok(t),
            None => composite::logsumexp(x, axis),
        }
    }
}
