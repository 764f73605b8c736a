//! Max and average pooling (with padding) and their gradients.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close, assert_close_scaled, Tolerance};
use crate::reference::pool;
use crate::runner::check_property;
use crate::strategies::{special_rate, tensor_case, tensor_case_from, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, DType, Pool2dParams};

/// Which pooling piece.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PoolOp {
    /// `x.max_pool2d_with_indices(params)`: values and window positions.
    Max,
    /// `x.avg_pool2d(params)`.
    Avg,
    /// `grad_out.max_pool2d_backward(window_argmax, input_dims, params)`.
    MaxBackward,
    /// `grad_out.avg_pool2d_backward(input_dims, params)`.
    AvgBackward,
}

/// One pooling piece.
#[derive(Clone, Debug)]
pub struct PoolCase {
    /// The piece.
    pub op: PoolOp,
    /// Window, stride, padding.
    pub params: Pool2dParams,
    /// Input dims `[n, c, h, w]`.
    pub input_dims: Vec<usize>,
    /// The input (forward) or `grad_out` (backward).
    pub input: TensorCase,
    /// Window positions for `MaxBackward`, each in `0..kh * kw`.
    pub window_argmax: Option<TensorCase>,
}

/// `(input dims, params)`: windows `1..=3`, stride `1..=3`, padding at most half the window,
/// spatial sizes that fit plus `0..=3`, `n` and `c` in `0..=2`.
pub fn geometry() -> BoxedStrategy<(Vec<usize>, Pool2dParams)> {
    (
        (0usize..=2, 0usize..=2),
        (1usize..=3, 1usize..=3),
        (1usize..=3, 1usize..=3),
        (0usize..=3, 0usize..=3),
    )
        .prop_flat_map(|(nc, kernel, stride, extra)| {
            (
                Just((nc, kernel, stride, extra)),
                0..=kernel.0 / 2,
                0..=kernel.1 / 2,
            )
        })
        .prop_map(|(((n, c), kernel, stride, (eh, ew)), ph, pw)| {
            let h = kernel.0.saturating_sub(2 * ph) + eh;
            let w = kernel.1.saturating_sub(2 * pw) + ew;
            let params = Pool2dParams {
                kernel,
                stride,
                padding: (ph, pw),
            };
            (vec![n, c, h, w], params)
        })
        .boxed()
}

/// Cases of `op` on `dtype`.
pub fn cases(op: PoolOp, dtype: DType) -> BoxedStrategy<PoolCase> {
    (geometry(), special_rate())
        .prop_flat_map(move |((dims, params), special)| {
            let profile = ValueProfile::DEFAULT.with_specials(special);
            let [oh, ow] = pool::pool_out_hw(&dims, params);
            let out_dims = vec![dims[0], dims[1], oh, ow];
            let input_shape = match op {
                PoolOp::Max | PoolOp::Avg => dims.clone(),
                PoolOp::MaxBackward | PoolOp::AvgBackward => out_dims.clone(),
            };
            let taps = params.kernel.0 * params.kernel.1;
            let argmax = if op == PoolOp::MaxBackward {
                tensor_case_from(
                    DType::I64,
                    out_dims,
                    (0..taps).prop_map(|t| t as f64).boxed(),
                )
                .prop_map(Some)
                .boxed()
            } else {
                Just(None).boxed()
            };
            (
                Just(dims),
                Just(params),
                tensor_case(dtype, input_shape, profile),
                argmax,
            )
        })
        .prop_map(move |(input_dims, params, input, window_argmax)| PoolCase {
            op,
            params,
            input_dims,
            input,
            window_argmax,
        })
        .boxed()
}

/// Compares the piece with the reference loops.
pub fn check<B: Backend>(dev: &B, case: &PoolCase) -> Result<(), String> {
    let dtype = case.input.dtype;
    let p = case.params;
    let t = build(dev, &case.input, "input")?;
    let rt = case.input.reference();
    let taps = p.kernel.0 * p.kernel.1;
    match case.op {
        PoolOp::Max => {
            let (values, idx) = t
                .max_pool2d_with_indices(p)
                .map_err(op_failed("max_pool2d", &[&t]))?;
            let (ev, ei) = pool::max_pool2d(&rt, p);
            // The maxima are inputs (exact, sign of zero unspecified); the positions are exact.
            assert_close(&values, dtype, &ev, Tolerance::loose(0.0, 0.0))
                .and_then(|_| assert_close(&idx, DType::I64, &ei, Tolerance::EXACT))
                .map_err(with_inputs(&[&t]))
        }
        PoolOp::Avg => {
            let got = t.avg_pool2d(p).map_err(op_failed("avg_pool2d", &[&t]))?;
            let expected = pool::avg_pool2d(dtype, &rt, p);
            let magnitude = pool::avg_pool2d(DType::F64, &rt.abs(), p);
            assert_close_scaled(
                &got,
                dtype,
                &expected,
                &magnitude,
                Tolerance::accumulation(dtype, taps),
            )
            .map_err(with_inputs(&[&t]))
        }
        PoolOp::MaxBackward => {
            let ac = case
                .window_argmax
                .as_ref()
                .expect("max backward case has window_argmax");
            let a = build(dev, ac, "window_argmax")?;
            let got = t
                .max_pool2d_backward(&a, &case.input_dims, p)
                .map_err(op_failed("max_pool2d_backward", &[&t, &a]))?;
            let ra = ac.reference();
            let expected = pool::max_pool2d_backward(dtype, &rt, &ra, &case.input_dims, p);
            let magnitude =
                pool::max_pool2d_backward(DType::F64, &rt.abs(), &ra, &case.input_dims, p);
            assert_close_scaled(
                &got,
                dtype,
                &expected,
                &magnitude,
                Tolerance::accumulation(dtype, taps),
            )
            .map_err(with_inputs(&[&t, &a]))
        }
        PoolOp::AvgBackward => {
            let got = t
                .avg_pool2d_backward(&case.input_dims, p)
                .map_err(op_failed("avg_pool2d_backward", &[&t]))?;
            let expected = pool::avg_pool2d_backward(dtype, &rt, &case.input_dims, p);
            let magnitude = pool::avg_pool2d_backward(DType::F64, &rt.abs(), &case.input_dims, p);
            assert_close_scaled(
                &got,
                dtype,
                &expected,
                &magnitude,
                Tolerance::accumulation(dtype, taps),
            )
            .map_err(with_inputs(&[&t]))
        }
    }
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: PoolOp, dtype: DType) {
    check_property(&format!("{op:?} {dtype}"), cases(op, dtype), |c| {
        check(dev, c)
    });
}
