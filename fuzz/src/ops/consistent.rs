//! Operations that build their own consistent operands (sizes drawn small, often 0 or 1, so
//! the edge cases are still there) so that the `Ok` paths of convolution, pooling, layers,
//! losses and optimizers run often, and check their results strictly: documented shapes,
//! gradients of the shapes of what they differentiate, and the backend's (possibly fused)
//! kernels against the reference composites of `tessera_core::composite`.

use super::differential::values_differ as differs;
use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Layer, Outcome};
use tessera_autograd::Var;
use tessera_core::tensor::{conv_output_dims, pool_output_dims};
use tessera_core::{composite, DType, Generator, Result, Tensor};
use tessera_nn::layers::{Conv2dConfig, LinearConfig};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{Adam, AdamConfig, Optimizer, Sgd, SgdConfig};
use tessera_nn::{Forward, Module};

/// A float dtype from argument `i` (f32 unless it says f64).
fn float_dtype<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> DType {
    if c.dtype(i) == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// Size argument `i` reduced to `0..=max`.
fn small<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize, max: usize) -> usize {
    c.size(i) % (max + 1)
}

/// A break when `check` found a difference, else success; errors stay errors.
fn verdict<B: FuzzBackend>(check: Result<Option<String>>) -> Outcome<B> {
    match check {
        Ok(None) => Outcome::Ok(Vec::new()),
        Ok(Some(e)) => Outcome::Break(e),
        Err(e) => Outcome::Err(e.to_string()),
    }
}

/// Convolution of fresh operands against the composite, and both gradients.
fn conv_checked<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Option<String>> {
    let dtype = float_dtype(c, 7);
    let (n, ch, o) = (small(c, 0, 2), small(c, 1, 3).max(1), small(c, 2, 3).max(1));
    let (h, w) = (small(c, 3, 6), small(c, 4, 6));
    let k = small(c, 5, 3).max(1);
    let p = c.conv(6);
    let b = c.backend();
    let x = Tensor::randn([n, ch, h, w], dtype, c.size(0) as u64, b)?;
    let wt = Tensor::randn([o, ch, k, k], dtype, c.size(1) as u64, b)?;
    let y = x.conv2d(&wt, None, p)?;
    let dims = conv_output_dims(x.dims(), wt.dims(), p)?;
    if y.dims() != dims {
        return Ok(Some(format!("conv2d gave {} for {dims:?}", y.shape())));
    }
    if let Some(d) = differs("conv2d", &y, &composite::conv2d(&x, &wt, p)?)? {
        return Ok(Some(d));
    }
    let g = Tensor::randn(y.shape(), dtype, 3, b)?;
    let gx = g.conv2d_backward_input(&wt, x.dims(), p)?;
    let gx_ref = composite::conv2d_backward_input(&g, &wt, x.dims(), p)?;
    if let Some(d) = differs("conv2d_backward_input", &gx, &gx_ref)? {
        return Ok(Some(d));
    }
    let gw = g.conv2d_backward_weight(&x, wt.dims(), p)?;
    let gw_ref = composite::conv2d_backward_weight(&x, &g, wt.dims(), p)?;
    differs("conv2d_backward_weight", &gw, &gw_ref)
}

/// The work of [`conv_checked`]: the composite convolution and its gradients build a matrix of
/// every output position times every kernel tap (`ch · k · k`), several times. Paddings of
/// 2^20 make that matrix millions of rows long for a tiny input: a slow answer to an expensive
/// request, which the work budget skips (the example backend took 40 s on one).
fn conv_work<B: FuzzBackend>(c: &Ctx<'_, B>) -> std::result::Result<usize, crate::machine::Skip> {
    let (n, ch, o) = (small(c, 0, 2), small(c, 1, 3).max(1), small(c, 2, 3).max(1));
    let (h, w) = (small(c, 3, 6), small(c, 4, 6));
    let k = small(c, 5, 3).max(1);
    let Ok(out) = conv_output_dims(&[n, ch, h, w], &[o, ch, k, k], c.conv(6)) else {
        return Ok(1 << 10);
    };
    let positions = out[0].saturating_mul(out[2]).saturating_mul(out[3]);
    Ok(positions
        .saturating_mul(ch * k * k + o)
        .saturating_mul(8)
        .max(1 << 16))
}

/// Max and average pooling of a fresh input against the composites, and their gradients.
fn pool_checked<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<Option<String>> {
    let dtype = float_dtype(c, 5);
    let (n, ch, h, w) = (
        small(c, 0, 2),
        small(c, 1, 3),
        small(c, 2, 7),
        small(c, 3, 7),
    );
    let p = c.pool(4);
    let b = c.backend();
    let x = Tensor::randn([n, ch, h, w], dtype, c.size(2) as u64, b)?;
    let (y, at) = x.max_pool2d_with_indices(p)?;
    let dims = pool_output_dims("check", x.dims(), p)?;
    if y.dims() != dims || at.dims() != dims || at.dtype() != DType::I64 {
        return Ok(Some(format!(
            "max_pool2d gave {} and {}",
            y.shape(),
            at.shape()
        )));
    }
    let (y_ref, at_ref) = composite::max_pool2d(&x, p)?;
    if let Some(d) = differs("max_pool2d", &y, &y_ref)? {
        return Ok(Some(d));
    }
    if let Some(d) = differs("max_pool2d positions", &at, &at_ref)? {
        return Ok(Some(d));
    }
    let g = Tensor::randn(y.shape(), dtype, 5, b)?;
    let gx = g.max_pool2d_backward(&at, x.dims(), p)?;
    let gx_ref = composite::max_pool2d_backward(&g, &at, x.dims(), p)?;
    if let Some(d) = differs("max_pool2d_backward", &gx, &gx_ref)? {
        return Ok(Some(d));
    }
    let a = x.avg_pool2d(p)?;
    if let Some(d) = differs("avg_pool2d", &a, &composite::avg_pool2d(&x, p)?)? {
        return Ok(Some(d));
    }
    let ga = g.avg_pool2d_backward(x.dims(), p)?;
    let ga_ref = composite::avg_pool2d_backward(&g, x.dims(), p)?;
    differs("avg_pool2d_backward", &ga, &ga_ref)
}

/// A training step of `layer` on `x`: forward, a scalar loss, backward, an optimizer step;
/// the gradients must have the shapes of their parameters, and the step must keep them.
fn train_step<B: FuzzBackend>(
    layer: &dyn Forward<B>,
    x: &Var<B>,
    optimizer: &mut dyn Optimizer<B>,
) -> Result<Option<String>> {
    let y = layer.forward(x)?;
    y.square()?.mean_all()?.backward()?;
    let before: Vec<(String, Vec<usize>)> = layer
        .parameters()
        .iter()
        .map(|(n, v)| (n.clone(), v.dims().to_vec()))
        .collect();
    for (name, v) in layer.parameters() {
        if let Some(g) = v.grad() {
            if g.dims() != v.dims() {
                return Ok(Some(format!(
                    "gradient of {name} is {} for {}",
                    g.shape(),
                    v.shape()
                )));
            }
        }
    }
    optimizer.step()?;
    for ((name, dims), (_, v)) in before.iter().zip(layer.parameters()) {
        if v.dims() != &dims[..] {
            return Ok(Some(format!(
                "the step changed {name} from {dims:?} to {}",
                v.shape()
            )));
        }
    }
    Ok(None)
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "conv2d of fresh operands vs composite",
            6,
            &[SIZE, SIZE, SIZE, SIZE, SIZE, SIZE, CONV, DT],
            NONE,
            |c| Ok(verdict(conv_checked(c))),
        )
        .work(conv_work),
        op(
            "pooling of a fresh input vs composite",
            6,
            &[SIZE, SIZE, SIZE, SIZE, POOL, DT],
            NONE,
            |c| Ok(verdict(pool_checked(c))),
        )
        .work(|_| Ok(1 << 16)),
        op(
            "Linear with a matching input",
            5,
            &[SIZE, SIZE, SIZE, DT, SEED],
            &[crate::args::Kind::Layer, crate::args::Kind::Var],
            |c| {
                let (b, i, o) = (small(c, 0, 4), small(c, 1, 6), small(c, 2, 6));
                let dtype = float_dtype(c, 3);
                let mut g = Generator::new(c.seed(4));
                let mut run = || -> Result<(Layer<B>, Var<B>)> {
                    let l = LinearConfig::new(i, o)
                        .dtype(dtype)
                        .init(c.backend(), &mut g)?;
                    let x = Var::param(Tensor::randn([b, i], dtype, 9, c.backend())?);
                    Ok((
                        Layer {
                            module: Box::new(l),
                            cost_per_input: o.max(1),
                        },
                        x,
                    ))
                };
                Ok(match run() {
                    Ok((l, x)) => Outcome::Ok(vec![
                        crate::machine::Value::Layer(l),
                        crate::machine::Value::Var(x),
                    ]),
                    Err(e) => Outcome::Err(e.to_string()),
                })
            },
        ),
        op(
            "Linear training step (Adam)",
            4,
            &[SIZE, SIZE, SIZE, DT, B],
            NONE,
            |c| {
                let (b, i, o) = (small(c, 0, 4), small(c, 1, 6).max(1), small(c, 2, 6).max(1));
                let dtype = float_dtype(c, 3);
                let run = || -> Result<Option<String>> {
                    let mut g = Generator::new(1);
                    let l = LinearConfig::new(i, o)
                        .dtype(dtype)
                        .init(c.backend(), &mut g)?;
                    let x = Var::constant(Tensor::randn([b, i], dtype, 2, c.backend())?);
                    let config = AdamConfig {
                        amsgrad: c.flag(4),
                        ..AdamConfig::default()
                    };
                    let mut opt = Adam::new(l.parameters(), config)?;
                    train_step(&l, &x, &mut opt)
                };
                Ok(verdict(run()))
            },
        ),
        op(
            "Conv2d training step (SGD)",
            3,
            &[SIZE, SIZE, SIZE, SIZE, CONV, DT],
            NONE,
            |c| {
                let (n, ch, o) = (small(c, 0, 2), small(c, 1, 3).max(1), small(c, 2, 3).max(1));
                let k = small(c, 3, 3).max(1);
                let dtype = float_dtype(c, 5);
                let run = || -> Result<Option<String>> {
                    let mut g = Generator::new(2);
                    let p = c.conv(4);
                    let l = Conv2dConfig::new(ch, o, (k, k))
                        .stride(p.stride)
                        .padding(p.padding)
                        .dilation(p.dilation)
                        .dtype(dtype)
                        .init(c.backend(), &mut g)?;
                    let x = Var::constant(Tensor::randn([n, ch, 5, 5], dtype, 3, c.backend())?);
                    let mut opt = Sgd::new(l.parameters(), SgdConfig::new(0.1).momentum(0.9))?;
                    train_step(&l, &x, &mut opt)
                };
                Ok(verdict(run()))
            },
        ),
        op(
            "cross_entropy with valid targets",
            3,
            &[SIZE, SIZE, DT, IDX],
            NONE,
            |c| {
                let (n, classes) = (small(c, 0, 4), small(c, 1, 5));
                let dtype = float_dtype(c, 2);
                let run = || -> Result<Option<String>> {
                    let logits = Var::param(Tensor::randn([n, classes], dtype, 4, c.backend())?);
                    let targets: Vec<i64> = (0..n)
                        .map(|i| c.indices(3).get(i).copied().unwrap_or(0) % classes.max(1) as i64)
                        .collect();
                    let t = Tensor::from_vec(targets, [n], c.backend())?;
                    let loss = cross_entropy(&logits, &t)?;
                    if loss.numel() != 1 {
                        return Ok(Some(format!("a loss of shape {}", loss.shape())));
                    }
                    loss.backward()?;
                    Ok(match logits.grad() {
                        Some(g) if g.dims() != logits.dims() => Some(format!(
                            "gradient {} for logits {}",
                            g.shape(),
                            logits.shape()
                        )),
                        _ => None,
                    })
                };
                Ok(verdict(run()))
            },
        ),
    ]
}
