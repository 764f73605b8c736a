//! The backend contract: what a device must implement for Tessera to run on it.
//!
//! # Layout rules
//! * Every input arrives as a storage plus a [`Layout`]. Layouts may be non-contiguous: any
//!   non-negative strides (0 for broadcast dimensions), any offset. A backend must read them
//!   correctly; it may copy to a contiguous temporary first, but must not assume contiguity.
//! * Every output a primitive returns is a **fresh, contiguous, row-major storage** whose shape the
//!   documentation of the method gives. Outputs never alias inputs.
//! * Shapes are checked by `tensor-core` before a primitive is called: element-wise operands come
//!   already broadcast to one shape (broadcast dimensions have stride 0), matmul operands share
//!   their batch dimensions, dtypes match where they must. A backend still returns `Err`, never
//!   panics, on anything it cannot do (an unsupported dtype, a failed allocation, a driver error).
//! * Data-dependent checks (an index out of range, a max-pooling window position outside the
//!   window) are the backend's job and give [`crate::Error::IndexOutOfRange`].
//!
//! # What a backend may rely on, and what it must check itself
//! Every primitive receives its inputs as [`crate::operand`] types, which are built only
//! through their checks: each [`Operand`]'s layout fits its storage and is within the size
//! limits (rank at most [`crate::Shape::MAX_RANK`], extent at most `isize::MAX`, offsets that
//! fit an `i64`); element-wise operands share one shape ([`SameShape`]); index operands have an
//! axis in range and `I64` indices of a shape that fits ([`IndexSelect`], [`Gather`],
//! [`ScatterAdd`]); matrix products agree in rank, batch and inner size ([`MatmulOperands`]).
//! A backend does not re-check any of that. Through [`Tensor`] it may further rely on: every
//! output it is asked for needs at most `isize::MAX` bytes; convolution and pooling parameters
//! are valid (strides, dilations and kernels of at least 1), channel counts agree, and a
//! gradient's `grad_out` has exactly the shape the forward pass produces. The methods of this
//! trait are public and may be called directly, so a backend must still:
//! * check what the operand types do not: that a storage lives on its device, the dtypes its
//!   kernels take ([`crate::Error::UnsupportedDType`] or [`crate::Error::DTypeMismatch`]),
//!   reduction axes, index values (data-dependent), and the convolution and pooling shapes of
//!   [`crate::tensor`] in composites it overrides;
//! * allocate fallibly (`try_reserve`, or its driver's allocation call) and return
//!   [`crate::Error::OutOfMemory`] naming the bytes when a request cannot be met, never
//!   abort;
//! * compute sizes with checked arithmetic where its operands' sizes are combined (an output of
//!   `m * n` elements from valid but huge operands), returning
//!   [`crate::Error::SizeOverflow`];
//! * never panic and never read or write outside a storage, whatever it is given.
//!
//! The CPU and example backends do all of this and are fuzzed for it (`fuzz/`).
//!
//! # Required and overridable
//! The required methods are the primitives: memory movement, casts, element-wise maps,
//! comparisons, select, reductions, batched matmul, indexing and random numbers. The provided
//! methods are composites (softmax, conv2d, pooling and their gradient pieces, ...) written once
//! in terms of `Tensor` ops in [`crate::composite`]; a backend overrides them with fused kernels
//! when it can do better. The conformance harness (`tessera-conformance`) checks overrides
//! against its reference like everything else.
//!
//! # The 16-bit floats
//! `F16` and `BF16` are storage formats (see [`DType::compute_dtype`]): ops on them compute in
//! f32 (f32 accumulators for reductions and matrix products) and round each float result
//! once, to nearest even. The rule is applied once, in [`crate::dispatch`]: unless a backend
//! declares in [`Backend::computes_16_bit`] that it computes an op on a 16-bit dtype itself,
//! the dispatch widens the op's 16-bit inputs with [`Backend::cast`], runs the op (primitive
//! or composite, fused override or default) in f32 and rounds its float results back once. A
//! backend that accepts the 16-bit floats in [`Backend::supports_dtype`] therefore needs them
//! only in its memory ops (upload, download, `full`, copies, `assign`, `cast`, `random`).
//! ([`crate::dtype::rounding`] has correctly rounded conversions from f64 and i64.)

use crate::attention::{AttentionGrads, AttentionInputs, AttentionOutput, AttentionParams};
use crate::composite;
use crate::dispatch::HalfOp;
use crate::layer_norm::{LayerNormGrads, LayerNormOutput};
use crate::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape, ScatterAdd,
};
use crate::{
    ArgReduceOp, AssignMode, BinaryOp, CmpOp, DType, Distribution, ReduceOp, Result, Tensor,
    UnaryOp,
};
use std::fmt;

/// A device buffer holding `len()` elements of one dtype.
pub trait BackendStorage: Send + Sync + fmt::Debug + 'static {
    /// The element type stored.
    fn dtype(&self) -> DType;
    /// The number of elements stored.
    fn len(&self) -> usize;
    /// True when no element is stored.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Host-side data in one of the supported dtypes: what is uploaded and downloaded.
/// `#[non_exhaustive]` like [`DType`]: a `match` outside this crate needs a wildcard arm.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum HostData {
    /// f32 elements.
    F32(Vec<f32>),
    /// f64 elements.
    F64(Vec<f64>),
    /// f16 elements.
    F16(Vec<half::f16>),
    /// bf16 elements.
    BF16(Vec<half::bf16>),
    /// i64 elements.
    I64(Vec<i64>),
    /// bool elements as bytes (0 or 1).
    Bool(Vec<u8>),
}

impl HostData {
    /// The dtype of the elements.
    pub fn dtype(&self) -> DType {
        match self {
            HostData::F32(_) => DType::F32,
            HostData::F64(_) => DType::F64,
            HostData::F16(_) => DType::F16,
            HostData::BF16(_) => DType::BF16,
            HostData::I64(_) => DType::I64,
            HostData::Bool(_) => DType::Bool,
        }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        match self {
            HostData::F32(v) => v.len(),
            HostData::F64(v) => v.len(),
            HostData::F16(v) => v.len(),
            HostData::BF16(v) => v.len(),
            HostData::I64(v) => v.len(),
            HostData::Bool(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every element converted to f64 (bools as 0/1). Aborts like any `Vec` when the host
    /// cannot hold the copy; [`HostData::try_to_f64_vec`] returns an error instead.
    pub fn to_f64_vec(&self) -> Vec<f64> {
        match self {
            HostData::F32(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::F64(v) => v.clone(),
            HostData::F16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            HostData::BF16(v) => v.iter().map(|&x| f64::from(x)).collect(),
            HostData::I64(v) => v.iter().map(|&x| x as f64).collect(),
            HostData::Bool(v) => v.iter().map(|&x| f64::from(x != 0)).collect(),
        }
    }

    /// [`HostData::to_f64_vec`], allocated fallibly: [`crate::Error::OutOfMemory`] when the host
    /// cannot hold the copy.
    pub fn try_to_f64_vec(&self) -> crate::Result<Vec<f64>> {
        let mut out = Vec::new();
        out.try_reserve_exact(self.len())
            .map_err(|_| crate::Error::OutOfMemory {
                device: "host".into(),
                requested_bytes: self.len().saturating_mul(8),
            })?;
        match self {
            HostData::F32(v) => out.extend(v.iter().map(|&x| x as f64)),
            HostData::F64(v) => out.extend_from_slice(v),
            HostData::F16(v) => out.extend(v.iter().map(|&x| f64::from(x))),
            HostData::BF16(v) => out.extend(v.iter().map(|&x| f64::from(x))),
            HostData::I64(v) => out.extend(v.iter().map(|&x| x as f64)),
            HostData::Bool(v) => out.extend(v.iter().map(|&x| f64::from(x != 0))),
        }
        Ok(out)
    }
}

/// Identifies a device; two tensors can meet in an op only when their devices are equal.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Device {
    /// Backend kind, e.g. `"cpu"`, `"opencl"`, `"cuda"`.
    pub kind: &'static str,
    /// Index of the device among those of its kind.
    pub ordinal: usize,
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.ordinal)
    }
}

/// Parameters of a 2-D convolution (groups = 1). Pairs are `(height, width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Conv2dParams {
    /// Step between output positions.
    pub stride: (usize, usize),
    /// Zero padding added on each side.
    pub padding: (usize, usize),
    /// Spacing between kernel taps.
    pub dilation: (usize, usize),
}

impl Default for Conv2dParams {
    fn default() -> Self {
        Conv2dParams {
            stride: (1, 1),
            padding: (0, 0),
            dilation: (1, 1),
        }
    }
}

/// Parameters of a 2-D pooling window. Pairs are `(height, width)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Pool2dParams {
    /// Window size.
    pub kernel: (usize, usize),
    /// Step between windows.
    pub stride: (usize, usize),
    /// Implicit padding on each side (-inf for max pooling, 0 for average pooling, which
    /// divides by the full window size like PyTorch's `count_include_pad=True`).
    pub padding: (usize, usize),
}

impl Pool2dParams {
    /// A square window whose stride equals its size (the common `MaxPool2d(k)`).
    pub fn square(k: usize) -> Self {
        Pool2dParams {
            kernel: (k, k),
            stride: (k, k),
            padding: (0, 0),
        }
    }
}

/// The coefficients of one Adam/AdamW step of one parameter, computed on the host in f64 (see
/// [`Backend::adam_update`] and [`crate::composite::adam_update`] for the update they drive).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamUpdate {
    /// Decay rate of the first moment, `β1`.
    pub beta1: f64,
    /// Decay rate of the second moment, `β2`.
    pub beta2: f64,
    /// `lr / (1 - β1ᵗ)`.
    pub step_size: f64,
    /// `√(1 - β2ᵗ)`.
    pub bias_correction2_sqrt: f64,
    /// Added to the denominator.
    pub eps: f64,
    /// Adam's coupled weight decay `λ` (`g ← g + λ·p`); 0 for none.
    pub coupled_decay: f64,
    /// AdamW's decoupled decay factor `1 - lr·λ` (`p ← p·factor`); 1 for none.
    pub decoupled_factor: f64,
}

/// The tensors one Adam step produces for one parameter.
#[derive(Clone, Debug)]
pub struct AdamTensors<B: Backend> {
    /// The updated parameter.
    pub param: Tensor<B>,
    /// The updated first moment.
    pub exp_avg: Tensor<B>,
    /// The updated second moment.
    pub exp_avg_sq: Tensor<B>,
    /// The updated running maximum of the second moment (AMSGrad), when one was given.
    pub max_exp_avg_sq: Option<Tensor<B>>,
}

/// A compute device: the contract every Tessera backend implements. See the module docs for the
/// layout rules and the split between required primitives and overridable composites.
pub trait Backend: Clone + Send + Sync + fmt::Debug + 'static {
    /// The device buffer type.
    type Storage: BackendStorage;

    /// Short backend name used in messages: `"cpu"`, `"opencl"`, `"cuda"`.
    fn name(&self) -> &'static str;

    /// The device this backend value computes on.
    fn device(&self) -> Device;

    /// Whether this backend implements ops for `dtype` (most ops also restrict dtypes themselves).
    fn supports_dtype(&self, dtype: DType) -> bool;

    /// Whether this backend computes `op` on the 16-bit float `dtype` itself (in f32 arithmetic,
    /// rounding each result once, as the module docs ask). When it does not (the default),
    /// tensor-core's dispatch ([`crate::dispatch`]) widens the op's 16-bit inputs to f32 with
    /// [`Backend::cast`], calls the op in f32 and rounds the f32 results back once: a backend
    /// that stores `F16`/`BF16` and casts them gets every float op in 16 bits without writing a
    /// 16-bit kernel. Declare an op here only when its 16-bit path is faster (a bf16 GEMM, GPU
    /// kernels reading 16-bit storage directly). Memory ops (upload, download, `full`, copies,
    /// `assign`, `cast`, `random`, `concat`) always receive the stored dtype.
    fn computes_16_bit(&self, op: HalfOp, dtype: DType) -> bool {
        let _ = (op, dtype);
        false
    }

    // ----- memory -----

    /// Copies host data into a new storage.
    fn upload(&self, data: HostData) -> Result<Self::Storage>;

    /// Reads the elements of `x` (in row-major logical order) back to the host. This is the
    /// only primitive that may wait for the device.
    fn download(&self, x: Operand<'_, Self::Storage>) -> Result<HostData>;

    /// A new storage of `numel` elements of `dtype`, all equal to `value` (converted like
    /// [`crate::Element::from_f64`]).
    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<Self::Storage>;

    /// A contiguous copy of the elements of `x`.
    fn copy_strided(&self, x: Operand<'_, Self::Storage>) -> Result<Self::Storage>;

    /// Writes (or adds) the elements of `to.src` into the positions `to.dst` selects. Both have
    /// the same shape (checked by [`Assignment::new`]) and, from tensor-core, the same dtype;
    /// the destination's layout never maps two indices to the same element (tensor-core
    /// guarantees it).
    fn assign(&self, to: Assignment<'_, Self::Storage>, mode: AssignMode) -> Result<()>;

    /// Converts every element to `dtype` (floats to ints truncate toward zero, saturating, NaN to
    /// 0; anything to bool is `x != 0`). Output: contiguous, same shape.
    fn cast(&self, x: Operand<'_, Self::Storage>, dtype: DType) -> Result<Self::Storage>;

    // ----- element-wise -----

    /// Applies `op` to each element. Output: contiguous, same shape and dtype.
    fn unary(&self, op: UnaryOp, x: Operand<'_, Self::Storage>) -> Result<Self::Storage>;

    /// Applies `op` element by element to `[lhs, rhs]` (one shape, broadcast already through
    /// zero strides; one dtype from tensor-core). Output: contiguous, that shape and dtype.
    fn binary(&self, op: BinaryOp, xs: SameShape<'_, Self::Storage, 2>) -> Result<Self::Storage>;

    /// Compares `[lhs, rhs]` element by element, as [`Backend::binary`]. Output: contiguous
    /// `Bool`.
    fn compare(&self, op: CmpOp, xs: SameShape<'_, Self::Storage, 2>) -> Result<Self::Storage>;

    /// `cond ? on_true : on_false` element by element over `[cond, on_true, on_false]`: `cond`
    /// is `Bool`; the branches share one dtype, which the output has.
    fn where_select(&self, xs: SameShape<'_, Self::Storage, 3>) -> Result<Self::Storage>;

    // ----- reductions -----

    /// Reduces over `axes` (sorted, distinct, each `< rank`). Output: contiguous, the input shape
    /// with every reduced axis set to 1, same dtype.
    fn reduce(
        &self,
        op: ReduceOp,
        x: Operand<'_, Self::Storage>,
        axes: &[usize],
    ) -> Result<Self::Storage>;

    /// Index of the extremum along `axis` (whose size is at least 1). Output: contiguous `I64`,
    /// the input shape with `axis` set to 1.
    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: Operand<'_, Self::Storage>,
        axis: usize,
    ) -> Result<Self::Storage>;

    // ----- linear algebra -----

    /// Batched matrix product of `lhs: [..batch, m, k]` and `rhs: [..batch, k, n]` (identical
    /// batch dimensions, broadcast batches with stride 0, one float dtype: checked by
    /// [`MatmulOperands::new`]). Output: contiguous `[..batch, m, n]`.
    fn matmul(&self, xs: MatmulOperands<'_, Self::Storage>) -> Result<Self::Storage>;

    // ----- indexing -----

    /// Picks slices along `xs.axis`: output index `[.., i, ..]` is input
    /// `[.., indices[i], ..]`. Index values are not checked by `tensor-core`: one outside
    /// `0..size` (a negative one included: there is no counting from the end) is
    /// [`crate::Error::IndexOutOfRange`], here and in `gather` and `scatter_add`. Output:
    /// contiguous, [`IndexSelect::output_dims`].
    fn index_select(&self, xs: IndexSelect<'_, Self::Storage>) -> Result<Self::Storage>;

    /// `out[i][j][k] = x[i][indices[i][j][k]][k]` for `axis = 1` (PyTorch's `gather`). Output:
    /// contiguous, the shape of the indices, the dtype of `x`.
    fn gather(&self, xs: Gather<'_, Self::Storage>) -> Result<Self::Storage>;

    /// A copy of `base` with `src[i][j][k]` added at `[i][indices[i][j][k]][k]` for `axis = 1`
    /// (PyTorch's `scatter_add`). Output: contiguous, the shape and dtype of `base`.
    fn scatter_add(&self, xs: ScatterAdd<'_, Self::Storage>) -> Result<Self::Storage>;

    // ----- random -----

    /// `numel` samples of `dist` as the float `dtype`: element `i` must equal
    /// [`crate::random::sample_f32`] / [`crate::random::sample_f64`] of `(seed, offset + i)`.
    /// For `F16`/`BF16` it is the `sample_f32` value rounded to the format (to nearest even), and
    /// a uniform draw that rounds up to `high` (or beyond) is replaced by the next 16-bit value
    /// below it (toward `-inf`), so that `[low, high)` still holds.
    fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<Self::Storage>;

    // ----- synchronisation -----

    /// Blocks until all queued work is done and reports any asynchronous error. Backends that
    /// compute eagerly on the host need not override it.
    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    // ----- composites: default implementations in `crate::composite`, overridable -----

    /// Joins tensors along `axis` (shapes equal elsewhere, checked by the caller).
    fn concat(&self, tensors: &[&Tensor<Self>], axis: usize) -> Result<Tensor<Self>> {
        composite::concat(tensors, axis)
    }

    /// Softmax along `axis`, shifted by the maximum for stability. A row containing `+inf` or
    /// NaN, or only `-inf`, is NaN throughout (PyTorch's results).
    fn softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        composite::softmax(x, axis)
    }

    /// Log-softmax along `axis`: `(x - max) - log(sum(exp(x - max)))`; NaN rows as
    /// [`Backend::softmax`].
    fn log_softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        composite::log_softmax(x, axis)
    }

    /// `log(sum(exp(x)))` along `axis`, keeping it as size 1, computed stably: `+inf` when the
    /// row holds `+inf`, `-inf` when it holds only `-inf`, NaN with a NaN.
    fn logsumexp(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        composite::logsumexp(x, axis)
    }

    /// 2-D convolution of `x: [n, c, h, w]` with `weight: [o, c, kh, kw]`: im2col + matmul.
    fn conv2d(
        &self,
        x: &Tensor<Self>,
        weight: &Tensor<Self>,
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        composite::conv2d(x, weight, params)
    }

    /// Gradient of [`Backend::conv2d`] with respect to its input (`col2im` of `weightᵀ · grad`).
    fn conv2d_backward_input(
        &self,
        grad_out: &Tensor<Self>,
        weight: &Tensor<Self>,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        composite::conv2d_backward_input(grad_out, weight, input_dims, params)
    }

    /// Gradient of [`Backend::conv2d`] with respect to its weight.
    fn conv2d_backward_weight(
        &self,
        x: &Tensor<Self>,
        grad_out: &Tensor<Self>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        composite::conv2d_backward_weight(x, grad_out, weight_dims, params)
    }

    /// Max pooling of `x: [n, c, h, w]`; returns the output and, per output element, the `I64`
    /// position of the maximum inside its window (`kh_index * kw + kw_index`): the first
    /// position on ties, the first NaN, and, when nothing in the window beats `-inf`, its first
    /// position inside the input (never a padding position, as PyTorch).
    fn max_pool2d(
        &self,
        x: &Tensor<Self>,
        params: Pool2dParams,
    ) -> Result<(Tensor<Self>, Tensor<Self>)> {
        composite::max_pool2d(x, params)
    }

    /// Gradient of [`Backend::max_pool2d`] with respect to its input.
    fn max_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        window_argmax: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        composite::max_pool2d_backward(grad_out, window_argmax, input_dims, params)
    }

    /// Average pooling of `x: [n, c, h, w]` (padding counts as zeros in the average).
    fn avg_pool2d(&self, x: &Tensor<Self>, params: Pool2dParams) -> Result<Tensor<Self>> {
        composite::avg_pool2d(x, params)
    }

    /// Gradient of [`Backend::avg_pool2d`] with respect to its input.
    fn avg_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        composite::avg_pool2d_backward(grad_out, input_dims, params)
    }

    // ----- attention -----

    /// Scaled dot-product attention of `q: [..b, L, E]` over `k: [..b, S, E]` and
    /// `v: [..b, S, Ev]` (see [`crate::attention`] for the definition). The three share their
    /// batch dimensions, float dtype and device and may be any strided views; `mask`, if
    /// given, is `Bool` or the dtype of `q`, already broadcast to `[..b, L, S]` (zero strides);
    /// `params.scale` is resolved. Returns the output `[..b, L, Ev]` and the per-row
    /// log-sum-exp `[..b, L]`, both contiguous. Default:
    /// [`crate::composite::scaled_dot_product_attention`] (two matmuls around a masked
    /// softmax, materialising the `[..b, L, S]` scores); a fused kernel keeps only the
    /// log-sum-exp.
    fn scaled_dot_product_attention(
        &self,
        inputs: AttentionInputs<'_, Self>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Self>> {
        composite::scaled_dot_product_attention(inputs, params)
    }

    /// The gradients of [`Backend::scaled_dot_product_attention`] with respect to `q`, `k` and
    /// `v`, given the upstream gradient `grad_out: [..b, L, Ev]`, the same inputs and
    /// parameters, and the forward pass's output and log-sum-exp (dropout draws are repeated
    /// from the same stream). All three gradients are contiguous. Default:
    /// [`crate::composite::scaled_dot_product_attention_backward`].
    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Self>,
        inputs: AttentionInputs<'_, Self>,
        forward: &AttentionOutput<Self>,
        params: &AttentionParams,
    ) -> Result<AttentionGrads<Self>> {
        composite::scaled_dot_product_attention_backward(grad_out, inputs, forward, params)
    }

    // ----- normalisation -----

    /// Layer normalisation over the last axis of `x: [..rows, n]` with an optional `weight`
    /// and `bias` of shape `[n]` (see [`crate::layer_norm`] for the definition): the output and
    /// the per-row mean and `rstd` the backward pass reuses. Default:
    /// [`crate::composite::layer_norm`] (about eight tensor ops); a backend may do it in one
    /// pass over each row.
    fn layer_norm(
        &self,
        x: &Tensor<Self>,
        weight: Option<&Tensor<Self>>,
        bias: Option<&Tensor<Self>>,
        eps: f64,
    ) -> Result<LayerNormOutput<Self>> {
        composite::layer_norm(x, weight, bias, eps)
    }

    /// The gradients of [`Backend::layer_norm`] given the upstream `grad`, the input `x`, the
    /// `weight` (if any) and the forward pass's `(mean, rstd)` (in `x`'s dtype, as the dispatch
    /// passes them): the gradient of `x`, of
    /// `weight` when given, and of the bias when `with_bias`. Default:
    /// [`crate::composite::layer_norm_backward`].
    fn layer_norm_backward(
        &self,
        grad: &Tensor<Self>,
        x: &Tensor<Self>,
        weight: Option<&Tensor<Self>>,
        stats: (&Tensor<Self>, &Tensor<Self>),
        with_bias: bool,
    ) -> Result<LayerNormGrads<Self>> {
        composite::layer_norm_backward(grad, x, weight, stats, with_bias)
    }

    // ----- fused element-wise composites -----

    /// Gradient of ReLU: 0 where `x <= 0` (so at `x == 0`), else `grad` (also where `x` is
    /// NaN, as PyTorch); `x` and `grad` share one shape and dtype. Default:
    /// [`crate::composite::relu_backward`] (a compare and a select).
    fn relu_backward(&self, x: &Tensor<Self>, grad: &Tensor<Self>) -> Result<Tensor<Self>> {
        composite::relu_backward(x, grad)
    }

    /// Gradient of the exact GELU `x Φ(x)`: `grad · (Φ(x) + x φ(x))` with `Φ` and `φ` the
    /// standard normal distribution and density; `x` and `grad` share one shape and dtype.
    /// Default: [`crate::composite::gelu_backward`] (about a dozen element-wise ops).
    fn gelu_backward(&self, x: &Tensor<Self>, grad: &Tensor<Self>) -> Result<Tensor<Self>> {
        composite::gelu_backward(x, grad)
    }

    /// The matrix product `lhs·rhs` (`[..batch, m, k]` and `[..batch, k, n]`) with `bias: [n]`
    /// added to every row (definition in [`crate::matmul_bias`]; checked by
    /// [`crate::matmul_bias::check_matmul_bias`]): a linear layer's forward pass. Default:
    /// [`crate::composite::matmul_bias`] (the product, then a broadcast addition over the
    /// output); a backend may add the bias inside its GEMM.
    fn matmul_bias(
        &self,
        lhs: &Tensor<Self>,
        rhs: &Tensor<Self>,
        bias: &Tensor<Self>,
    ) -> Result<Tensor<Self>> {
        composite::matmul_bias(lhs, rhs, bias)
    }

    /// Softmax cross-entropy of each row of `logits: [n, c]` against the class indices
    /// `targets: [n]` (`i64`, each in `0..c`, else [`crate::Error::IndexOutOfRange`]) with label
    /// smoothing `label_smoothing` in `[0, 1]`: the per-row losses `[n]` (definition in
    /// [`crate::cross_entropy`]; checked by [`crate::cross_entropy::check_cross_entropy`]).
    /// Default: [`crate::composite::cross_entropy`] (log-softmax, gather, row sums).
    fn cross_entropy(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        composite::cross_entropy(logits, targets, label_smoothing)
    }

    /// The gradient `[n, c]` of [`Backend::cross_entropy`]'s per-row losses with respect to
    /// the logits, given their upstream gradient `grad: [n]` (the logits' dtype):
    /// `grad[i] · (softmax(logits[i]) - (1 - s) · onehot(targets[i]) - s / c)`. Default:
    /// [`crate::composite::cross_entropy_backward`] (softmax, a one-hot scatter and three
    /// element-wise passes, each over the logits' size); a backend may do it in one pass per
    /// row.
    fn cross_entropy_backward(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        grad: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        composite::cross_entropy_backward(logits, targets, grad, label_smoothing)
    }

    /// One Adam/AdamW step of one parameter: the new parameter and moments from the current
    /// ones and the gradient (all of one shape and float dtype). Default:
    /// [`crate::composite::adam_update`] (about a dozen element-wise ops); a backend may do it
    /// in one pass.
    fn adam_update(
        &self,
        param: &Tensor<Self>,
        grad: &Tensor<Self>,
        exp_avg: &Tensor<Self>,
        exp_avg_sq: &Tensor<Self>,
        max_exp_avg_sq: Option<&Tensor<Self>>,
        update: AdamUpdate,
    ) -> Result<AdamTensors<Self>> {
        composite::adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
    }
}
