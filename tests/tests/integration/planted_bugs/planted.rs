//! [`Planted<B>`]: a backend that delegates to `B` but plants one realistic kernel bug.
//!
//! The bugs of the five classes (see `classes.rs`) are what a vendor's first kernels
//! get wrong: a method the suite never called (a fused Adam without its bias correction, a ReLU
//! gradient that passes at 0), a formula that is right on small values only (softmax without
//! its max shift, sigmoid as `e^x / (1 + e^x)`, max pooling keeping the last of tied maxima),
//! a structure drawn too rarely (batch offsets computed as if the batch axes were one), an
//! edge convention (a finite softmax shift, a ReLU gradient that blocks NaN), and a formula one
//! rounding away from the right one (sigmoid through `tanh`, log-softmax as `x - logsumexp`).

use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::dispatch::HalfOp;
use tessera_core::operand::{
    Assignment, Gather, IndexSelect, MatmulOperands, Operand, SameShape, ScatterAdd,
};
use tessera_core::{
    bf16, composite, direct, f16, ArgReduceOp, AssignMode, AttentionGrads, AttentionInputs,
    AttentionOutput, AttentionParams, Backend, BackendStorage, BinaryOp, CmpOp, DType, Device,
    Distribution, Error, HostData, Layout, Pool2dParams, ReduceOp, Result, Tensor, UnaryOp,
};

/// The bug a [`Planted`] backend carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// None: a plain delegate.
    None,
    /// The binary op reads a broadcast operand (zero strides) by flat index modulo its
    /// un-broadcast size: right when only leading axes are broadcast (`[3] -> [2, 3]`), wrong
    /// otherwise (`[2, 1] -> [2, 3]`).
    WrongBroadcast(BinaryOp),
    /// `sum` over an axis that is not the last stops one element short on that axis.
    SumOffByOneOnOuterAxis,
    /// `matmul` reads an operand whose last two axes are transposed as if it were row-major.
    MatmulIgnoresTranspose,
    /// `max` reductions skip NaN instead of propagating it.
    MaxSwallowsNan,
    /// Class 1: the fused Adam step forgets the second moment's bias correction
    /// (`m / (sqrt(v) + eps)` instead of `m / (sqrt(v) / sqrt(1 - beta2^t) + eps)`).
    AdamDropsBiasCorrection,
    /// Classes 1 and 2: the ReLU gradient passes where `x >= 0`, so also at `x == 0`.
    ReluGradAtZero,
    /// Class 2: softmax as `exp(x) / sum(exp(x))`, without the max shift (overflows for large
    /// `x`).
    SoftmaxWithoutShift,
    /// Class 2: sigmoid as `e^x / (1 + e^x)` (NaN once `e^x` overflows).
    SigmoidOverflows,
    /// Class 2: max pooling compares with `>=`, so the last of tied maxima wins.
    MaxPoolLastTie,
    /// Class 3: batched matmul computes each operand's batch offset as `flat batch index *
    /// innermost batch stride`: right for contiguous batches and fully broadcast ones, wrong
    /// when only one of two batch axes is broadcast (or the batch axes are permuted).
    MatmulFlatBatch,
    /// Class 4: softmax shifts by the maximum replaced by 0 when infinite (as log-sum-exp does),
    /// so a row with `+inf` is `[0, NaN, 0]` instead of PyTorch's NaN row.
    SoftmaxFiniteShift,
    /// Class 4: the ReLU gradient blocks a NaN input (`x > 0`), where PyTorch passes it.
    ReluGradBlocksNan,
    /// Class 5: sigmoid as `0.5 * tanh(x / 2) + 0.5`, equal in exact arithmetic but one
    /// rounding of 1 away for negative `x`, where the result is small.
    SigmoidViaTanh,
    /// Class 5: log-softmax as `x - logsumexp(x)`, which rounds the large `max + log(sum)`
    /// before subtracting (off by an ulp of `|max|` near the maximum).
    LogSoftmaxMinusLse,
    /// Class 5: cross-entropy as `logsumexp(x) - x_t` (and the smoothing's row sum of `x`),
    /// which rounds the large log-sum-exp before subtracting the target's logit: an ulp of
    /// `|max|` off when the logits share a large offset.
    CrossEntropyUnshifted,
    /// Class 3: causal attention aligned to the bottom-right corner (query `i` sees keys
    /// `j <= i + S - L`, as some fused kernels do) instead of PyTorch's top-left: right
    /// whenever `L == S`, wrong when queries and keys differ in number.
    AttentionCausalBottomRight,
    /// Casts flush results that are subnormal in the target float format to zero (keeping
    /// the sign), as a kernel built with flush-to-zero does.
    CastFlushesSubnormals,
    /// `f64 -> f16` and `f64 -> bf16` round twice: to f32 (to nearest even), then to 16 bits,
    /// so that a value just off a 16-bit tie lands on it and then rounds to even.
    CastRoundsTwiceThroughF32,
    /// The error half of the contract: `index_select` trusts its indices (and axis), as a
    /// kernel without a bounds check does, and panics on one out of range instead of returning
    /// `Err`.
    IndexSelectPanicsOnBadIndex,
}

impl Bug {
    /// Whether the bug is in casts, which the suite checks with the 16-bit floats too (the
    /// other planted bugs are f32/f64 kernels).
    pub fn in_casts(self) -> bool {
        matches!(
            self,
            Bug::CastFlushesSubnormals | Bug::CastRoundsTwiceThroughF32
        )
    }
}

/// `B` with one planted [`Bug`].
#[derive(Clone, Debug)]
pub struct Planted<B: Backend> {
    inner: B,
    bug: Bug,
}

impl<B: Backend> Planted<B> {
    /// Errs for a dtype this backend does not support (the 16-bit floats), whatever the inner
    /// backend does with it.
    fn check_dtype(&self, op: &'static str, dtype: DType) -> Result<()> {
        if self.supports_dtype(dtype) {
            Ok(())
        } else {
            Err(Error::UnsupportedDType { op, dtype })
        }
    }

    /// `inner` with `bug`.
    pub fn new(inner: B, bug: Bug) -> Self {
        Planted { inner, bug }
    }

    /// `values` (each a value of `x`'s dtype) uploaded as the contiguous operand of `x`'s shape
    /// that a buggy kernel reads instead of `x`.
    fn upload_as(&self, values: &[f64], x: Operand<'_, B::Storage>) -> Result<Contiguous<B>> {
        let data = host_data(x.dtype(), values)?;
        Ok((self.inner.upload(data)?, Layout::contiguous(x.dims())))
    }

    /// The operand as the buggy kernel sees it: a broadcast operand's un-broadcast values
    /// repeated by flat index.
    fn misbroadcast(&self, x: Operand<'_, B::Storage>) -> Result<Contiguous<B>> {
        let layout = x.layout();
        let axes = || layout.dims().iter().zip(layout.strides());
        let broadcast = axes().any(|(&d, &s)| s == 0 && d > 1);
        if !broadcast || layout.numel() == 0 {
            return Ok((self.inner.copy_strided(x)?, Layout::contiguous(x.dims())));
        }
        let source_dims: Vec<usize> = axes().map(|(&d, &s)| if s == 0 { 1 } else { d }).collect();
        let strides = layout.strides().to_vec();
        let source = Layout::strided(source_dims, strides, layout.offset(), x.storage().len())?;
        let source = direct::download(&self.inner, x.storage(), &source)?.to_f64_vec();
        let wrong: Vec<f64> = (0..layout.numel())
            .map(|i| source[i % source.len()])
            .collect();
        self.upload_as(&wrong, x)
    }

    /// `f32_map` / `f64_map` applied on the host to the elements of `x`, as a kernel of that
    /// precision computes them; a contiguous result.
    fn host_map(
        &self,
        x: Operand<'_, B::Storage>,
        f32_map: impl Fn(f32) -> f32,
        f64_map: impl Fn(f64) -> f64,
    ) -> Result<B::Storage> {
        let data = match self.inner.download(x)? {
            HostData::F32(v) => HostData::F32(v.into_iter().map(f32_map).collect()),
            HostData::F64(v) => HostData::F64(v.into_iter().map(f64_map).collect()),
            other => other,
        };
        self.inner.upload(data)
    }

    /// The operand of a batched matmul as a kernel reads it that takes the batch offset of
    /// flat batch index `b` to be `b * (innermost batch stride)`: a contiguous copy of those
    /// matrices (offsets wrap around the storage, where a device would read out of bounds).
    fn flat_batch(&self, x: Operand<'_, B::Storage>) -> Result<Contiguous<B>> {
        let (layout, len) = (x.layout(), x.storage().len());
        let (d, s) = (layout.dims(), layout.strides());
        let r = d.len();
        if r < 4 || layout.numel() == 0 {
            return Ok((self.inner.copy_strided(x)?, Layout::contiguous(x.dims())));
        }
        let batches: usize = d[..r - 2].iter().product();
        let inner = s[r - 3] as usize;
        let mut out = Vec::new();
        let all = direct::download(&self.inner, x.storage(), &Layout::contiguous([len]))?;
        let all = all.to_f64_vec();
        for b in 0..batches {
            let base = layout.offset() + b * inner;
            for i in 0..d[r - 2] {
                for j in 0..d[r - 1] {
                    let at = base + i * s[r - 2] as usize + j * s[r - 1] as usize;
                    out.push(all[at % len]);
                }
            }
        }
        self.upload_as(&out, x)
    }

    /// The layout as a kernel that ignores a transposed operand reads it: row-major from the
    /// same offset (when that stays inside the storage).
    fn ignore_transpose(x: Operand<'_, B::Storage>) -> Layout {
        let layout = x.layout();
        let (d, s) = (layout.dims(), layout.strides());
        let r = d.len();
        let transposed = r >= 2 && d[r - 1] > 1 && d[r - 2] > 1 && s[r - 2] < s[r - 1];
        if !transposed {
            return layout.clone();
        }
        let (shape, len) = (layout.shape(), x.storage().len());
        Layout::strided(
            shape.clone(),
            shape.contiguous_strides(),
            layout.offset(),
            len,
        )
        .unwrap_or_else(|_| layout.clone())
    }
}

/// A storage of the inner backend with a contiguous layout over it.
type Contiguous<B> = (<B as Backend>::Storage, Layout);

impl<B: Backend> Backend for Planted<B> {
    type Storage = B::Storage;

    fn name(&self) -> &'static str {
        "planted"
    }
    fn device(&self) -> Device {
        self.inner.device()
    }
    /// The planted bugs are f32/f64 kernels; the 16-bit floats are left out, except for the
    /// cast bugs.
    fn supports_dtype(&self, dtype: DType) -> bool {
        (!dtype.is_half() || self.bug.in_casts()) && self.inner.supports_dtype(dtype)
    }
    /// The primitives are the inner backend's, so its declaration holds for them; the
    /// composites are tensor-core's defaults or the planted ones, which compute in the dtype
    /// they are given (so the dispatch widens 16-bit inputs for them).
    fn computes_16_bit(&self, op: HalfOp, dtype: DType) -> bool {
        op.is_primitive() && self.inner.computes_16_bit(op, dtype)
    }
    fn upload(&self, data: HostData) -> Result<B::Storage> {
        self.inner.upload(data)
    }
    fn download(&self, x: Operand<'_, B::Storage>) -> Result<HostData> {
        self.inner.download(x)
    }
    fn full(&self, n: usize, dtype: DType, value: f64) -> Result<B::Storage> {
        self.check_dtype("full", dtype)?;
        self.inner.full(n, dtype, value)
    }
    fn copy_strided(&self, x: Operand<'_, B::Storage>) -> Result<B::Storage> {
        self.inner.copy_strided(x)
    }
    fn assign(&self, to: Assignment<'_, B::Storage>, mode: AssignMode) -> Result<()> {
        self.inner.assign(to, mode)
    }
    fn cast(&self, x: Operand<'_, B::Storage>, dtype: DType) -> Result<B::Storage> {
        self.check_dtype("cast", dtype)?;
        match self.bug {
            Bug::CastFlushesSubnormals => {
                let out = self.inner.cast(x, dtype)?;
                let min_normal = match dtype {
                    DType::F32 => f64::from(f32::MIN_POSITIVE),
                    DType::F64 => f64::MIN_POSITIVE,
                    DType::F16 => f16::MIN_POSITIVE.to_f64(),
                    DType::BF16 => bf16::MIN_POSITIVE.to_f64(),
                    _ => return Ok(out),
                };
                let all = Layout::contiguous([out.len()]);
                let mut values = direct::download(&self.inner, &out, &all)?.to_f64_vec();
                for v in values.iter_mut().filter(|v| v.abs() < min_normal) {
                    *v = 0.0f64.copysign(*v);
                }
                self.inner.upload(host_data(dtype, &values)?)
            }
            Bug::CastRoundsTwiceThroughF32 if x.dtype() == DType::F64 && dtype.is_half() => {
                let f32s = self.inner.cast(x, DType::F32)?;
                direct::cast(&self.inner, &f32s, &Layout::contiguous(x.dims()), dtype)
            }
            _ => self.inner.cast(x, dtype),
        }
    }
    fn unary(&self, op: UnaryOp, x: Operand<'_, B::Storage>) -> Result<B::Storage> {
        match (self.bug, op) {
            (Bug::SigmoidOverflows, UnaryOp::Sigmoid) => self.host_map(
                x,
                |v| v.exp() / (1.0 + v.exp()),
                |v| v.exp() / (1.0 + v.exp()),
            ),
            (Bug::SigmoidViaTanh, UnaryOp::Sigmoid) => self.host_map(
                x,
                |v| 0.5 * (0.5 * v).tanh() + 0.5,
                |v| 0.5 * (0.5 * v).tanh() + 0.5,
            ),
            _ => self.inner.unary(op, x),
        }
    }
    fn binary(&self, op: BinaryOp, xs: SameShape<'_, B::Storage, 2>) -> Result<B::Storage> {
        if self.bug == Bug::WrongBroadcast(op) {
            let [a, b] = xs.operands();
            let ((a, al), (b, bl)) = (self.misbroadcast(a)?, self.misbroadcast(b)?);
            return direct::binary(&self.inner, op, (&a, &al), (&b, &bl));
        }
        self.inner.binary(op, xs)
    }
    fn compare(&self, op: CmpOp, xs: SameShape<'_, B::Storage, 2>) -> Result<B::Storage> {
        self.inner.compare(op, xs)
    }
    fn where_select(&self, xs: SameShape<'_, B::Storage, 3>) -> Result<B::Storage> {
        self.inner.where_select(xs)
    }
    fn reduce(
        &self,
        op: ReduceOp,
        x: Operand<'_, B::Storage>,
        axes: &[usize],
    ) -> Result<B::Storage> {
        match (self.bug, op) {
            (Bug::SumOffByOneOnOuterAxis, ReduceOp::Sum) => {
                let mut short = x.layout().clone();
                for &a in axes.iter().filter(|&&a| a + 1 < x.dims().len()) {
                    let len = x.dims()[a];
                    short = short.narrow(a as isize, 0, len.saturating_sub(1))?;
                }
                direct::reduce(&self.inner, op, x.storage(), &short, axes)
            }
            (Bug::MaxSwallowsNan, ReduceOp::Max) if x.dtype().is_float() => {
                let mut values = self.inner.download(x)?.to_f64_vec();
                for v in values.iter_mut().filter(|v| v.is_nan()) {
                    *v = f64::NEG_INFINITY;
                }
                let (clean, l) = self.upload_as(&values, x)?;
                direct::reduce(&self.inner, op, &clean, &l, axes)
            }
            _ => self.inner.reduce(op, x, axes),
        }
    }
    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: Operand<'_, B::Storage>,
        axis: usize,
    ) -> Result<B::Storage> {
        self.inner.arg_reduce(op, x, axis)
    }
    fn matmul(&self, xs: MatmulOperands<'_, B::Storage>) -> Result<B::Storage> {
        let (a, b) = (xs.lhs, xs.rhs);
        match self.bug {
            Bug::MatmulIgnoresTranspose => {
                let (al, bl) = (Self::ignore_transpose(a), Self::ignore_transpose(b));
                direct::matmul(&self.inner, (a.storage(), &al), (b.storage(), &bl))
            }
            Bug::MatmulFlatBatch => {
                let ((a, al), (b, bl)) = (self.flat_batch(a)?, self.flat_batch(b)?);
                direct::matmul(&self.inner, (&a, &al), (&b, &bl))
            }
            _ => self.inner.matmul(xs),
        }
    }
    fn index_select(&self, xs: IndexSelect<'_, B::Storage>) -> Result<B::Storage> {
        if self.bug == Bug::IndexSelectPanicsOnBadIndex {
            // The kernel's view of the axis: a table it indexes without a bounds check.
            let rows: Vec<usize> = (0..xs.x.dims()[xs.axis]).collect();
            for index in self.inner.download(xs.indices)?.to_f64_vec() {
                std::hint::black_box(rows[index as usize]);
            }
        }
        self.inner.index_select(xs)
    }
    fn gather(&self, xs: Gather<'_, B::Storage>) -> Result<B::Storage> {
        self.inner.gather(xs)
    }
    fn scatter_add(&self, xs: ScatterAdd<'_, B::Storage>) -> Result<B::Storage> {
        self.inner.scatter_add(xs)
    }
    fn random(
        &self,
        dist: Distribution,
        n: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<B::Storage> {
        self.check_dtype("random", dtype)?;
        self.inner.random(dist, n, dtype, seed, offset)
    }

    fn softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        let a = [axis as isize];
        match self.bug {
            Bug::SoftmaxWithoutShift => {
                let e = x.exp()?;
                e.div(&e.sum(&a, true)?)
            }
            Bug::SoftmaxFiniteShift => {
                let m = x.max(&a, true)?;
                let shift = m
                    .abs()?
                    .eq_scalar(f64::INFINITY)?
                    .where_select(&m.zeros_like()?, &m)?;
                let e = x.sub(&shift)?.exp()?;
                e.div(&e.sum(&a, true)?)
            }
            _ => composite::softmax(x, axis),
        }
    }

    fn log_softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        if self.bug == Bug::LogSoftmaxMinusLse {
            return x.sub(&composite::logsumexp(x, axis)?);
        }
        composite::log_softmax(x, axis)
    }

    fn cross_entropy(
        &self,
        logits: &Tensor<Self>,
        targets: &Tensor<Self>,
        label_smoothing: f64,
    ) -> Result<Tensor<Self>> {
        if self.bug != Bug::CrossEntropyUnshifted {
            return composite::cross_entropy(logits, targets, label_smoothing);
        }
        let (n, c) =
            tessera_core::cross_entropy::check_cross_entropy(logits, targets, label_smoothing)?;
        let lse = composite::logsumexp(logits, 1)?.reshape([n])?;
        let picked = logits.gather(1, &targets.reshape([n, 1])?)?.reshape([n])?;
        let spread = logits
            .sum(&[1], false)?
            .mul_scalar(label_smoothing / c as f64)?;
        lse.sub(&picked.mul_scalar(1.0 - label_smoothing)?)?
            .sub(&spread)
    }

    fn max_pool2d(
        &self,
        x: &Tensor<Self>,
        params: Pool2dParams,
    ) -> Result<(Tensor<Self>, Tensor<Self>)> {
        let (values, positions) = composite::max_pool2d(x, params)?;
        if self.bug != Bug::MaxPoolLastTie {
            return Ok((values, positions));
        }
        // The same windows with `>=`: the last position of the maximum.
        let (d, v) = (x.dims(), x.to_vec_f64()?);
        let (oh, ow) = (values.dims()[2], values.dims()[3]);
        let ((kh, kw), (sy, sx), (py, px)) = (params.kernel, params.stride, params.padding);
        let last: Vec<i64> = (0..d[0] * d[1] * oh * ow)
            .map(|o| {
                let (plane, oy, ox) = (o / (oh * ow), o / ow % oh, o % ow);
                let mut best: Option<(f64, usize)> = None;
                for t in 0..kh * kw {
                    let y = (oy * sy + t / kw).checked_sub(py).filter(|&y| y < d[2]);
                    let xx = (ox * sx + t % kw).checked_sub(px).filter(|&xx| xx < d[3]);
                    let (Some(y), Some(xx)) = (y, xx) else {
                        continue;
                    };
                    let value = v[(plane * d[2] + y) * d[3] + xx];
                    if best.is_none_or(|(b, _)| !b.is_nan() && (value >= b || value.is_nan())) {
                        best = Some((value, t));
                    }
                }
                best.map_or(0, |(_, t)| t as i64)
            })
            .collect();
        let positions = Tensor::from_vec(last, values.dims().to_vec(), self)?;
        Ok((values, positions))
    }

    fn relu_backward(&self, x: &Tensor<Self>, grad: &Tensor<Self>) -> Result<Tensor<Self>> {
        match self.bug {
            Bug::ReluGradAtZero => x.ge_scalar(0.0)?.where_select(grad, &grad.zeros_like()?),
            Bug::ReluGradBlocksNan => x.gt_scalar(0.0)?.where_select(grad, &grad.zeros_like()?),
            _ => composite::relu_backward(x, grad),
        }
    }

    fn adam_update(
        &self,
        param: &Tensor<Self>,
        grad: &Tensor<Self>,
        exp_avg: &Tensor<Self>,
        exp_avg_sq: &Tensor<Self>,
        max_exp_avg_sq: Option<&Tensor<Self>>,
        mut update: AdamUpdate,
    ) -> Result<AdamTensors<Self>> {
        if self.bug == Bug::AdamDropsBiasCorrection {
            update.bias_correction2_sqrt = 1.0;
        }
        composite::adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
    }

    fn scaled_dot_product_attention(
        &self,
        inputs: AttentionInputs<'_, Self>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Self>> {
        self.with_causality(inputs, params, composite::scaled_dot_product_attention)
    }

    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Self>,
        inputs: AttentionInputs<'_, Self>,
        forward: &AttentionOutput<Self>,
        params: &AttentionParams,
    ) -> Result<AttentionGrads<Self>> {
        self.with_causality(inputs, params, |inputs, params| {
            composite::scaled_dot_product_attention_backward(grad_out, inputs, forward, params)
        })
    }
}

impl<B: Backend> Planted<B> {
    /// Runs attention with the inputs and parameters given, except under
    /// [`Bug::AttentionCausalBottomRight`], where causal masking becomes an additive mask
    /// aligned to the bottom-right corner, added to the caller's mask.
    fn with_causality<T>(
        &self,
        inputs: AttentionInputs<'_, Self>,
        params: &AttentionParams,
        run: impl FnOnce(AttentionInputs<'_, Self>, &AttentionParams) -> Result<T>,
    ) -> Result<T> {
        if self.bug != Bug::AttentionCausalBottomRight || !params.causal {
            return run(inputs, params);
        }
        let AttentionInputs { q, k, mask, .. } = inputs;
        let (l, s) = (q.dims()[q.rank() - 2], k.dims()[k.rank() - 2]);
        let dtype = q.dtype();
        let rows = Tensor::arange(0.0, l as f64, 1.0, dtype, self)?.reshape([l, 1])?;
        let cols = Tensor::arange(0.0, s as f64, 1.0, dtype, self)?.reshape([1, s])?;
        // Keeps key j for query i when j <= i + S - L.
        let keep = cols.le(&rows.add_scalar(s as f64 - l as f64)?)?;
        let zeros = Tensor::zeros([l, s], dtype, self)?;
        let excluded = Tensor::full([l, s], f64::NEG_INFINITY, dtype, self)?;
        let mut additive = keep.where_select(&zeros, &excluded)?;
        if let Some(m) = mask {
            let m = if m.dtype() == DType::Bool {
                m.where_select(&zeros, &excluded)?
            } else {
                m.clone()
            };
            additive = additive.add(&m)?;
        }
        let params = AttentionParams {
            causal: false,
            ..*params
        };
        let mask = Some(&additive);
        run(AttentionInputs { mask, ..inputs }, &params)
    }
}

/// `values` (each a value of `dtype`) as host data of `dtype`.
fn host_data(dtype: DType, values: &[f64]) -> Result<HostData> {
    let v = values.iter().copied();
    Ok(match dtype {
        DType::F32 => HostData::F32(v.map(|v| v as f32).collect()),
        DType::F64 => HostData::F64(v.collect()),
        DType::I64 => HostData::I64(v.map(|v| v as i64).collect()),
        DType::Bool => HostData::Bool(v.map(|v| u8::from(v != 0.0)).collect()),
        DType::F16 => HostData::F16(v.map(f16::from_f64).collect()),
        DType::BF16 => HostData::BF16(v.map(bf16::from_f64).collect()),
        dtype => {
            return Err(Error::UnsupportedDType {
                op: "planted",
                dtype,
            })
        }
    })
}

/// What the planted backends are checked on: every cell but the 16-bit floats', which they
/// leave out (see `supports_dtype`).
pub fn capabilities() -> tessera_conformance::suite::Capabilities {
    tessera_conformance::suite::Capabilities::all()
        .without_dtype(DType::F16)
        .without_dtype(DType::BF16)
}
