//! Differential checks: a backend's override of a composite against the reference default of
//! `tessera_core::composite`, called directly with the same (random, often invalid) arguments.
//! Both must reject the same requests and agree on the values of the ones they accept. This
//! catches a fused kernel that returns `Ok` where the definition has no answer: the way the
//! CPU convolution's input gradient once read past the end of its weight (issue 11), which no
//! invariant of the result could have shown.

use super::kinds::*;
use super::math::bias_for;
use super::nn_ops::{conv_work, pool_work};
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome, Skip};
use tessera_core::backend::AdamUpdate;
use tessera_core::{composite, Conv2dParams, DType, Error, Pool2dParams, Tensor};

/// Whether an error depends on the resources rather than on the request (the two sides may
/// need different amounts of memory: the composites pad, the kernels do not).
fn resource_bound(e: &Error) -> bool {
    matches!(e, Error::OutOfMemory { .. } | Error::SizeOverflow { .. })
}

/// Compares the backend's answer with the composite's: both errors, or both values equal
/// within the dtype's tolerance.
fn agree<B: FuzzBackend>(
    what: &str,
    backend: tessera_core::Result<Tensor<B>>,
    reference: tessera_core::Result<Tensor<B>>,
) -> Outcome<B> {
    match (backend, reference) {
        (Err(e), _) | (_, Err(e)) if resource_bound(&e) => Outcome::Err(e.to_string()),
        (Err(e), Err(_)) => Outcome::Err(e.to_string()),
        (Ok(t), Err(e)) => Outcome::Break(format!(
            "{what}: the backend returned {} {} where the reference composite fails: {e}",
            t.dtype(),
            t.shape()
        )),
        (Err(e), Ok(t)) => Outcome::Break(format!(
            "{what}: the backend fails ({e}) where the reference composite returns {} {}",
            t.dtype(),
            t.shape()
        )),
        (Ok(a), Ok(b)) => match values_differ(what, &a, &b) {
            Ok(None) => Outcome::Ok(Vec::new()),
            Ok(Some(d)) => Outcome::Break(d),
            Err(e) => Outcome::Err(e.to_string()),
        },
    }
}

/// `Some(message)` when `got` and `want` differ in shape, dtype or (beyond the tolerance of
/// their dtype, relative to the largest magnitude) in value.
pub fn values_differ<B: FuzzBackend>(
    what: &str,
    got: &Tensor<B>,
    want: &Tensor<B>,
) -> tessera_core::Result<Option<String>> {
    if got.dims() != want.dims() || got.dtype() != want.dtype() {
        return Ok(Some(format!(
            "{what}: {} {} where the reference gives {} {}",
            got.dtype(),
            got.shape(),
            want.dtype(),
            want.shape()
        )));
    }
    if got.numel() > 1 << 16 {
        return Ok(None);
    }
    let (a, b) = (got.to_vec_f64()?, want.to_vec_f64()?);
    let tol = match got.dtype() {
        DType::F64 => 1e-9,
        DType::F32 => 1e-4,
        // The backend computes a 16-bit op in f32 and rounds once; the reference composite
        // rounds each of its intermediates to 16 bits: a few ulps (f16 2^-10, bf16 2^-7) apart.
        DType::F16 => 1e-2,
        DType::BF16 => 6e-2,
        _ => 0.0,
    };
    let scale = b
        .iter()
        .filter(|x| x.is_finite())
        .fold(1.0f64, |m, x| m.max(x.abs()));
    for (i, (x, y)) in a.iter().zip(&b).enumerate() {
        let same = (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= tol * scale;
        if !same {
            return Ok(Some(format!(
                "{what}: element {i} is {x}, the reference {y}"
            )));
        }
    }
    Ok(None)
}

/// Work of a differential step: its tensor arguments, plus what `dims` argument `i` asks for.
fn work_with_dims<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> Result<usize, crate::machine::Skip> {
    Ok(c.input_work()
        .saturating_mul(16)
        .saturating_add(super::alloc_work(super::numel(&c.dims(i))).saturating_mul(4)))
}

/// The three answers to one gradient request: through `Tensor` (validated first), through
/// the backend method directly, and through the reference composite directly. All must
/// reject the same requests and agree on the values of the others.
fn three_way<B: FuzzBackend>(
    what: &str,
    tensor: tessera_core::Result<Tensor<B>>,
    backend: tessera_core::Result<Tensor<B>>,
    reference: tessera_core::Result<Tensor<B>>,
    expected_dims: Option<&[usize]>,
) -> Outcome<B> {
    for r in [&tensor, &backend, &reference] {
        if let Err(e) = r {
            if resource_bound(e) {
                return Outcome::Err(e.to_string());
            }
        }
    }
    if let (Ok(t), Some(dims)) = (&tensor, expected_dims) {
        if t.dims() != dims {
            return Outcome::Break(format!(
                "{what}: Ok of shape {} for dims {dims:?}",
                t.shape()
            ));
        }
    }
    let tensor_error = tensor.err().map(|e| e.to_string());
    match (agree(what, backend, reference), tensor_error) {
        (Outcome::Ok(_), Some(e)) => Outcome::Break(format!(
            "{what}: Tensor rejects a request the backend and the composite accept: {e}"
        )),
        (Outcome::Err(e), None) => Outcome::Break(format!(
            "{what}: Tensor accepts a request the backend and the composite reject: {e}"
        )),
        (other, _) => other,
    }
}

/// The input and weight dims of `conv_gradients_near_valid` (small, from its first six sizes).
fn conv_case_dims<B: FuzzBackend>(c: &Ctx<'_, B>) -> ([usize; 4], [usize; 4]) {
    let small = |i: usize, max: usize| c.size(i) % (max + 1);
    let (n, ch, o) = (small(0, 2), small(1, 3).max(1), small(2, 3).max(1));
    let (h, w, k) = (small(3, 5) + 1, small(4, 5) + 1, small(5, 2) + 1);
    ([n, ch, h, w], [o, ch, k, k])
}

/// The input dims of `pool_gradients_near_valid` (small, from its first four sizes).
fn pool_case_dims<B: FuzzBackend>(c: &Ctx<'_, B>) -> [usize; 4] {
    let small = |i: usize, max: usize| c.size(i) % (max + 1);
    [
        small(0, 2),
        small(1, 2) + 1,
        small(2, 6) + 1,
        small(3, 6) + 1,
    ]
}

/// A valid convolution of fresh operands, then one perturbation of the arguments of its two
/// gradients (or none), each gradient asked three ways.
fn conv_gradients_near_valid<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let (x_dims, w_dims) = conv_case_dims(c);
    let (o, k) = (w_dims[0], w_dims[2]);
    let p = c.conv(6);
    let b = c.backend();
    let setup = || -> tessera_core::Result<(Tensor<B>, Tensor<B>, Tensor<B>)> {
        let x = Tensor::randn(x_dims, DType::F32, 1, b)?;
        let wt = Tensor::randn(w_dims, DType::F32, 2, b)?;
        let y = x.conv2d(&wt, None, p)?;
        Ok((x, wt, y))
    };
    let (x, wt, y) = match setup() {
        Ok(v) => v,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let mut input_dims = x.dims().to_vec();
    let mut weight_dims = wt.dims().to_vec();
    let (mut g, mut wt2, mut params) = (y.clone(), wt.clone(), p);
    let build = |dims: Vec<usize>| Tensor::randn(dims, DType::F32, 3, b);
    let perturbed = match c.size(7) % 9 {
        0 => Ok(()),
        1 => {
            input_dims[1] += 1; // more input channels than the weight has
            Ok(())
        }
        2 => build(vec![o, 0, k, k]).map(|e| wt2 = e), // an empty weight
        3 => {
            input_dims.pop(); // rank 3
            Ok(())
        }
        4 => {
            input_dims.push(1); // rank 5
            Ok(())
        }
        5 => {
            let mut d = y.dims().to_vec();
            d[2] += 1; // a grad_out no forward pass produces
            build(d).map(|t| g = t)
        }
        6 => {
            params = Conv2dParams {
                stride: (0, 1),
                ..p
            };
            Ok(())
        }
        7 => {
            weight_dims[1] += 1;
            Ok(())
        }
        _ => {
            params = Conv2dParams {
                dilation: (1, 0),
                ..p
            };
            Ok(())
        }
    };
    if let Err(e) = perturbed {
        return Outcome::Err(e.to_string());
    }
    let gx = three_way(
        "conv2d_backward_input",
        g.conv2d_backward_input(&wt2, &input_dims, params),
        b.conv2d_backward_input(&g, &wt2, &input_dims, params),
        composite::conv2d_backward_input(&g, &wt2, &input_dims, params),
        Some(&input_dims),
    );
    if !matches!(gx, Outcome::Ok(_) | Outcome::Err(_)) {
        return gx;
    }
    three_way(
        "conv2d_backward_weight",
        g.conv2d_backward_weight(&x, &weight_dims, params),
        b.conv2d_backward_weight(&x, &g, &weight_dims, params),
        composite::conv2d_backward_weight(&x, &g, &weight_dims, params),
        Some(&weight_dims),
    )
}

/// A valid max pooling of a fresh input, then one perturbation of the arguments of its
/// gradient (or none): window positions outside the window, another `grad_out` shape, input
/// dims of another rank or size, a stride of 0.
fn pool_gradients_near_valid<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let x_dims = pool_case_dims(c);
    let p = c.pool(4);
    let b = c.backend();
    let setup = || -> tessera_core::Result<(Tensor<B>, Tensor<B>, Tensor<B>)> {
        let x = Tensor::randn(x_dims, DType::F64, 4, b)?;
        let (y, at) = x.max_pool2d_with_indices(p)?;
        Ok((x, y, at))
    };
    let (x, y, at) = match setup() {
        Ok(v) => v,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let mut input_dims = x.dims().to_vec();
    let (mut g, mut positions, mut params) = (y.clone(), at.clone(), p);
    let taps = (p.kernel.0 * p.kernel.1) as i64;
    let perturbed = match c.size(5) % 7 {
        0 => Ok(()),
        1 | 2 => {
            // One position outside the window.
            let bad = if c.size(5) % 7 == 1 { taps } else { -1 };
            at.to_vec::<i64>().and_then(|mut v| {
                if let Some(first) = v.first_mut() {
                    *first = bad;
                }
                Tensor::from_vec(v, at.shape(), b).map(|t| positions = t)
            })
        }
        3 => {
            input_dims[2] = input_dims[2].saturating_add(p.stride.0.max(1)); // another output height
            Ok(())
        }
        4 => {
            input_dims.pop();
            Ok(())
        }
        5 => {
            params = Pool2dParams {
                stride: (p.stride.0, 0),
                ..p
            };
            Ok(())
        }
        _ => {
            let mut d = y.dims().to_vec();
            d[3] += 1;
            Tensor::randn(d, DType::F64, 5, b).map(|t| g = t)
        }
    };
    if let Err(e) = perturbed {
        return Outcome::Err(e.to_string());
    }
    let gm = three_way(
        "max_pool2d_backward",
        g.max_pool2d_backward(&positions, &input_dims, params),
        b.max_pool2d_backward(&g, &positions, &input_dims, params),
        composite::max_pool2d_backward(&g, &positions, &input_dims, params),
        Some(&input_dims),
    );
    if !matches!(gm, Outcome::Ok(_) | Outcome::Err(_)) {
        return gm;
    }
    three_way(
        "avg_pool2d_backward",
        g.avg_pool2d_backward(&input_dims, params),
        b.avg_pool2d_backward(&g, &input_dims, params),
        composite::avg_pool2d_backward(&g, &input_dims, params),
        Some(&input_dims),
    )
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "conv2d gradients near a valid call, three ways",
            6,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, SIZE, CONV, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| Ok(conv_gradients_near_valid(c)),
        )
        // The forward pass, then two gradients three ways each (the composites unfold the
        // padded input: a padding of 2^20 makes even these small operands a large request).
        .work(|c| {
            let (x, w) = conv_case_dims(c);
            Ok(conv_work(&x, &w, c.conv(6)).saturating_mul(8).max(1 << 16))
        }),
        op(
            "pooling gradients near a valid call, three ways",
            6,
            &[SIZE, SIZE, SIZE, SIZE, POOL, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| Ok(pool_gradients_near_valid(c)),
        )
        // The forward pass, then two gradients three ways each.
        .work(|c| {
            Ok(pool_work(&pool_case_dims(c), c.pool(4))
                .saturating_mul(8)
                .max(1 << 16))
        }),
        op(
            "backend vs composite: conv2d_backward_input",
            4,
            &[T, T, DIMS, CONV],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (g, w, dims, p) = (c.t(0)?, c.t(1)?, c.dims(2), c.conv(3));
                let ours = c.backend().conv2d_backward_input(&g, &w, &dims, p);
                let reference = composite::conv2d_backward_input(&g, &w, &dims, p);
                Ok(agree("conv2d_backward_input", ours, reference))
            },
        )
        .work(|c| work_with_dims(c, 2)),
        op(
            "backend vs composite: conv2d_backward_weight",
            4,
            &[T, T, DIMS, CONV],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, g, dims, p) = (c.t(0)?, c.t(1)?, c.dims(2), c.conv(3));
                let ours = c.backend().conv2d_backward_weight(&x, &g, &dims, p);
                let reference = composite::conv2d_backward_weight(&x, &g, &dims, p);
                Ok(agree("conv2d_backward_weight", ours, reference))
            },
        )
        .work(|c| work_with_dims(c, 2)),
        op(
            "backend vs composite: conv2d",
            3,
            &[T, T, CONV],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, w, p) = (c.t(0)?, c.t(1)?, c.conv(2));
                let ours = c.backend().conv2d(&x, &w, p);
                let reference = composite::conv2d(&x, &w, p);
                Ok(agree("conv2d", ours, reference))
            },
        )
        .work(|c| Ok(c.input_work().saturating_mul(64))),
        op(
            "backend vs composite: max_pool2d",
            3,
            &[T, POOL],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, p) = (c.t(0)?, c.pool(1));
                let ours = c.backend().max_pool2d(&x, p);
                let reference = composite::max_pool2d(&x, p);
                Ok(match (ours, reference) {
                    (Ok((v, i)), Ok((rv, ri))) => match agree("max_pool2d", Ok(v), Ok(rv)) {
                        Outcome::Ok(_) => agree("max_pool2d positions", Ok(i), Ok(ri)),
                        other => other,
                    },
                    (a, b) => agree("max_pool2d", a.map(|p| p.0), b.map(|p| p.0)),
                })
            },
        )
        .work(|c| Ok(c.input_work().saturating_mul(16))),
        op(
            "backend vs composite: max_pool2d_backward",
            3,
            &[T, T, DIMS, POOL],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (g, at, dims, p) = (c.t(0)?, c.t(1)?, c.dims(2), c.pool(3));
                let ours = c.backend().max_pool2d_backward(&g, &at, &dims, p);
                let reference = composite::max_pool2d_backward(&g, &at, &dims, p);
                Ok(agree("max_pool2d_backward", ours, reference))
            },
        )
        .work(|c| work_with_dims(c, 2)),
        op(
            "backend vs composite: avg_pool2d(_backward)",
            3,
            &[T, DIMS, POOL, B],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, dims, p) = (c.t(0)?, c.dims(1), c.pool(2));
                Ok(if c.flag(3) {
                    let ours = c.backend().avg_pool2d(&x, p);
                    agree("avg_pool2d", ours, composite::avg_pool2d(&x, p))
                } else {
                    let ours = c.backend().avg_pool2d_backward(&x, &dims, p);
                    let reference = composite::avg_pool2d_backward(&x, &dims, p);
                    agree("avg_pool2d_backward", ours, reference)
                })
            },
        )
        .work(|c| work_with_dims(c, 1)),
        op(
            "backend vs composite: softmax family",
            3,
            &[T, SIZE, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, axis) = (c.t(0)?, c.size(1));
                let b = c.backend();
                Ok(match c.size(2) % 3 {
                    0 => agree("softmax", b.softmax(&x, axis), composite::softmax(&x, axis)),
                    1 => agree(
                        "log_softmax",
                        b.log_softmax(&x, axis),
                        composite::log_softmax(&x, axis),
                    ),
                    _ => agree(
                        "logsumexp",
                        b.logsumexp(&x, axis),
                        composite::logsumexp(&x, axis),
                    ),
                })
            },
        ),
        op(
            "backend vs composite: relu_backward",
            2,
            &[T, T],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, g) = (c.t(0)?, c.t(1)?);
                // Through the dispatch, as autograd calls it (the 16-bit rule lives there).
                let ours = tessera_core::dispatch::relu_backward(&x, &g);
                Ok(agree(
                    "relu_backward",
                    ours,
                    composite::relu_backward(&x, &g),
                ))
            },
        ),
        op(
            "backend vs composite: matmul_bias",
            2,
            &[T, T, T, B],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (a, b) = (c.t(0)?, c.t(1)?);
                // With the flag, a bias of the right length (the sum of rhs's rows), else any.
                let bias = if c.flag(3) { bias_for(&b) } else { Ok(c.t(2)?) };
                let Ok(bias) = bias else {
                    return Ok(Outcome::Err("no row sums for a bias".into()));
                };
                // Through the dispatch, as autograd calls it (which runs the composite itself
                // for a 16-bit dtype the backend does not declare).
                let ours = tessera_core::dispatch::matmul_bias(&a, &b, &bias);
                let reference = composite::matmul_bias(&a, &b, &bias);
                Ok(agree("matmul_bias", ours, reference))
            },
        )
        .work(|c| {
            let (a, b) = (c.t(0)?, c.t(1)?);
            Ok(crate::ops::math::product_work(a.dims(), b.dims())
                .saturating_add(a.numel() + b.numel()))
        }),
        op(
            "backend vs composite: cross_entropy",
            2,
            &[T, T, B, B],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, targets) = (c.t(0)?, cross_entropy_targets(c)?);
                let smoothing = if c.flag(3) { 0.1 } else { 0.0 };
                // Through the dispatch, as autograd calls it; the reference in f32 for 16-bit
                // logits, as the dispatch widens them.
                let ours = tessera_core::dispatch::cross_entropy(&x, &targets, smoothing);
                let reference = composite::in_f32([Some(&x), Some(&targets)], |[x, t]| {
                    composite::cross_entropy(x.unwrap(), t.unwrap(), smoothing)
                })
                .unwrap_or_else(|| composite::cross_entropy(&x, &targets, smoothing));
                Ok(agree("cross_entropy", ours, reference))
            },
        ),
        op(
            "backend vs composite: cross_entropy_backward",
            2,
            &[T, T, B, B, T, B],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, targets) = (c.t(0)?, cross_entropy_targets(c)?);
                let smoothing = if c.flag(3) { 0.1 } else { 0.0 };
                // The upstream gradient: the rows' sums (one per row, the logits' dtype) or
                // any tensor.
                let grad = if c.flag(5) {
                    x.sum(&[1], false)
                } else {
                    Ok(c.t(4)?)
                };
                let Ok(grad) = grad else {
                    return Ok(Outcome::Err("no row sums for a gradient".into()));
                };
                let ours =
                    tessera_core::dispatch::cross_entropy_backward(&x, &targets, &grad, smoothing);
                let inputs = [Some(&x), Some(&targets), Some(&grad)];
                let reference = composite::in_f32(inputs, |[x, t, g]| {
                    let (x, t, g) = (x.unwrap(), t.unwrap(), g.unwrap());
                    composite::cross_entropy_backward(x, t, g, smoothing)
                })
                .unwrap_or_else(|| {
                    composite::cross_entropy_backward(&x, &targets, &grad, smoothing)
                });
                Ok(agree("cross_entropy_backward", ours, reference))
            },
        ),
        op(
            "backend vs composite: gelu_backward",
            2,
            &[T, T],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, g) = (c.t(0)?, c.t(1)?);
                // Through the dispatch, as autograd calls it (the 16-bit rule lives there).
                let ours = tessera_core::dispatch::gelu_backward(&x, &g);
                let reference = composite::in_f32([Some(&x), Some(&g)], |[x, g]| {
                    composite::gelu_backward(x.unwrap(), g.unwrap())
                })
                .unwrap_or_else(|| composite::gelu_backward(&x, &g));
                Ok(agree("gelu_backward", ours, reference))
            },
        ),
        op(
            "backend vs composite: adam_update",
            2,
            &[T, T, T, T, B, F],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (p, g, m, v) = (c.t(0)?, c.t(1)?, c.t(2)?, c.t(3)?);
                let u = AdamUpdate {
                    beta1: 0.9,
                    beta2: 0.999,
                    step_size: c.float(5),
                    bias_correction2_sqrt: 0.5,
                    eps: 1e-8,
                    coupled_decay: 0.01,
                    decoupled_factor: 0.99,
                };
                let max = c.flag(4).then(|| v.clone());
                // Through the dispatch, as the optimizer calls it (the 16-bit rule lives there).
                let ours = tessera_core::dispatch::adam_update(&p, &g, (&m, &v), max.as_ref(), u);
                // 16-bit operands: the reference is the composite in f32, rounded once (the
                // backends' contract for the 16-bit floats); Adam's g * g overflows in f16.
                let inputs = [Some(&p), Some(&g), Some(&m), Some(&v), max.as_ref()];
                let reference = composite::in_f32(inputs, |[p, g, m, v, max]| {
                    let (p, g, m, v) = (p.unwrap(), g.unwrap(), m.unwrap(), v.unwrap());
                    composite::adam_update(p, g, m, v, max, u)
                })
                .unwrap_or_else(|| composite::adam_update(&p, &g, &m, &v, max.as_ref(), u));
                Ok(agree(
                    "adam_update",
                    ours.map(|o| o.param),
                    reference.map(|o| o.param),
                ))
            },
        ),
        op(
            "backend vs composite: concat",
            2,
            &[T, T, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (a, b, axis) = (c.t(0)?, c.t(1)?, c.size(2));
                let ours = c.backend().concat(&[&a, &b], axis);
                Ok(agree("concat", ours, composite::concat(&[&a, &b], axis)))
            },
        ),
    ]
}

/// Targets for the cross-entropy ops: with flag 2 each row's largest logit (valid classes
/// whenever the logits are `[n, c]` with `c > 0`), else argument 1 as it is.
fn cross_entropy_targets<B: FuzzBackend>(c: &mut Ctx<'_, B>) -> Result<Tensor<B>, Skip> {
    let x = c.t(0)?;
    if c.flag(2) {
        if let Ok(t) = x.argmax(1, false) {
            return Ok(t);
        }
    }
    c.t(1)
}
