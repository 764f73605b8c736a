//! [`Checked`]: the `Backend` impl. Every primitive runs on the backend under test and on the
//! reference, the two outputs are compared with the op's tolerance, and the first divergence
//! beyond it is returned as [`tessera_core::Error::Divergence`].

use crate::divergence::Comparison;
use crate::storage::CheckedStorage;
use crate::tolerance::Tolerance;
use std::sync::Arc;
use tessera_core::backend::{AdamTensors, AdamUpdate};
use tessera_core::{
    ArgReduceOp, AssignMode, Backend, BackendStorage, BinaryOp, CmpOp, Conv2dParams, DType, Device,
    Distribution, HostData, Layout, Pool2dParams, ReduceOp, Result, Shape, Tensor, UnaryOp,
};

/// A backend that runs every op on `B` (the backend under test) and on `R` (the reference),
/// compares the results, and returns a typed [`tessera_core::Error::Divergence`] (op name, input
/// shapes, max error, first element out of tolerance) at the first disagreement.
///
/// Use it to debug a new backend on a real workload: `Checked<MyGpu, Cpu>` trains a model like
/// `MyGpu` would, only slower, and stops at the first op that computes something the CPU does
/// not. After each op the reference's copy of the result is overwritten with the values of the
/// backend under test, so every op is checked on identical inputs and rounding differences never
/// accumulate into false alarms.
///
/// Tolerances (see [`Tolerance`]): exact for results that are one of the inputs or defined bit
/// for bit (copies, casts, comparisons, select, max/min, arg-reductions, indexing, random draws,
/// neg/abs/sign/relu/floor/ceil, max pooling, `relu_backward`); simple for correctly rounded
/// arithmetic (add, sub, mul, div, square, recip, sqrt, in-place accumulation); transcendental
/// for exp, log, sin, cos, tanh, sigmoid, gelu, erf, pow and the softmax family; accumulation
/// (scaled by the magnitude `op(|inputs|)`, computed on the reference) for sum, prod, matmul,
/// scatter_add, convolutions, pooling gradients, average pooling and the Adam step.
/// [`Checked::with_tolerance_factor`] loosens them all.
///
/// ```
/// use tessera_checked::Checked;
/// use tessera_cpu::Cpu;
/// use tessera_core::{DType, Tensor};
/// # fn main() -> tessera_core::Result<()> {
/// let dev = Checked::new(Cpu::new(), Cpu::new());
/// let a = Tensor::randn([3, 4], DType::F32, 0, &dev)?;
/// let b = a.t()?.matmul(&a)?.softmax(-1)?; // every op ran twice and agreed
/// assert_eq!(b.dims(), &[4, 4]);
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Checked<B: Backend, R: Backend> {
    under_test: B,
    reference: R,
    tolerance_factor: f64,
}

impl<B: Backend, R: Backend> Checked<B, R> {
    /// Checks `under_test` against `reference` with the default tolerances.
    pub fn new(under_test: B, reference: R) -> Self {
        Checked {
            under_test,
            reference,
            tolerance_factor: 1.0,
        }
    }

    /// The same checker with every float tolerance multiplied by `factor` (> 1 loosens).
    pub fn with_tolerance_factor(self, factor: f64) -> Self {
        Checked {
            tolerance_factor: factor,
            ..self
        }
    }

    /// The backend under test.
    pub fn under_test(&self) -> &B {
        &self.under_test
    }

    /// The reference backend.
    pub fn reference(&self) -> &R {
        &self.reference
    }

    /// Reads every element of a contiguous storage of `B`.
    fn host_b(&self, s: &B::Storage) -> Result<HostData> {
        self.under_test.download(s, &Layout::contiguous([s.len()]))
    }

    /// Reads every element of a contiguous storage of `R`.
    fn host_r(&self, s: &R::Storage) -> Result<HostData> {
        self.reference.download(s, &Layout::contiguous([s.len()]))
    }

    /// Compares the two outputs of `op`; on agreement pairs the output of the backend under
    /// test with a reference mirror holding the same values.
    pub(crate) fn settle(
        &self,
        spec: OpSpec,
        b_out: B::Storage,
        r_out: R::Storage,
        magnitude: Option<Vec<f64>>,
    ) -> Result<CheckedStorage<B, R>> {
        let got = self.host_b(&b_out)?;
        let expected = self.host_r(&r_out)?;
        self.compare(&spec, &got, &expected, magnitude.as_deref())?;
        Ok(CheckedStorage {
            under_test: Arc::new(b_out),
            reference: Arc::new(self.reference.upload(got)?),
        })
    }

    /// Compares host copies of the two outputs of `op`.
    pub(crate) fn compare(
        &self,
        spec: &OpSpec,
        got: &HostData,
        expected: &HostData,
        magnitude: Option<&[f64]>,
    ) -> Result<()> {
        Comparison {
            op: spec.op,
            backends: (self.under_test.name(), self.reference.name()),
            inputs: spec.inputs.clone(),
            output: &spec.output,
            tolerance: spec.tolerance.scaled(self.tolerance_factor),
            magnitude,
        }
        .check(got, expected)
    }

    /// `op(|x|)` on the reference, flattened: the error magnitude of a linear accumulating op.
    fn magnitude_of(
        &self,
        dtype: DType,
        inputs: &[(&R::Storage, &Layout)],
        op: impl FnOnce(&R, &[R::Storage]) -> Result<R::Storage>,
    ) -> Result<Option<Vec<f64>>> {
        if !dtype.is_float() {
            return Ok(None);
        }
        let abs = inputs
            .iter()
            .map(|(s, l)| self.reference.unary(UnaryOp::Abs, s, l))
            .collect::<Result<Vec<_>>>()?;
        let m = op(&self.reference, &abs)?;
        Ok(Some(self.host_r(&m)?.to_f64_vec()))
    }
}

/// What to compare for one op.
pub(crate) struct OpSpec {
    pub op: &'static str,
    pub inputs: Vec<Shape>,
    pub output: Vec<usize>,
    pub tolerance: Tolerance,
}

impl OpSpec {
    pub(crate) fn new(
        op: &'static str,
        inputs: &[&Layout],
        output: &[usize],
        tolerance: Tolerance,
    ) -> Self {
        OpSpec {
            op,
            inputs: inputs.iter().map(|l| l.shape().clone()).collect(),
            output: output.to_vec(),
            tolerance,
        }
    }
}

fn with_axes_kept(dims: &[usize], axes: &[usize]) -> Vec<usize> {
    let mut out = dims.to_vec();
    for &a in axes {
        if a < out.len() {
            out[a] = 1;
        }
    }
    out
}

impl<B: Backend, R: Backend> Backend for Checked<B, R> {
    type Storage = CheckedStorage<B, R>;

    fn name(&self) -> &'static str {
        "checked"
    }

    fn device(&self) -> Device {
        Device {
            kind: "checked",
            ordinal: self.under_test.device().ordinal,
        }
    }

    fn supports_dtype(&self, dtype: DType) -> bool {
        self.under_test.supports_dtype(dtype) && self.reference.supports_dtype(dtype)
    }

    fn synchronize(&self) -> Result<()> {
        self.under_test.synchronize()?;
        self.reference.synchronize()
    }

    // ----- memory -----

    fn upload(&self, data: HostData) -> Result<Self::Storage> {
        Ok(CheckedStorage {
            reference: Arc::new(self.reference.upload(data.clone())?),
            under_test: Arc::new(self.under_test.upload(data)?),
        })
    }

    fn download(&self, storage: &Self::Storage, layout: &Layout) -> Result<HostData> {
        let got = self.under_test.download(&storage.under_test, layout)?;
        let expected = self.reference.download(&storage.reference, layout)?;
        let spec = OpSpec::new("download", &[layout], layout.dims(), Tolerance::SAME_VALUE);
        self.compare(&spec, &got, &expected, None)?;
        Ok(got)
    }

    fn full(&self, numel: usize, dtype: DType, value: f64) -> Result<Self::Storage> {
        let spec = OpSpec::new("full", &[], &[numel], Tolerance::SAME_VALUE);
        let b = self.under_test.full(numel, dtype, value)?;
        let r = self.reference.full(numel, dtype, value)?;
        self.settle(spec, b, r, None)
    }

    fn copy_strided(&self, storage: &Self::Storage, layout: &Layout) -> Result<Self::Storage> {
        let spec = OpSpec::new(
            "copy_strided",
            &[layout],
            layout.dims(),
            Tolerance::SAME_VALUE,
        );
        let b = self.under_test.copy_strided(&storage.under_test, layout)?;
        let r = self.reference.copy_strided(&storage.reference, layout)?;
        self.settle(spec, b, r, None)
    }

    fn assign(
        &self,
        dst: &mut Self::Storage,
        dst_layout: &Layout,
        src: &Self::Storage,
        src_layout: &Layout,
        mode: AssignMode,
    ) -> Result<()> {
        let tolerance = match mode {
            AssignMode::Overwrite => Tolerance::SAME_VALUE,
            AssignMode::Accumulate => Tolerance::simple(dst.dtype()),
        };
        let spec = OpSpec::new("assign", &[dst_layout, src_layout], &[dst.len()], tolerance);
        // The buffers are shared only while a composite runs; copy them if they are.
        if Arc::get_mut(&mut dst.under_test).is_none() {
            let whole = Layout::contiguous([dst.len()]);
            dst.under_test = Arc::new(self.under_test.copy_strided(&dst.under_test, &whole)?);
        }
        if Arc::get_mut(&mut dst.reference).is_none() {
            let whole = Layout::contiguous([dst.reference.len()]);
            dst.reference = Arc::new(self.reference.copy_strided(&dst.reference, &whole)?);
        }
        let b = Arc::get_mut(&mut dst.under_test).expect("unique after the copy");
        self.under_test
            .assign(b, dst_layout, &src.under_test, src_layout, mode)?;
        let r = Arc::get_mut(&mut dst.reference).expect("unique after the copy");
        self.reference
            .assign(r, dst_layout, &src.reference, src_layout, mode)?;
        let got = self.host_b(&dst.under_test)?;
        let expected = self.host_r(&dst.reference)?;
        self.compare(&spec, &got, &expected, None)?;
        dst.reference = Arc::new(self.reference.upload(got)?);
        Ok(())
    }

    fn cast(
        &self,
        storage: &Self::Storage,
        layout: &Layout,
        dtype: DType,
    ) -> Result<Self::Storage> {
        let spec = OpSpec::new("cast", &[layout], layout.dims(), Tolerance::SAME_VALUE);
        let b = self.under_test.cast(&storage.under_test, layout, dtype)?;
        let r = self.reference.cast(&storage.reference, layout, dtype)?;
        self.settle(spec, b, r, None)
    }

    // ----- element-wise -----

    fn unary(&self, op: UnaryOp, x: &Self::Storage, layout: &Layout) -> Result<Self::Storage> {
        let tolerance = Tolerance::of_unary(op, x.dtype());
        let spec = OpSpec::new(op.name(), &[layout], layout.dims(), tolerance);
        let b = self.under_test.unary(op, &x.under_test, layout)?;
        let r = self.reference.unary(op, &x.reference, layout)?;
        // gelu's `x/2 * (1 + erf(x/√2))` cancels for negative x: its rounding is relative to
        // `|x| / 2`, not to the (small) result.
        let magnitude = match op {
            UnaryOp::Gelu => self
                .magnitude_of(x.dtype(), &[(&x.reference, layout)], |r, abs| {
                    r.copy_strided(&abs[0], &Layout::contiguous(layout.shape().clone()))
                })?
                .map(|m| m.into_iter().map(|v| 0.5 * v).collect()),
            _ => None,
        };
        self.settle(spec, b, r, magnitude)
    }

    fn binary(
        &self,
        op: BinaryOp,
        lhs: &Self::Storage,
        lhs_layout: &Layout,
        rhs: &Self::Storage,
        rhs_layout: &Layout,
    ) -> Result<Self::Storage> {
        let tolerance = Tolerance::of_binary(op, lhs.dtype());
        let spec = OpSpec::new(
            op.name(),
            &[lhs_layout, rhs_layout],
            lhs_layout.dims(),
            tolerance,
        );
        let b =
            self.under_test
                .binary(op, &lhs.under_test, lhs_layout, &rhs.under_test, rhs_layout)?;
        let r =
            self.reference
                .binary(op, &lhs.reference, lhs_layout, &rhs.reference, rhs_layout)?;
        self.settle(spec, b, r, None)
    }

    fn compare(
        &self,
        op: CmpOp,
        lhs: &Self::Storage,
        lhs_layout: &Layout,
        rhs: &Self::Storage,
        rhs_layout: &Layout,
    ) -> Result<Self::Storage> {
        let spec = OpSpec::new(
            op.name(),
            &[lhs_layout, rhs_layout],
            lhs_layout.dims(),
            Tolerance::SAME_VALUE,
        );
        let b = self.under_test.compare(
            op,
            &lhs.under_test,
            lhs_layout,
            &rhs.under_test,
            rhs_layout,
        )?;
        let r =
            self.reference
                .compare(op, &lhs.reference, lhs_layout, &rhs.reference, rhs_layout)?;
        self.settle(spec, b, r, None)
    }

    fn where_select(
        &self,
        cond: &Self::Storage,
        cond_layout: &Layout,
        on_true: &Self::Storage,
        true_layout: &Layout,
        on_false: &Self::Storage,
        false_layout: &Layout,
    ) -> Result<Self::Storage> {
        let layouts = [cond_layout, true_layout, false_layout];
        let spec = OpSpec::new("where", &layouts, cond_layout.dims(), Tolerance::SAME_VALUE);
        let b = self.under_test.where_select(
            &cond.under_test,
            cond_layout,
            &on_true.under_test,
            true_layout,
            &on_false.under_test,
            false_layout,
        )?;
        let r = self.reference.where_select(
            &cond.reference,
            cond_layout,
            &on_true.reference,
            true_layout,
            &on_false.reference,
            false_layout,
        )?;
        self.settle(spec, b, r, None)
    }

    // ----- reductions -----

    fn reduce(
        &self,
        op: ReduceOp,
        x: &Self::Storage,
        layout: &Layout,
        axes: &[usize],
    ) -> Result<Self::Storage> {
        let dtype = x.dtype();
        let terms: usize = axes.iter().filter_map(|&a| layout.dims().get(a)).product();
        let (tolerance, magnitude) = match op {
            ReduceOp::Max | ReduceOp::Min => (Tolerance::SAME_VALUE, None),
            ReduceOp::Prod => (Tolerance::accumulation(dtype, terms), None),
            ReduceOp::Sum => {
                let m = self.magnitude_of(dtype, &[(&x.reference, layout)], |r, abs| {
                    r.reduce(
                        ReduceOp::Sum,
                        &abs[0],
                        &Layout::contiguous(layout.shape().clone()),
                        axes,
                    )
                })?;
                (Tolerance::accumulation(dtype, terms), m)
            }
        };
        let output = with_axes_kept(layout.dims(), axes);
        let spec = OpSpec::new(op.name(), &[layout], &output, tolerance);
        let b = self.under_test.reduce(op, &x.under_test, layout, axes)?;
        let r = self.reference.reduce(op, &x.reference, layout, axes)?;
        self.settle(spec, b, r, magnitude)
    }

    fn arg_reduce(
        &self,
        op: ArgReduceOp,
        x: &Self::Storage,
        layout: &Layout,
        axis: usize,
    ) -> Result<Self::Storage> {
        let output = with_axes_kept(layout.dims(), &[axis]);
        let spec = OpSpec::new(op.name(), &[layout], &output, Tolerance::SAME_VALUE);
        let b = self
            .under_test
            .arg_reduce(op, &x.under_test, layout, axis)?;
        let r = self.reference.arg_reduce(op, &x.reference, layout, axis)?;
        self.settle(spec, b, r, None)
    }

    // ----- linear algebra -----

    fn matmul(
        &self,
        lhs: &Self::Storage,
        lhs_layout: &Layout,
        rhs: &Self::Storage,
        rhs_layout: &Layout,
    ) -> Result<Self::Storage> {
        let (l, r) = (lhs_layout.dims(), rhs_layout.dims());
        let k = l.last().copied().unwrap_or(0);
        let mut output = l.to_vec();
        if let (Some(last), Some(&n)) = (output.last_mut(), r.last()) {
            *last = n;
        }
        let dtype = lhs.dtype();
        let magnitude = self.magnitude_of(
            dtype,
            &[(&lhs.reference, lhs_layout), (&rhs.reference, rhs_layout)],
            |r, abs| {
                let (la, ra) = (
                    Layout::contiguous(lhs_layout.shape().clone()),
                    Layout::contiguous(rhs_layout.shape().clone()),
                );
                r.matmul(&abs[0], &la, &abs[1], &ra)
            },
        )?;
        let tolerance = Tolerance::accumulation(dtype, k);
        let spec = OpSpec::new("matmul", &[lhs_layout, rhs_layout], &output, tolerance);
        let b = self
            .under_test
            .matmul(&lhs.under_test, lhs_layout, &rhs.under_test, rhs_layout)?;
        let r = self
            .reference
            .matmul(&lhs.reference, lhs_layout, &rhs.reference, rhs_layout)?;
        self.settle(spec, b, r, magnitude)
    }

    // ----- indexing -----

    fn index_select(
        &self,
        x: &Self::Storage,
        layout: &Layout,
        axis: usize,
        indices: &Self::Storage,
        indices_layout: &Layout,
    ) -> Result<Self::Storage> {
        let mut output = layout.dims().to_vec();
        if axis < output.len() {
            output[axis] = indices_layout.numel();
        }
        let spec = OpSpec::new(
            "index_select",
            &[layout, indices_layout],
            &output,
            Tolerance::SAME_VALUE,
        );
        let b = self.under_test.index_select(
            &x.under_test,
            layout,
            axis,
            &indices.under_test,
            indices_layout,
        )?;
        let r = self.reference.index_select(
            &x.reference,
            layout,
            axis,
            &indices.reference,
            indices_layout,
        )?;
        self.settle(spec, b, r, None)
    }

    fn gather(
        &self,
        x: &Self::Storage,
        layout: &Layout,
        axis: usize,
        indices: &Self::Storage,
        indices_layout: &Layout,
    ) -> Result<Self::Storage> {
        let spec = OpSpec::new(
            "gather",
            &[layout, indices_layout],
            indices_layout.dims(),
            Tolerance::SAME_VALUE,
        );
        let b = self.under_test.gather(
            &x.under_test,
            layout,
            axis,
            &indices.under_test,
            indices_layout,
        )?;
        let r = self.reference.gather(
            &x.reference,
            layout,
            axis,
            &indices.reference,
            indices_layout,
        )?;
        self.settle(spec, b, r, None)
    }

    fn scatter_add(
        &self,
        base: &Self::Storage,
        base_layout: &Layout,
        axis: usize,
        indices: &Self::Storage,
        indices_layout: &Layout,
        src: &Self::Storage,
        src_layout: &Layout,
    ) -> Result<Self::Storage> {
        let dtype = base.dtype();
        let terms = 1 + indices_layout.dims().get(axis).copied().unwrap_or(0);
        let magnitude = self.magnitude_of(
            dtype,
            &[(&base.reference, base_layout), (&src.reference, src_layout)],
            |r, abs| {
                r.scatter_add(
                    &abs[0],
                    &Layout::contiguous(base_layout.shape().clone()),
                    axis,
                    &indices.reference,
                    indices_layout,
                    &abs[1],
                    &Layout::contiguous(src_layout.shape().clone()),
                )
            },
        )?;
        let spec = OpSpec::new(
            "scatter_add",
            &[base_layout, indices_layout, src_layout],
            base_layout.dims(),
            Tolerance::accumulation(dtype, terms),
        );
        let b = self.under_test.scatter_add(
            &base.under_test,
            base_layout,
            axis,
            &indices.under_test,
            indices_layout,
            &src.under_test,
            src_layout,
        )?;
        let r = self.reference.scatter_add(
            &base.reference,
            base_layout,
            axis,
            &indices.reference,
            indices_layout,
            &src.reference,
            src_layout,
        )?;
        self.settle(spec, b, r, magnitude)
    }

    // ----- random -----

    fn random(
        &self,
        dist: Distribution,
        numel: usize,
        dtype: DType,
        seed: u64,
        offset: u64,
    ) -> Result<Self::Storage> {
        // Uniform draws are bit-identical everywhere; normal ones go through the device's
        // log and cos, so they agree to a few ulps (tessera_core::random).
        let tolerance = match dist {
            Distribution::Uniform { .. } => Tolerance::SAME_VALUE,
            Distribution::Normal { .. } => Tolerance::transcendental(dtype),
        };
        let spec = OpSpec::new("random", &[], &[numel], tolerance);
        let b = self.under_test.random(dist, numel, dtype, seed, offset)?;
        let r = self.reference.random(dist, numel, dtype, seed, offset)?;
        self.settle(spec, b, r, None)
    }

    // ----- composites: the override of each backend, compared -----

    fn concat(&self, tensors: &[&Tensor<Self>], axis: usize) -> Result<Tensor<Self>> {
        self.checked_concat(tensors, axis)
    }

    fn softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.checked_softmax_family(crate::composites::RowOp::Softmax, x, axis)
    }

    fn log_softmax(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.checked_softmax_family(crate::composites::RowOp::LogSoftmax, x, axis)
    }

    fn logsumexp(&self, x: &Tensor<Self>, axis: usize) -> Result<Tensor<Self>> {
        self.checked_softmax_family(crate::composites::RowOp::LogSumExp, x, axis)
    }

    fn conv2d(
        &self,
        x: &Tensor<Self>,
        weight: &Tensor<Self>,
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_conv2d(x, weight, params)
    }

    fn conv2d_backward_input(
        &self,
        grad_out: &Tensor<Self>,
        weight: &Tensor<Self>,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_conv2d_backward_input(grad_out, weight, input_dims, params)
    }

    fn conv2d_backward_weight(
        &self,
        x: &Tensor<Self>,
        grad_out: &Tensor<Self>,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_conv2d_backward_weight(x, grad_out, weight_dims, params)
    }

    fn max_pool2d(
        &self,
        x: &Tensor<Self>,
        params: Pool2dParams,
    ) -> Result<(Tensor<Self>, Tensor<Self>)> {
        self.checked_max_pool2d(x, params)
    }

    fn max_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        window_argmax: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_max_pool2d_backward(grad_out, window_argmax, input_dims, params)
    }

    fn avg_pool2d(&self, x: &Tensor<Self>, params: Pool2dParams) -> Result<Tensor<Self>> {
        self.checked_avg_pool2d(x, params)
    }

    fn avg_pool2d_backward(
        &self,
        grad_out: &Tensor<Self>,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Tensor<Self>> {
        self.checked_avg_pool2d_backward(grad_out, input_dims, params)
    }

    fn scaled_dot_product_attention(
        &self,
        q: &Tensor<Self>,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        mask: Option<&Tensor<Self>>,
        params: &tessera_core::AttentionParams,
    ) -> Result<tessera_core::AttentionOutput<Self>> {
        self.checked_attention(q, k, v, mask, params)
    }

    fn scaled_dot_product_attention_backward(
        &self,
        grad_out: &Tensor<Self>,
        q: &Tensor<Self>,
        k: &Tensor<Self>,
        v: &Tensor<Self>,
        mask: Option<&Tensor<Self>>,
        forward: &tessera_core::AttentionOutput<Self>,
        params: &tessera_core::AttentionParams,
    ) -> Result<tessera_core::AttentionGrads<Self>> {
        self.checked_attention_backward(grad_out, q, k, v, mask, forward, params)
    }

    fn relu_backward(&self, x: &Tensor<Self>, grad: &Tensor<Self>) -> Result<Tensor<Self>> {
        self.checked_relu_backward(x, grad)
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
        self.checked_adam_update(param, grad, exp_avg, exp_avg_sq, max_exp_avg_sq, update)
    }
}
