//! [`ExampleBackend`]: the `Backend` impl. Every primitive follows the same three steps: read
//! the inputs through their layouts into contiguous vectors, run the kernel, wrap the result as
//! a fresh contiguous storage.

use crate::strided::read;
use crate::{elementwise, indexing, matmul, memory, reduce, ExampleStorage};
use tessera_core::{
    ArgReduceOp, AssignMode, Backend, BackendStorage, BinaryOp, CmpOp, DType, Device, Distribution,
    Error, HostData, Layout, ReduceOp, Result, UnaryOp,
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

    /// The template covers the four 32/64-bit and integer dtypes; the 16-bit floats are left
    /// out (a new backend adds them like the CPU backend: 16-bit storage, f32 arithmetic).
    fn supports_dtype(&self, dtype: DType) -> bool {
        matches!(dtype, DType::F32 | DType::F64 | DType::I64 | DType::Bool)
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
}
