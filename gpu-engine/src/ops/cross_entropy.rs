//! Softmax cross-entropy and its gradient in one kernel each (`softmax.cl.c`'s
//! `cross_entropy_rows` and `cross_entropy_grad_rows`, one work-group per row), instead of the
//! composite's log-softmax, gather, one-hot scatter and element-wise passes over the logits'
//! size. The operands are read through their strides (no copies); f32 and f64 only (16-bit
//! logits arrive widened by tensor-core's dispatch), anything else is left to the composite.

use super::operands::scalar;
use crate::driver::{Driver, ModuleKey};
use crate::gpu::Gpu;
use crate::runtime::Arg;
use crate::view::View;
use tessera_core::cross_entropy::{check_cross_entropy, check_cross_entropy_backward};
use tessera_core::{DType, Layout, Result, Tensor};

/// The kernels' leading arguments: the sizes, the `[n, c]` logits as rows (the view of each
/// row's start and the stride between a row's elements) and the targets.
fn row_args<'a, D: Driver>(
    (n, c): (usize, usize),
    logits: &'a Tensor<Gpu<D>>,
    targets: &'a Tensor<Gpu<D>>,
) -> Vec<Arg<'a, D>> {
    let (dims, strides) = (logits.dims(), logits.layout().strides());
    let outer = View::new(&dims[..1], &strides[..1], logits.layout().offset());
    vec![
        Arg::I64(n as i64),
        Arg::I64(c as i64),
        Arg::Buffer(logits.storage()),
        Arg::View(outer),
        Arg::I64(strides[1] as i64),
        Arg::Buffer(targets.storage()),
        Arg::View(view_of(targets)),
    ]
}

/// A rank-1 operand (`[n]`) as a view.
fn view_of<D: Driver>(t: &Tensor<Gpu<D>>) -> View {
    let layout = t.layout();
    View::new(layout.dims(), layout.strides(), layout.offset())
}

/// `(1 - s, s / c)` as kernel arguments of `dtype`.
fn coefficients<'a, D: Driver>(dtype: DType, c: usize, s: f64) -> [Arg<'a, D>; 2] {
    [scalar(dtype, 1.0 - s), scalar(dtype, s / c.max(1) as f64)]
}

/// Queues `kernel` with one work-group per row of `n`.
fn launch_rows<D: Driver>(
    gpu: &Gpu<D>,
    dtype: DType,
    kernel: &'static str,
    args: &[Arg<'_, D>],
    n: usize,
) -> Result<()> {
    let rt = gpu.runtime();
    let group = rt.info().reduce_group as usize;
    rt.launch(
        &ModuleKey::tensor(dtype),
        kernel,
        args,
        [n, 1, 1],
        [group, 1, 1],
    )
}

/// The per-row losses on the device, or None when the composite must run.
pub(crate) fn cross_entropy<D: Driver>(
    gpu: &Gpu<D>,
    logits: &Tensor<Gpu<D>>,
    targets: &Tensor<Gpu<D>>,
    label_smoothing: f64,
) -> Result<Option<Tensor<Gpu<D>>>> {
    let (n, c) = check_cross_entropy(logits, targets, label_smoothing)?;
    let dtype = logits.dtype();
    if !matches!(dtype, DType::F32 | DType::F64) || n == 0 || c == 0 {
        return Ok(None);
    }
    let rt = gpu.runtime();
    let out = rt.alloc(dtype, n)?;
    let [keep, spread] = coefficients(dtype, c, label_smoothing);
    let mut args = row_args((n, c), logits, targets);
    args.extend([keep, spread, Arg::Buffer(&out), Arg::ErrorFlag]);
    launch_rows(gpu, dtype, "cross_entropy_rows", &args, n)?;
    Tensor::from_parts(gpu, out, Layout::contiguous([n])).map(Some)
}

/// The gradient `[n, c]` on the device, or None when the composite must run.
pub(crate) fn cross_entropy_backward<D: Driver>(
    gpu: &Gpu<D>,
    logits: &Tensor<Gpu<D>>,
    targets: &Tensor<Gpu<D>>,
    grad: &Tensor<Gpu<D>>,
    label_smoothing: f64,
) -> Result<Option<Tensor<Gpu<D>>>> {
    let (n, c) = check_cross_entropy_backward(logits, targets, grad, label_smoothing)?;
    let dtype = logits.dtype();
    if !matches!(dtype, DType::F32 | DType::F64) || n == 0 || c == 0 {
        return Ok(None);
    }
    let rt = gpu.runtime();
    let out = rt.alloc(dtype, n * c)?;
    let [keep, spread] = coefficients(dtype, c, label_smoothing);
    let mut args = row_args((n, c), logits, targets);
    args.extend([
        Arg::Buffer(grad.storage()),
        Arg::View(view_of(grad)),
        keep,
        spread,
        Arg::Buffer(&out),
        Arg::ErrorFlag,
    ]);
    launch_rows(gpu, dtype, "cross_entropy_grad_rows", &args, n)?;
    Tensor::from_parts(gpu, out, Layout::contiguous([n, c])).map(Some)
}
