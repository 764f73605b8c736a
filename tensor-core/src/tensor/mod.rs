//! [`Tensor<B>`]: an n-dimensional array on backend `B`.
//!
//! The methods are split by concept: construction and host transfer here, views in `views`,
//! element-wise math in `elementwise`, reductions in `reduce`, matrix products in `linalg`,
//! indexing in `indexing`, neural-network ops in `nn_ops`, `std::ops` in `std_ops` and printing
//! in `display`.

mod attention;
pub use attention::{check_attention_backward_operands, check_attention_operands};
mod display;
mod elementwise;
mod in_place;
mod indexing;
pub use indexing::concat_shape;
mod linalg;
mod nn_ops;
mod window_shapes;
pub use window_shapes::{
    check_conv2d, check_conv2d_backward_input, check_conv2d_backward_weight, check_pool2d_backward,
    conv_output_dims, interior_taps, pool_output_dims, window_output_len,
};
mod reduce;
mod std_ops;
mod views;

use crate::operand::Operand;
use crate::{
    Backend, BackendStorage, DType, Distribution, Element, Error, Generator, HostData, Layout,
    Result, Shape,
};
use std::sync::Arc;

/// An n-dimensional array of one dtype on a backend `B`.
///
/// Cloning is cheap (the storage is shared); views share storage too. Tensors are immutable: every
/// op returns a new tensor.
pub struct Tensor<B: Backend> {
    storage: Arc<B::Storage>,
    layout: Layout,
    backend: B,
}

impl<B: Backend> Clone for Tensor<B> {
    fn clone(&self) -> Self {
        Tensor {
            storage: self.storage.clone(),
            layout: self.layout.clone(),
            backend: self.backend.clone(),
        }
    }
}

impl<B: Backend> Tensor<B> {
    // ----- parts -----

    /// Assembles a tensor from a storage and a layout, checking that the layout obeys the limits
    /// of [`crate::limits`] and stays inside the storage. This is how backends and extension
    /// crates wrap results of their own kernels.
    pub fn from_parts(backend: &B, storage: B::Storage, layout: Layout) -> Result<Self> {
        Self::from_shared(backend, Arc::new(storage), layout)
    }

    /// Like [`Tensor::from_parts`] for an already shared storage.
    pub fn from_shared(backend: &B, storage: Arc<B::Storage>, layout: Layout) -> Result<Self> {
        const OP: &str = "from_parts";
        layout.check_fits(OP, storage.len())?;
        Ok(Tensor {
            storage,
            layout,
            backend: backend.clone(),
        })
    }

    /// Wraps a fresh contiguous storage produced by a primitive. `shape` has passed
    /// [`check_output`] (so its contiguous layout is exact).
    pub(crate) fn from_output(backend: &B, storage: B::Storage, shape: impl Into<Shape>) -> Self {
        Tensor {
            storage: Arc::new(storage),
            layout: Layout::contiguous(shape),
            backend: backend.clone(),
        }
    }

    /// This tensor as a backend operand (its layout checked against its storage, as every
    /// operand is; cheap: `O(rank)`).
    pub fn operand(&self, op: &'static str) -> Result<Operand<'_, B::Storage>> {
        Operand::new(op, &self.storage, &self.layout)
    }

    /// Same storage and backend, another layout (a view).
    pub(crate) fn with_layout(&self, layout: Layout) -> Self {
        Tensor {
            storage: self.storage.clone(),
            layout,
            backend: self.backend.clone(),
        }
    }

    /// The storage shared by this tensor and its views.
    pub fn storage(&self) -> &B::Storage {
        &self.storage
    }

    /// The shared storage handle.
    pub fn storage_arc(&self) -> &Arc<B::Storage> {
        &self.storage
    }

    /// How the elements map onto the storage.
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The backend (device) this tensor lives on.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The shape.
    pub fn shape(&self) -> &Shape {
        self.layout.shape()
    }

    /// The dimensions.
    pub fn dims(&self) -> &[usize] {
        self.layout.dims()
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.layout.rank()
    }

    /// The number of elements.
    pub fn numel(&self) -> usize {
        self.layout.numel()
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.storage.dtype()
    }

    /// Size of dimension `axis` (negative counts from the end).
    pub fn dim(&self, axis: isize) -> Result<usize> {
        Ok(self.dims()[self.shape().axis("dim", axis)?])
    }

    /// True when the layout is row-major without gaps.
    pub fn is_contiguous(&self) -> bool {
        self.layout.is_contiguous()
    }

    // ----- construction -----

    /// A tensor holding `data` with `shape` (row-major).
    pub fn from_vec<T: Element>(data: Vec<T>, shape: impl Into<Shape>, backend: &B) -> Result<Self>
    where
        Vec<T>: IntoHostData,
    {
        let shape = shape.into();
        shape.check_size("from_vec")?;
        if data.len() != shape.numel() {
            return Err(Error::DataLength {
                op: "from_vec",
                shape: shape.clone(),
                expected: shape.numel(),
                got: data.len(),
            });
        }
        Self::from_host(data.into_host_data(), shape, backend)
    }

    /// A tensor copied from a slice with `shape`.
    pub fn from_slice<T: Element>(data: &[T], shape: impl Into<Shape>, backend: &B) -> Result<Self>
    where
        Vec<T>: IntoHostData,
    {
        Self::from_vec(data.to_vec(), shape, backend)
    }

    /// A tensor from host data of any dtype with `shape`.
    pub fn from_host(data: HostData, shape: impl Into<Shape>, backend: &B) -> Result<Self> {
        let shape = shape.into();
        shape.check_bytes("from_host", data.dtype())?;
        if data.len() != shape.numel() {
            return Err(Error::DataLength {
                op: "from_host",
                shape: shape.clone(),
                expected: shape.numel(),
                got: data.len(),
            });
        }
        check_dtype_supported(backend, "from_host", data.dtype())?;
        let storage = backend.upload(data)?;
        Ok(Self::from_output(backend, storage, shape))
    }

    /// A rank-0 tensor holding `value`.
    pub fn scalar<T: Element>(value: T, backend: &B) -> Result<Self>
    where
        Vec<T>: IntoHostData,
    {
        Self::from_vec(vec![value], Shape::scalar(), backend)
    }

    /// A tensor of `shape` filled with `value` (converted to `dtype`).
    pub fn full(shape: impl Into<Shape>, value: f64, dtype: DType, backend: &B) -> Result<Self> {
        Self::filled("full", shape.into(), value, dtype, backend)
    }

    /// [`Tensor::full`] reporting errors as `op`.
    fn filled(
        op: &'static str,
        shape: Shape,
        value: f64,
        dtype: DType,
        backend: &B,
    ) -> Result<Self> {
        check_output(op, &shape, dtype)?;
        check_dtype_supported(backend, op, dtype)?;
        let storage = backend.full(shape.numel(), dtype, value)?;
        Ok(Self::from_output(backend, storage, shape))
    }

    /// A tensor of zeros.
    pub fn zeros(shape: impl Into<Shape>, dtype: DType, backend: &B) -> Result<Self> {
        Self::filled("zeros", shape.into(), 0.0, dtype, backend)
    }

    /// A tensor of ones.
    pub fn ones(shape: impl Into<Shape>, dtype: DType, backend: &B) -> Result<Self> {
        Self::filled("ones", shape.into(), 1.0, dtype, backend)
    }

    /// Zeros with this tensor's shape, dtype and device.
    pub fn zeros_like(&self) -> Result<Self> {
        Self::zeros(self.shape(), self.dtype(), &self.backend)
    }

    /// Ones with this tensor's shape, dtype and device.
    pub fn ones_like(&self) -> Result<Self> {
        Self::ones(self.shape(), self.dtype(), &self.backend)
    }

    /// `value` with this tensor's shape, dtype and device.
    pub fn full_like(&self, value: f64) -> Result<Self> {
        Self::full(self.shape(), value, self.dtype(), &self.backend)
    }

    /// `start, start + step, ...` below `end` (above it for a negative step), as a rank-1 tensor.
    /// The values are computed on the host (in f64, then converted) and uploaded; a count beyond
    /// [`crate::limits`] is [`Error::SizeOverflow`], one the host cannot hold
    /// [`Error::OutOfMemory`].
    pub fn arange(start: f64, end: f64, step: f64, dtype: DType, backend: &B) -> Result<Self> {
        const OP: &str = "arange";
        if step == 0.0 || !step.is_finite() || !start.is_finite() || !end.is_finite() {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "start {start}, end {end} and step {step} must be finite, step non-zero"
                ),
            });
        }
        // `end - start` may overflow to infinity; the count is checked before any cast.
        let count = ((end - start) / step).ceil().max(0.0);
        if count.is_nan() || count >= isize::MAX as f64 {
            return Err(Error::SizeOverflow {
                op: OP,
                msg: format!("{start}..{end} in steps of {step} has {count:e} elements"),
            });
        }
        let n = count as usize;
        let shape = Shape::new([n]);
        check_output(OP, &shape, dtype)?;
        let data = host_values(dtype, n, |i| start + i as f64 * step)?;
        Self::from_host(data, shape, backend)
    }

    /// `steps` evenly spaced values from `start` to `end` inclusive (computed on the host like
    /// [`Tensor::arange`]).
    pub fn linspace(start: f64, end: f64, steps: usize, dtype: DType, backend: &B) -> Result<Self> {
        const OP: &str = "linspace";
        let shape = Shape::new([steps]);
        check_output(OP, &shape, dtype)?;
        let step = (end - start) / steps.saturating_sub(1).max(1) as f64;
        let data = host_values(dtype, steps, |i| match i {
            0 => start,
            i if i + 1 == steps => end,
            i => start + i as f64 * step,
        })?;
        Self::from_host(data, shape, backend)
    }

    /// The `n x n` identity matrix: zeros with ones written on the diagonal (a strided view of
    /// stride `n + 1`), so nothing of size `n²` passes through the host.
    pub fn eye(n: usize, dtype: DType, backend: &B) -> Result<Self> {
        const OP: &str = "eye";
        let shape = Shape::new([n, n]);
        check_output(OP, &shape, dtype)?;
        let mut out = Self::filled(OP, shape, 0.0, dtype, backend)?;
        if n > 0 {
            // n² fits an isize (checked above), so n + 1 and the diagonal's offsets do too.
            let diagonal = Layout::strided([n], vec![n as isize + 1], 0, n * n)?;
            let ones = Self::filled(OP, Shape::new([n]), 1.0, dtype, backend)?;
            out.assign_into(&diagonal, &ones, false)?;
        }
        Ok(out)
    }

    /// Builds a tensor from f64 values converted to `dtype` on the host.
    pub fn from_f64_values(
        values: &[f64],
        shape: impl Into<Shape>,
        dtype: DType,
        backend: &B,
    ) -> Result<Self> {
        let shape = shape.into();
        shape.check_bytes("from_f64_values", dtype)?;
        if values.len() != shape.numel() {
            return Err(Error::DataLength {
                op: "from_f64_values",
                expected: shape.numel(),
                got: values.len(),
                shape,
            });
        }
        let data = host_values(dtype, values.len(), |i| values[i])?;
        Self::from_host(data, shape, backend)
    }

    /// Samples of `dist` drawn from the counter-based stream `(seed, offset)` (see
    /// [`crate::random`]): the same on every backend.
    pub fn random(
        shape: impl Into<Shape>,
        dist: Distribution,
        dtype: DType,
        seed: u64,
        offset: u64,
        backend: &B,
    ) -> Result<Self> {
        let shape = shape.into();
        if !dtype.is_float() {
            return Err(Error::UnsupportedDType {
                op: "random",
                dtype,
            });
        }
        check_output("random", &shape, dtype)?;
        check_dtype_supported(backend, "random", dtype)?;
        let storage = backend.random(dist, shape.numel(), dtype, seed, offset)?;
        Ok(Self::from_output(backend, storage, shape))
    }

    /// Uniform samples on `[0, 1)` from stream `seed`.
    pub fn rand(shape: impl Into<Shape>, dtype: DType, seed: u64, backend: &B) -> Result<Self> {
        Self::random(
            shape,
            Distribution::Uniform {
                low: 0.0,
                high: 1.0,
            },
            dtype,
            seed,
            0,
            backend,
        )
    }

    /// Standard normal samples from stream `seed`.
    pub fn randn(shape: impl Into<Shape>, dtype: DType, seed: u64, backend: &B) -> Result<Self> {
        Self::random(
            shape,
            Distribution::Normal {
                mean: 0.0,
                std: 1.0,
            },
            dtype,
            seed,
            0,
            backend,
        )
    }

    /// Samples of `dist` from a [`Generator`], which then moves past them.
    pub fn random_from(
        shape: impl Into<Shape>,
        dist: Distribution,
        dtype: DType,
        generator: &mut Generator,
        backend: &B,
    ) -> Result<Self> {
        let shape = shape.into();
        // Checked before the generator moves, so a rejected draw consumes nothing.
        check_output("random", &shape, dtype)?;
        let (seed, offset) = generator.advance(shape.numel());
        if generator.draws_zeros() {
            return Self::zeros(shape, dtype, backend);
        }
        if generator.draws_placeholders() {
            return Self::zeros(Shape::scalar(), dtype, backend)?.broadcast_to(shape);
        }
        Self::random(shape, dist, dtype, seed, offset, backend)
    }

    // ----- back to the host -----

    /// The elements in row-major order as a `Vec<T>`; `T` must match the dtype.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>>
    where
        Vec<T>: IntoHostData,
    {
        if T::DTYPE != self.dtype() {
            return Err(Error::DTypeMismatch {
                op: "to_vec",
                lhs: self.dtype(),
                rhs: T::DTYPE,
            });
        }
        Ok(Vec::<T>::from_host_data(self.to_host()?).expect("dtype checked above"))
    }

    /// The elements in row-major order, converted to f64 whatever the dtype.
    pub fn to_vec_f64(&self) -> Result<Vec<f64>> {
        self.to_host()?.try_to_f64_vec()
    }

    /// The elements in row-major order as host data of the tensor's dtype.
    pub fn to_host(&self) -> Result<HostData> {
        let data = self.backend.download(self.operand("download")?)?;
        if data.len() != self.numel() || data.dtype() != self.dtype() {
            return Err(Error::Backend {
                backend: self.backend.name(),
                op: "download",
                msg: format!(
                    "returned {} {} elements for a {} tensor of shape {}",
                    data.len(),
                    data.dtype(),
                    self.dtype(),
                    self.shape()
                ),
            });
        }
        Ok(data)
    }

    /// A copy of this tensor on another backend (any backend type, or another device of the
    /// same one): same shape, dtype and values, contiguous. The data goes through the host: one
    /// download, one upload.
    ///
    /// ```
    /// # fn demo<A: tessera_core::Backend, B: tessera_core::Backend>(a: &A, b: &B) -> tessera_core::Result<()> {
    /// use tessera_core::Tensor;
    /// let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [3], a)?;
    /// let y = x.to_backend(b)?;
    /// assert_eq!(y.to_vec::<f32>()?, vec![1.0, 2.0, 3.0]);
    /// # Ok(()) }
    /// ```
    pub fn to_backend<B2: Backend>(&self, backend: &B2) -> Result<Tensor<B2>> {
        Tensor::from_host(self.to_host()?, self.shape().clone(), backend)
    }

    /// The single element of a one-element tensor, as f64.
    pub fn to_scalar_f64(&self) -> Result<f64> {
        if self.numel() != 1 {
            return Err(Error::InvalidArgument {
                op: "to_scalar",
                msg: format!(
                    "tensor of shape {} has {} elements, not 1",
                    self.shape(),
                    self.numel()
                ),
            });
        }
        Ok(self.to_vec_f64()?[0])
    }

    /// The single element of a one-element tensor; `T` must match the dtype.
    pub fn to_scalar<T: Element>(&self) -> Result<T>
    where
        Vec<T>: IntoHostData,
    {
        if self.numel() != 1 {
            return Err(Error::InvalidArgument {
                op: "to_scalar",
                msg: format!(
                    "tensor of shape {} has {} elements, not 1",
                    self.shape(),
                    self.numel()
                ),
            });
        }
        Ok(self.to_vec::<T>()?[0])
    }

    // ----- checks shared by the op modules -----

    /// Errors unless `other` is on the same device.
    pub(crate) fn check_same_device(&self, op: &'static str, other: &Self) -> Result<()> {
        let (a, b) = (self.backend.device(), other.backend.device());
        if a != b {
            return Err(Error::DeviceMismatch {
                op,
                lhs: a.to_string(),
                rhs: b.to_string(),
            });
        }
        Ok(())
    }

    /// Errors unless `other` has the same dtype.
    pub(crate) fn check_same_dtype(&self, op: &'static str, other: &Self) -> Result<()> {
        if self.dtype() != other.dtype() {
            return Err(Error::DTypeMismatch {
                op,
                lhs: self.dtype(),
                rhs: other.dtype(),
            });
        }
        Ok(())
    }

    /// Errors unless the dtype is f32 or f64.
    pub(crate) fn check_float(&self, op: &'static str) -> Result<()> {
        if !self.dtype().is_float() {
            return Err(Error::UnsupportedDType {
                op,
                dtype: self.dtype(),
            });
        }
        Ok(())
    }
}

/// Errors unless a fresh contiguous `dtype` storage of `shape` is within [`crate::limits`]:
/// what every op checks before it asks a backend for an output.
pub(crate) fn check_output(op: &'static str, shape: &Shape, dtype: DType) -> Result<()> {
    shape.check_bytes(op, dtype).map(|_| ())
}

/// `n` host values `value(i)` converted to `dtype` (like [`Element::from_f64`]), allocated
/// fallibly: a host that cannot hold them is [`Error::OutOfMemory`] instead of an abort.
fn host_values(dtype: DType, n: usize, value: impl Fn(usize) -> f64) -> Result<HostData> {
    fn collect<T: Element>(n: usize, value: impl Fn(usize) -> f64) -> Result<Vec<T>> {
        let mut out = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| host_out_of_memory(n, T::DTYPE))?;
        out.extend((0..n).map(|i| T::from_f64(value(i))));
        Ok(out)
    }
    Ok(match dtype {
        DType::F32 => HostData::F32(collect(n, value)?),
        DType::F64 => HostData::F64(collect(n, value)?),
        DType::F16 => HostData::F16(collect(n, value)?),
        DType::BF16 => HostData::BF16(collect(n, value)?),
        DType::I64 => HostData::I64(collect(n, value)?),
        DType::Bool => HostData::Bool(collect(n, value)?),
    })
}

/// [`Error::OutOfMemory`] on the host for `n` elements of `dtype`.
pub(crate) fn host_out_of_memory(n: usize, dtype: DType) -> Error {
    Error::OutOfMemory {
        device: "host".into(),
        requested_bytes: n.saturating_mul(dtype.size_in_bytes()),
    }
}

fn check_dtype_supported<B: Backend>(backend: &B, op: &'static str, dtype: DType) -> Result<()> {
    if !backend.supports_dtype(dtype) {
        return Err(Error::UnsupportedDType { op, dtype });
    }
    Ok(())
}

/// Conversion between a `Vec` of elements and [`HostData`]; implemented for the element types.
pub trait IntoHostData: Sized {
    /// Wraps the vector.
    fn into_host_data(self) -> HostData;
    /// Unwraps host data of the matching dtype.
    fn from_host_data(data: HostData) -> Option<Self>;
}

macro_rules! impl_into_host_data {
    ($t:ty, $variant:ident) => {
        impl IntoHostData for Vec<$t> {
            fn into_host_data(self) -> HostData {
                HostData::$variant(self)
            }
            fn from_host_data(data: HostData) -> Option<Self> {
                match data {
                    HostData::$variant(v) => Some(v),
                    _ => None,
                }
            }
        }
    };
}
impl_into_host_data!(f32, F32);
impl_into_host_data!(f64, F64);
impl_into_host_data!(half::f16, F16);
impl_into_host_data!(half::bf16, BF16);
impl_into_host_data!(i64, I64);
impl_into_host_data!(u8, Bool);
