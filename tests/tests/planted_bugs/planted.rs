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
use tessera_core::{
    composite, ArgReduceOp, AssignMode, AttentionGrads, AttentionOutput, AttentionParams, Backend,
    BackendStorage, BinaryOp, CmpOp, DType, Device, Distribution, HostData, Layout, Pool2dParams,
    ReduceOp, Result, Tensor, UnaryOp,
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
            Err(tessera_core::Error::UnsupportedDType { op, dtype })
        }
    }

    /// `inner` with `bug`.
    pub fn new(inner: B, bug: Bug) -> Self {
        Planted { inner, bug }
    }

    /// The logical values of `layout` over `storage`.
    fn read(&self, storage: &B::Storage, layout: &Layout) -> Result<HostData> {
        self.inner.download(storage, layout)
    }

    /// The operand as the buggy kernel sees it: a broadcast operand's un-broadcast values
    /// repeated by flat index.
    fn misbroadcast(&self, storage: &B::Storage, layout: &Layout) -> Result<(B::Storage, Layout)> {
        let broadcast = layout
            .dims()
            .iter()
            .zip(layout.strides())
            .any(|(&d, &s)| s == 0 && d > 1);
        if !broadcast || layout.numel() == 0 {
            return Ok((
                self.inner.copy_strided(storage, layout)?,
                Layout::contiguous(layout.shape().clone()),
            ));
        }
        let source_dims: Vec<usize> = layout
            .dims()
            .iter()
            .zip(layout.strides())
            .map(|(&d, &s)| if s == 0 { 1 } else { d })
            .collect();
        let source_layout = Layout::strided(
            source_dims,
            layout.strides().to_vec(),
            layout.offset(),
            storage.len(),
        )?;
        let source = self.read(storage, &source_layout)?.to_f64_vec();
        let wrong: Vec<f64> = (0..layout.numel())
            .map(|i| source[i % source.len()])
            .collect();
        let data = host_data(storage.dtype(), &wrong)?;
        Ok((
            self.inner.upload(data)?,
            Layout::contiguous(layout.shape().clone()),
        ))
    }

    /// `f32_map` / `f64_map` applied on the host to the elements of `layout`, as a kernel of
    /// that precision computes them; a contiguous result.
    fn host_map(
        &self,
        storage: &B::Storage,
        layout: &Layout,
        f32_map: impl Fn(f32) -> f32,
        f64_map: impl Fn(f64) -> f64,
    ) -> Result<B::Storage> {
        let data = match self.read(storage, layout)? {
            HostData::F32(v) => HostData::F32(v.into_iter().map(f32_map).collect()),
            HostData::F64(v) => HostData::F64(v.into_iter().map(f64_map).collect()),
            other => other,
        };
        self.inner.upload(data)
    }

    /// The operand of a batched matmul as a kernel reads it that takes the batch offset of
    /// flat batch index `b` to be `b * (innermost batch stride)`: a contiguous copy of those
    /// matrices (offsets wrap around the storage, where a device would read out of bounds).
    fn flat_batch(&self, storage: &B::Storage, layout: &Layout) -> Result<(B::Storage, Layout)> {
        let (d, s) = (layout.dims(), layout.strides());
        let r = d.len();
        if r < 4 || layout.numel() == 0 {
            return Ok((
                self.inner.copy_strided(storage, layout)?,
                Layout::contiguous(layout.shape().clone()),
            ));
        }
        let batches: usize = d[..r - 2].iter().product();
        let inner = s[r - 3] as usize;
        let len = storage.len();
        let mut out = Vec::new();
        let all = self.read(storage, &Layout::contiguous([len]))?.to_f64_vec();
        for b in 0..batches {
            let base = layout.offset() + b * inner;
            for i in 0..d[r - 2] {
                for j in 0..d[r - 1] {
                    let at = base + i * s[r - 2] as usize + j * s[r - 1] as usize;
                    out.push(all[at % len]);
                }
            }
        }
        let data = match storage.dtype() {
            DType::F32 => HostData::F32(out.iter().map(|&v| v as f32).collect()),
            _ => HostData::F64(out),
        };
        Ok((
            self.inner.upload(data)?,
            Layout::contiguous(layout.shape().clone()),
        ))
    }

    /// The layout as a kernel that ignores a transposed operand reads it: row-major from the
    /// same offset (when that stays inside the storage).
    fn ignore_transpose(&self, storage: &B::Storage, layout: &Layout) -> Layout {
        let (d, s) = (layout.dims(), layout.strides());
        let r = d.len();
        let transposed = r >= 2 && d[r - 1] > 1 && d[r - 2] > 1 && s[r - 2] < s[r - 1];
        if !transposed {
            return layout.clone();
        }
        let row_major = layout.shape().contiguous_strides();
        Layout::strided(
            layout.shape().clone(),
            row_major,
            layout.offset(),
            storage.len(),
        )
        .unwrap_or_else(|_| layout.clone())
    }
}

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
    fn upload(&self, data: HostData) -> Result<B::Storage> {
        self.inner.upload(data)
    }
    fn download(&self, s: &B::Storage, l: &Layout) -> Result<HostData> {
        self.inner.download(s, l)
    }
    fn full(&self, n: usize, dtype: DType, value: f64) -> Result<B::Storage> {
        self.check_dtype("full", dtype)?;
        self.inner.full(n, dtype, value)
    }
    fn copy_strided(&self, s: &B::Storage, l: &Layout) -> Result<B::Storage> {
        self.inner.copy_strided(s, l)
    }
    fn assign(
        &self,
        d: &mut B::Storage,
        dl: &Layout,
        s: &B::Storage,
        sl: &Layout,
        m: AssignMode,
    ) -> Result<()> {
        self.inner.assign(d, dl, s, sl, m)
    }
    fn cast(&self, s: &B::Storage, l: &Layout, dtype: DType) -> Result<B::Storage> {
        self.check_dtype("cast", dtype)?;
        match self.bug {
            Bug::CastFlushesSubnormals => {
                let out = self.inner.cast(s, l, dtype)?;
                let min_normal = match dtype {
                    DType::F32 => f64::from(f32::MIN_POSITIVE),
                    DType::F64 => f64::MIN_POSITIVE,
                    DType::F16 => tessera_core::f16::MIN_POSITIVE.to_f64(),
                    DType::BF16 => tessera_core::bf16::MIN_POSITIVE.to_f64(),
                    _ => return Ok(out),
                };
                let all = Layout::contiguous([out.len()]);
                let flushed: Vec<f64> = self
                    .read(&out, &all)?
                    .to_f64_vec()
                    .into_iter()
                    .map(|v| {
                        if v.abs() < min_normal {
                            0.0f64.copysign(v)
                        } else {
                            v
                        }
                    })
                    .collect();
                self.inner.upload(host_data(dtype, &flushed)?)
            }
            Bug::CastRoundsTwiceThroughF32 if s.dtype() == DType::F64 && dtype.is_half() => {
                let f32s = self.inner.cast(s, l, DType::F32)?;
                self.inner
                    .cast(&f32s, &Layout::contiguous(l.shape().clone()), dtype)
            }
            _ => self.inner.cast(s, l, dtype),
        }
    }
    fn unary(&self, op: UnaryOp, x: &B::Storage, l: &Layout) -> Result<B::Storage> {
        match (self.bug, op) {
            (Bug::SigmoidOverflows, UnaryOp::Sigmoid) => self.host_map(
                x,
                l,
                |v| v.exp() / (1.0 + v.exp()),
                |v| v.exp() / (1.0 + v.exp()),
            ),
            (Bug::SigmoidViaTanh, UnaryOp::Sigmoid) => self.host_map(
                x,
                l,
                |v| 0.5 * (0.5 * v).tanh() + 0.5,
                |v| 0.5 * (0.5 * v).tanh() + 0.5,
            ),
            _ => self.inner.unary(op, x, l),
        }
    }
    fn binary(
        &self,
        op: BinaryOp,
        a: &B::Storage,
        al: &Layout,
        b: &B::Storage,
        bl: &Layout,
    ) -> Result<B::Storage> {
        if self.bug == Bug::WrongBroadcast(op) {
            let (a, al) = self.misbroadcast(a, al)?;
            let (b, bl) = self.misbroadcast(b, bl)?;
            return self.inner.binary(op, &a, &al, &b, &bl);
        }
        self.inner.binary(op, a, al, b, bl)
    }
    fn compare(
        &self,
        op: CmpOp,
        a: &B::Storage,
        al: &Layout,
        b: &B::Storage,
        bl: &Layout,
    ) -> Result<B::Storage> {
        self.inner.compare(op, a, al, b, bl)
    }
    fn where_select(
        &self,
        c: &B::Storage,
        cl: &Layout,
        t: &B::Storage,
        tl: &Layout,
        f: &B::Storage,
        fl: &Layout,
    ) -> Result<B::Storage> {
        self.inner.where_select(c, cl, t, tl, f, fl)
    }
    fn reduce(
        &self,
        op: ReduceOp,
        x: &B::Storage,
        l: &Layout,
        axes: &[usize],
    ) -> Result<B::Storage> {
        match (self.bug, op) {
            (Bug::SumOffByOneOnOuterAxis, ReduceOp::Sum) => {
                let mut short = l.clone();
                for &a in axes.iter().filter(|&&a| a + 1 < l.rank()) {
                    let len = l.dims()[a];
                    short = short.narrow(a as isize, 0, len.saturating_sub(1))?;
                }
                self.inner.reduce(op, x, &short, axes)
            }
            (Bug::MaxSwallowsNan, ReduceOp::Max) if x.dtype().is_float() => {
                let values: Vec<f64> = self
                    .read(x, l)?
                    .to_f64_vec()
                    .into_iter()
                    .map(|v| if v.is_nan() { f64::NEG_INFINITY } else { v })
                    .collect();
                let data = match x.dtype() {
                    DType::F32 => HostData::F32(values.iter().map(|&v| v as f32).collect()),
                    _ => HostData::F64(values),
                };
                let clean = self.inner.upload(data)?;
                self.inner
                    .reduce(op, &clean, &Layout::contiguous(l.shape().clone()), axes)
            }
            _ => self.inner.reduce(op, x, l, axes),
        }
    }
    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &B::Storage,
        l: &Layout,
        axis: usize,
    ) -> Result<B::Storage> {
        self.inner.arg_reduce(op, x, l, axis)
    }
    fn matmul(
        &self,
        a: &B::Storage,
        al: &Layout,
        b: &B::Storage,
        bl: &Layout,
    ) -> Result<B::Storage> {
        if self.bug == Bug::MatmulIgnoresTranspose {
            let (al, bl) = (self.ignore_transpose(a, al), self.ignore_transpose(b, bl));
            return self.inner.matmul(a, &al, b, &bl);
        }
        if self.bug == Bug::MatmulFlatBatch {
            let (a, al) = self.flat_batch(a, al)?;
            let (b, bl) = self.flat_batch(b, bl)?;
            return self.inner.matmul(&a, &al, &b, &bl);
        }
        self.inner.matmul(a, al, b, bl)
    }
    fn index_select(
        &self,
        x: &B::Storage,
        l: &Layout,
        axis: usize,
        i: &B::Storage,
        il: &Layout,
    ) -> Result<B::Storage> {
        if self.bug == Bug::IndexSelectPanicsOnBadIndex {
            // The kernel's view of the axis: a table it indexes without a bounds check.
            let rows: Vec<usize> = (0..l.dims()[axis]).collect();
            for index in self.read(i, il)?.to_f64_vec() {
                std::hint::black_box(rows[index as usize]);
            }
        }
        self.inner.index_select(x, l, axis, i, il)
    }
    fn gather(
        &self,
        x: &B::Storage,
        l: &Layout,
        axis: usize,
        i: &B::Storage,
        il: &Layout,
    ) -> Result<B::Storage> {
        self.inner.gather(x, l, axis, i, il)
    }
    fn scatter_add(
        &self,
        base: &B::Storage,
        bl: &Layout,
        axis: usize,
        i: &B::Storage,
        il: &Layout,
        src: &B::Storage,
        sl: &Layout,
    ) -> Result<B::Storage> {
        self.inner.scatter_add(base, bl, axis, i, il, src, sl)
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
        let d = x.dims().to_vec();
        let (oh, ow) = (values.dims()[2], values.dims()[3]);
        let v = x.to_vec_f64()?;
        let (kh, kw) = params.kernel;
        let mut last = Vec::with_capacity(d[0] * d[1] * oh * ow);
        for plane in 0..d[0] * d[1] {
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut best: Option<(f64, usize)> = None;
                    for t in 0..kh * kw {
                        let y = (oy * params.stride.0 + t / kw).checked_sub(params.padding.0);
                        let xx = (ox * params.stride.1 + t % kw).checked_sub(params.padding.1);
                        let (Some(y), Some(xx)) = (y, xx) else {
                            continue;
                        };
                        if y >= d[2] || xx >= d[3] {
                            continue;
                        }
                        let value = v[(plane * d[2] + y) * d[3] + xx];
                        let take = match best {
                            None => true,
                            Some((b, _)) => !b.is_nan() && (value >= b || value.is_nan()),
                        };
                        if take {
                            best = Some((value, t));
                        }
                    }
                    last.push(best.map_or(0, |(_, t)| t as i64));
                }
            }
        }
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
        update: AdamUpdate,
    ) -> Result<AdamTensors<Self>> {
        let update = if self.bug == Bug::AdamDropsBiasCorrection {
            AdamUpdate {
                bias_correction2_sqrt: 1.0,
                ..update
            }
        } else {
            update
        };
        composite::adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
    }

    fn scaled_dot_product_attention(
        &self,
        q: &Tensor<Self>,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        mask: Option<&Tensor<Self>>,
        params: &AttentionParams,
    ) -> Result<AttentionOutput<Self>> {
        let (mask, params) = self.attention_causality(q, k, mask, params)?;
        composite::scaled_dot_product_attention(q, k, v, mask.as_ref(), &params)
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
        let (mask, params) = self.attention_causality(q, k, mask, params)?;
        composite::scaled_dot_product_attention_backward(
            grad_out,
            q,
            k,
            v,
            mask.as_ref(),
            forward,
            &params,
        )
    }
}

impl<B: Backend> Planted<B> {
    /// The mask and parameters attention runs with: unchanged, except under
    /// [`Bug::AttentionCausalBottomRight`], where causal masking becomes an additive mask
    /// aligned to the bottom-right corner, added to the caller's mask.
    fn attention_causality(
        &self,
        q: &Tensor<Self>,
        k: &Tensor<Self>,
        mask: Option<&Tensor<Self>>,
        params: &AttentionParams,
    ) -> Result<(Option<Tensor<Self>>, AttentionParams)> {
        if self.bug != Bug::AttentionCausalBottomRight || !params.causal {
            return Ok((mask.cloned(), *params));
        }
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
        Ok((Some(additive), params))
    }
}

/// `values` (each a value of `dtype`) as host data of `dtype`.
fn host_data(dtype: DType, values: &[f64]) -> Result<HostData> {
    Ok(match dtype {
        DType::F32 => HostData::F32(values.iter().map(|&v| v as f32).collect()),
        DType::F64 => HostData::F64(values.to_vec()),
        DType::I64 => HostData::I64(values.iter().map(|&v| v as i64).collect()),
        DType::Bool => HostData::Bool(values.iter().map(|&v| u8::from(v != 0.0)).collect()),
        DType::F16 => HostData::F16(
            values
                .iter()
                .map(|&v| tessera_core::f16::from_f64(v))
                .collect(),
        ),
        DType::BF16 => HostData::BF16(
            values
                .iter()
                .map(|&v| tessera_core::bf16::from_f64(v))
                .collect(),
        ),
        other => {
            return Err(tessera_core::Error::UnsupportedDType {
                op: "planted",
                dtype: other,
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
