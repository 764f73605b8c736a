//! [`ExampleBackend`]: the `Backend` impl. Every primitive follows the same three steps: read
//! the inputs through their layouts into contiguous vectors, run the kernel, wrap the result as
//! a fresh contiguous storage. The operand types guarantee that layouts fit their storages and
//! that operands agree in shape, so nothing here re-checks them. The composites keep the
//! defaults of `tessera_core::composite`, and the 16-bit floats arrive widened to f32 from
//! tensor-core's dispatch.

use crate::strided::read;
use crate::{elementwise, indexing, matmul, memory, reduce, ExampleStorage};
use tessera_core::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape, ScatterAdd,
};
use tessera_core::{
    ArgReduceOp, AssignMode, Backend, BinaryOp, CmpOp, DType, Device, Distribution, Error,
    HostData, ReduceOp, Result, UnaryOp,
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

    fn download(&self, x: Operand<'_, ExampleStorage>) -> Result<HostData> {
        read(x)
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<ExampleStorage> {
        wrap(memory::full(numel, dtype, value)?)
    }

    fn copy_strided(&self, x: Operand<'_, ExampleStorage>) -> Result<ExampleStorage> {
        wrap(read(x)?)
    }

    fn assign(&self, to: Assignment<'_, ExampleStorage>, mode: AssignMode) -> Result<()> {
        let Assignment { mut dst, src } = to;
        let src = read(src)?;
        let (storage, layout) = dst.parts();
        memory::assign(storage.data_mut(), layout, src, mode)
    }

    fn cast(&self, x: Operand<'_, ExampleStorage>, dtype: DType) -> Result<ExampleStorage> {
        if !self.supports_dtype(dtype) {
            return Err(Error::UnsupportedDType { op: "cast", dtype });
        }
        wrap(elementwise::cast(read(x)?, dtype)?)
    }

    // ----- element-wise -----

    fn unary(&self, op: UnaryOp, x: Operand<'_, ExampleStorage>) -> Result<ExampleStorage> {
        wrap(elementwise::unary(op, read(x)?)?)
    }

    fn binary(&self, op: BinaryOp, xs: SameShape<'_, ExampleStorage, 2>) -> Result<ExampleStorage> {
        let [a, b] = xs.operands();
        wrap(elementwise::binary(op, read(a)?, read(b)?)?)
    }

    fn compare(&self, op: CmpOp, xs: SameShape<'_, ExampleStorage, 2>) -> Result<ExampleStorage> {
        let [a, b] = xs.operands();
        wrap(elementwise::compare(op, read(a)?, read(b)?)?)
    }

    fn where_select(&self, xs: SameShape<'_, ExampleStorage, 3>) -> Result<ExampleStorage> {
        let [c, t, f] = xs.operands();
        wrap(elementwise::where_select(read(c)?, read(t)?, read(f)?)?)
    }

    // ----- reductions -----

    fn reduce(
        &self,
        op: ReduceOp,
        x: Operand<'_, ExampleStorage>,
        axes: &[usize],
    ) -> Result<ExampleStorage> {
        if let Some(&axis) = axes.iter().find(|&&a| a >= x.dims().len()) {
            return Err(Error::AxisOutOfRange {
                op: op.name(),
                axis: axis as isize,
                rank: x.dims().len(),
            });
        }
        wrap(reduce::reduce(op, read(x)?, x.dims(), axes)?)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: Operand<'_, ExampleStorage>,
        axis: usize,
    ) -> Result<ExampleStorage> {
        if x.dims().get(axis).is_none_or(|&size| size == 0) {
            return Err(Error::InvalidArgument {
                op: op.name(),
                msg: format!(
                    "axis {axis} of shape {} is missing or empty",
                    x.layout().shape()
                ),
            });
        }
        wrap(reduce::arg_reduce(op, read(x)?, x.dims(), axis)?)
    }

    // ----- linear algebra -----

    fn matmul(&self, xs: MatmulOperands<'_, ExampleStorage>) -> Result<ExampleStorage> {
        let (l, r) = (xs.lhs, xs.rhs);
        wrap(matmul::matmul(read(l)?, l.dims(), read(r)?, r.dims())?)
    }

    // ----- indexing -----

    fn index_select(&self, xs: IndexSelect<'_, ExampleStorage>) -> Result<ExampleStorage> {
        let idx = read(xs.indices)?;
        wrap(indexing::index_select(
            read(xs.x)?,
            xs.x.dims(),
            xs.axis,
            &idx,
        )?)
    }

    fn gather(&self, xs: Gather<'_, ExampleStorage>) -> Result<ExampleStorage> {
        let idx = read(xs.indices)?;
        let (dims, idx_dims) = (xs.x.dims(), xs.indices.dims());
        wrap(indexing::gather(
            read(xs.x)?,
            dims,
            xs.axis,
            &idx,
            idx_dims,
        )?)
    }

    fn scatter_add(&self, xs: ScatterAdd<'_, ExampleStorage>) -> Result<ExampleStorage> {
        let (idx, src) = (read(xs.indices)?, read(xs.src)?);
        let (dims, idx_dims) = (xs.base.dims(), xs.indices.dims());
        wrap(indexing::scatter_add(
            read(xs.base)?,
            dims,
            xs.axis,
            &idx,
            idx_dims,
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
    // None: every composite keeps its default in `tessera_core::composite`, and the 16-bit
    // floats reach every compute op widened to f32 by tensor-core's dispatch (this backend
    // declares no op in `computes_16_bit`), so they cost this backend nothing but storage and
    // `cast`. A backend adds fused kernels here as overrides.
}
