//! conv2d (stride, padding, dilation, optional bias) and its input and weight gradients.

use super::{build, op_failed, with_inputs};
use crate::compare::{assert_close_scaled, Tolerance};
use crate::reference::{conv, elementwise, views, RefArray};
use crate::runner::check_property;
use crate::strategies::{special_rate, tensor_case, TensorCase, ValueProfile};
use proptest::prelude::*;
use tessera_core::{Backend, BinaryOp, Conv2dParams, DType};

/// Which piece of the convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConvOp {
    /// `x.conv2d(weight, bias, params)`.
    Forward,
    /// `grad_out.conv2d_backward_input(weight, input_dims, params)`.
    BackwardInput,
    /// `grad_out.conv2d_backward_weight(x, weight_dims, params)`.
    BackwardWeight,
}

/// One convolution piece.
#[derive(Clone, Debug)]
pub struct ConvCase {
    /// The piece.
    pub op: ConvOp,
    /// Stride, padding and dilation.
    pub params: Conv2dParams,
    /// `[n, c, h, w]`.
    pub x: TensorCase,
    /// `[o, c, kh, kw]`.
    pub weight: TensorCase,
    /// `[o]`, forward only.
    pub bias: Option<TensorCase>,
    /// `[n, o, oh, ow]`, backward only.
    pub grad_out: Option<TensorCase>,
}

/// `(x dims, weight dims, params)` that fit: `n, c, o` in `0..=2|3`, kernels `1..=3`, stride
/// `1..=2`, padding `0..=2`, dilation `1..=2`, spatial sizes just large enough plus `0..=3`.
pub fn geometry() -> BoxedStrategy<([usize; 4], [usize; 4], Conv2dParams)> {
    (
        (0usize..=2, 0usize..=3, 0usize..=3),
        (1usize..=3, 1usize..=3),
        (1usize..=2, 1usize..=2),
        (0usize..=2, 0usize..=2),
        (1usize..=2, 1usize..=2),
        (0usize..=3, 0usize..=3),
    )
        .prop_map(
            |((n, c, o), (kh, kw), stride, padding, dilation, (eh, ew))| {
                let span = |k: usize, d: usize| d * (k - 1) + 1;
                let h = span(kh, dilation.0).saturating_sub(2 * padding.0) + eh;
                let w = span(kw, dilation.1).saturating_sub(2 * padding.1) + ew;
                let params = Conv2dParams {
                    stride,
                    padding,
                    dilation,
                };
                ([n, c, h, w], [o, c, kh, kw], params)
            },
        )
        .boxed()
}

/// Cases of `op` on `dtype`.
pub fn cases(op: ConvOp, dtype: DType) -> BoxedStrategy<ConvCase> {
    (geometry(), special_rate(), any::<bool>())
        .prop_flat_map(move |((xd, wd, params), special, with_bias)| {
            let profile = ValueProfile::DEFAULT.with_specials(special / 3);
            let [oh, ow] = conv::conv_out_hw(&xd, &wd, params);
            let bias = if op == ConvOp::Forward && with_bias {
                tensor_case(dtype, vec![wd[0]], profile)
                    .prop_map(Some)
                    .boxed()
            } else {
                Just(None).boxed()
            };
            let grad = if op == ConvOp::Forward {
                Just(None).boxed()
            } else {
                tensor_case(dtype, vec![xd[0], wd[0], oh, ow], profile)
                    .prop_map(Some)
                    .boxed()
            };
            (
                Just(params),
                tensor_case(dtype, xd.to_vec(), profile),
                tensor_case(dtype, wd.to_vec(), profile),
                bias,
                grad,
            )
        })
        .prop_map(move |(params, x, weight, bias, grad_out)| ConvCase {
            op,
            params,
            x,
            weight,
            bias,
            grad_out,
        })
        .boxed()
}

/// Adds `bias[o]` to every `[n, o, .., ..]` element.
fn add_bias(dtype: DType, y: &RefArray, bias: &RefArray) -> RefArray {
    let b = views::reshape(bias, &[1, bias.numel(), 1, 1]);
    elementwise::binary(BinaryOp::Add, dtype, y, &b)
}

/// Compares the piece with the direct loops; the error scale is the same loops on absolute
/// values.
pub fn check<B: Backend>(dev: &B, case: &ConvCase) -> Result<(), String> {
    let dtype = case.x.dtype;
    let p = case.params;
    let x = build(dev, &case.x, "x")?;
    let w = build(dev, &case.weight, "weight")?;
    let (rx, rw) = (case.x.reference(), case.weight.reference());
    let (xd, wd) = (rx.shape.clone(), rw.shape.clone());
    match case.op {
        ConvOp::Forward => {
            let b = case
                .bias
                .as_ref()
                .map(|b| build(dev, b, "bias"))
                .transpose()?;
            let got = x
                .conv2d(&w, b.as_ref(), p)
                .map_err(op_failed("conv2d", &[&x, &w]))?;
            let mut expected = conv::conv2d(DType::F64, &rx, &rw, p);
            let mut magnitude = conv::conv2d(DType::F64, &rx.abs(), &rw.abs(), p);
            if let Some(bc) = &case.bias {
                let rb = bc.reference();
                expected = add_bias(DType::F64, &expected, &rb);
                magnitude = add_bias(DType::F64, &magnitude, &rb.abs());
            }
            let expected = expected.map(|v| elementwise::round_to(dtype, v));
            let tol = Tolerance::accumulation(dtype, 1 + wd[1] * wd[2] * wd[3]);
            assert_close_scaled(&got, dtype, &expected, &magnitude, tol)
                .map_err(with_inputs(&[&x, &w]))
        }
        ConvOp::BackwardInput => {
            let gc = case.grad_out.as_ref().expect("backward case has grad_out");
            let g = build(dev, gc, "grad_out")?;
            let got = g
                .conv2d_backward_input(&w, &xd, p)
                .map_err(op_failed("conv2d_backward_input", &[&g, &w]))?;
            let rg = gc.reference();
            let expected = conv::conv2d_backward_input(dtype, &rg, &rw, &xd, p);
            let magnitude = conv::conv2d_backward_input(DType::F64, &rg.abs(), &rw.abs(), &xd, p);
            let tol = Tolerance::accumulation(dtype, wd[0] * wd[2] * wd[3]);
            assert_close_scaled(&got, dtype, &expected, &magnitude, tol)
                .map_err(with_inputs(&[&g, &w]))
        }
        ConvOp::BackwardWeight => {
            let gc = case.grad_out.as_ref().expect("backward case has grad_out");
            let g = build(dev, gc, "grad_out")?;
            let got = g
                .conv2d_backward_weight(&x, &wd, p)
                .map_err(op_failed("conv2d_backward_weight", &[&g, &x]))?;
            let rg = gc.reference();
            let expected = conv::conv2d_backward_weight(dtype, &rx, &rg, &wd, p);
            let magnitude = conv::conv2d_backward_weight(DType::F64, &rx.abs(), &rg.abs(), &wd, p);
            let terms = rg.shape[0] * rg.shape[2] * rg.shape[3];
            let tol = Tolerance::accumulation(dtype, terms);
            assert_close_scaled(&got, dtype, &expected, &magnitude, tol)
                .map_err(with_inputs(&[&g, &x]))
        }
    }
}

/// Checks `op` on `dtype` over 256 random cases.
pub fn run<B: Backend>(dev: &B, op: ConvOp, dtype: DType) {
    check_property(&format!("{op:?} {dtype}"), cases(op, dtype), |c| {
        check(dev, c)
    });
}
