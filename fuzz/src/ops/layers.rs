//! `nn` layers (constructors with huge and zero sizes, forward passes, modes) and losses.

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Layer, Outcome};
use tessera_autograd::Var;
use tessera_core::Generator;
use tessera_nn::layers::{
    AvgPool2d, BatchNormConfig, Conv2dConfig, Dropout, EmbeddingConfig, Flatten, LayerNormConfig,
    LinearConfig, MaxPool2d, ReLU, Sequential, Softmax, GELU,
};
use tessera_nn::loss::{
    bce_with_logits, cross_entropy, cross_entropy_with_label_smoothing, mse_loss, nll_loss,
};
use tessera_nn::precision::{CastCache, Precision};
use tessera_nn::Forward;

/// A layer register value.
pub(super) fn layer<B: FuzzBackend>(
    module: impl Forward<B> + 'static,
    cost_per_input: usize,
) -> Layer<B> {
    Layer {
        module: Box::new(module),
        cost_per_input: cost_per_input.max(1),
    }
}

/// The work of creating a layer with `params` parameters (0 when the request is so large
/// that it must fail at once).
fn params_work(params: usize) -> usize {
    super::alloc_work(params)
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "LinearConfig::init",
            4,
            &[SIZE, SIZE, B, DT, SEED],
            OUT_L,
            |c| {
                let (i, o) = (c.size(0), c.size(1));
                let mut g = Generator::new(c.seed(4));
                let l = LinearConfig::new(i, o)
                    .bias(c.flag(2))
                    .dtype(c.dtype(3))
                    .init(c.backend(), &mut g);
                Ok(l.map(|l| layer(l, o)).into())
            },
        )
        .work(|c| Ok(params_work(c.size(0).saturating_mul(c.size(1))))),
        op(
            "LinearConfig::init with a precision policy",
            3,
            &[SIZE, SIZE, B, SIZE, SEED],
            OUT_L,
            |c| {
                let (i, o) = (c.size(0), c.size(1));
                let precision = Precision::ALL[c.size(3) % Precision::ALL.len()];
                let mut g = Generator::new(c.seed(4));
                let l = LinearConfig::new(i, o)
                    .bias(c.flag(2))
                    .precision(precision)
                    .init(c.backend(), &mut g);
                Ok(l.map(|l| layer(l, o)).into())
            },
        )
        .work(|c| Ok(params_work(c.size(0).saturating_mul(c.size(1))))),
        op(
            "Conv2dConfig::init",
            3,
            &[SIZE, SIZE, SIZE, SIZE, CONV, DT, SEED],
            OUT_L,
            |c| {
                let (i, o, kh, kw) = (c.size(0), c.size(1), c.size(2), c.size(3));
                let p = c.conv(4);
                let config = Conv2dConfig::new(i, o, (kh, kw))
                    .stride(p.stride)
                    .padding(p.padding)
                    .dilation(p.dilation)
                    .dtype(c.dtype(5));
                let mut g = Generator::new(c.seed(6));
                let l = config.init(c.backend(), &mut g);
                Ok(l.map(|l| layer(l, o.saturating_mul(kh).saturating_mul(kw)))
                    .into())
            },
        )
        .work(|c| {
            let n = [c.size(0), c.size(1), c.size(2), c.size(3)]
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .unwrap_or(usize::MAX);
            Ok(params_work(n))
        }),
        op(
            "Conv2dConfig::init with a precision policy",
            2,
            &[SIZE, SIZE, SIZE, CONV, B, SIZE, SEED],
            OUT_L,
            |c| {
                let (i, o, k) = (c.size(0), c.size(1), c.size(2));
                let p = c.conv(3);
                let precision = Precision::ALL[c.size(5) % Precision::ALL.len()];
                let config = Conv2dConfig::new(i, o, (k, k))
                    .stride(p.stride)
                    .padding(p.padding)
                    .dilation(p.dilation)
                    .bias(c.flag(4))
                    .precision(precision);
                let mut g = Generator::new(c.seed(6));
                let l = config.init(c.backend(), &mut g);
                Ok(l.map(|l| layer(l, o.saturating_mul(k).saturating_mul(k)))
                    .into())
            },
        )
        .work(|c| {
            let n = [c.size(0), c.size(1), c.size(2), c.size(2)]
                .iter()
                .try_fold(1usize, |a, &d| a.checked_mul(d))
                .unwrap_or(usize::MAX);
            Ok(params_work(n))
        }),
        op(
            "Precision::to_compute, from_compute",
            3,
            &[V, SIZE],
            OUT_V,
            |c| {
                let v = c.v(0)?;
                let precision = Precision::ALL[c.size(1) % Precision::ALL.len()];
                let r = precision
                    .to_compute(&v)
                    .and_then(|low| precision.from_compute(low, v.dtype()));
                Ok(r.into())
            },
        )
        .expect(|c, out| {
            let v = c.v(0).map_err(|_| "gone")?;
            match out.first() {
                Some(crate::machine::Value::Var(o)) if o.dims() == v.dims() => {
                    if o.dtype() == v.dtype() {
                        Ok(())
                    } else {
                        Err(format!(
                            "from_compute(to_compute(x), {}) has dtype {}",
                            v.dtype(),
                            o.dtype()
                        ))
                    }
                }
                _ => Err("expected a var of the input's shape".into()),
            }
        }),
        op(
            "CastCache: to_compute without gradients, cached and not",
            2,
            &[V, SIZE, B],
            NONE,
            |c| {
                let v = c.v(0)?;
                let precision = Precision::ALL[c.size(1) % Precision::ALL.len()];
                let bits = |r: tessera_core::Result<Var<_>>| -> Result<(String, Vec<u64>), String> {
                    let t = r.map_err(|e| e.to_string())?.value();
                    let values = t.to_vec_f64().map_err(|e| e.to_string())?;
                    Ok((
                        t.dtype().to_string(),
                        values.into_iter().map(f64::to_bits).collect(),
                    ))
                };
                let cast = || bits(tessera_autograd::no_grad(|| precision.to_compute(&v)));
                let plain = cast();
                let (first, again) = {
                    let _cache = CastCache::enable();
                    // Sometimes with gradients on inside the scope (the cache stands aside).
                    if c.flag(2) {
                        let _ = bits(precision.to_compute(&v));
                    }
                    (cast(), cast())
                };
                if CastCache::is_enabled() || CastCache::len() != 0 {
                    return Ok(Outcome::Break("the cache outlived its guard".into()));
                }
                Ok(match (plain, first, again) {
                    (Ok(p), Ok(f), Ok(a)) if p == f && f == a => Outcome::Ok(Vec::new()),
                    (Err(_), Err(e), Err(_)) => Outcome::Err(e),
                    (p, f, a) => Outcome::Break(format!(
                        "to_compute gave {p:?} plainly, {f:?} then {a:?} in a CastCache"
                    )),
                })
            },
        ),
        op("BatchNormConfig::init_1d", 2, &[SIZE, DT], OUT_L, |c| {
            Ok(BatchNormConfig::new(c.size(0))
                .dtype(c.dtype(1))
                .init_1d(c.backend())
                .map(|l| layer(l, 8))
                .into())
        })
        .work(|c| Ok(params_work(c.size(0)))),
        op("BatchNormConfig::init_2d", 2, &[SIZE, DT], OUT_L, |c| {
            Ok(BatchNormConfig::new(c.size(0))
                .dtype(c.dtype(1))
                .init_2d(c.backend())
                .map(|l| layer(l, 8))
                .into())
        })
        .work(|c| Ok(params_work(c.size(0)))),
        op("LayerNormConfig::init", 2, &[DIMS, DT], OUT_L, |c| {
            Ok(LayerNormConfig::new(c.dims(0).to_vec())
                .dtype(c.dtype(1))
                .init(c.backend())
                .map(|l| layer(l, 8))
                .into())
        })
        .work(|c| Ok(params_work(super::numel(&c.dims(0))))),
        op(
            "EmbeddingConfig::init",
            2,
            &[SIZE, SIZE, DT, SEED],
            OUT_L,
            |c| {
                let mut g = Generator::new(c.seed(3));
                let l = EmbeddingConfig::new(c.size(0), c.size(1))
                    .dtype(c.dtype(2))
                    .init(c.backend(), &mut g);
                Ok(l.map(|l| layer(l, c.size(1))).into())
            },
        )
        .work(|c| Ok(params_work(c.size(0).saturating_mul(c.size(1))))),
        op("Dropout::new", 2, &[F, SEED], OUT_L, |c| {
            Ok(Dropout::new(c.float(0), c.seed(1))
                .map(|l| layer(l, 4))
                .into())
        }),
        op("MaxPool2d::new", 2, &[POOL], OUT_L, |c| {
            let p = c.pool(0);
            Ok(MaxPool2d::new(p)
                .map(|l| layer(l, p.kernel.0.saturating_mul(p.kernel.1)))
                .into())
        }),
        op("AvgPool2d::new", 1, &[POOL], OUT_L, |c| {
            let p = c.pool(0);
            Ok(AvgPool2d::new(p)
                .map(|l| layer(l, p.kernel.0.saturating_mul(p.kernel.1)))
                .into())
        }),
        op("Flatten::with_axes", 1, &[AXIS, AXIS], OUT_L, |c| {
            Ok(Ok::<_, String>(layer(Flatten::with_axes(c.axis(0), c.axis(1)), 1)).into())
        }),
        op("Sequential::new((..))", 1, &[AXIS], OUT_L, |c| {
            let s = Sequential::new((ReLU::new(), Softmax::new(c.axis(0)), GELU::new()));
            Ok(Ok::<_, String>(layer(s, 8)).into())
        }),
        op("Forward::forward", 10, &[L, V], OUT_V, |c| {
            Ok(c.layer(0)?.module.forward(&c.v(1)?).into())
        }),
        op("Module::set_training", 2, &[L, B], NONE, |c| {
            c.layer(0)?.module.set_training(c.flag(1));
            Ok(Ok::<_, String>(()).into())
        }),
        op("Module::num_parameters", 1, &[L], NONE, |c| {
            let _ = c.layer(0)?.module.num_parameters();
            Ok(Ok::<_, String>(()).into())
        }),
        op("mse_loss", 2, &[V, V], OUT_V, |c| {
            Ok(mse_loss(&c.v(0)?, &c.v(1)?).into())
        }),
        op("cross_entropy", 3, &[V, T], OUT_V, |c| {
            Ok(cross_entropy(&c.v(0)?, &c.t(1)?).into())
        }),
        op(
            "cross_entropy_with_label_smoothing",
            1,
            &[V, T, F],
            OUT_V,
            |c| Ok(cross_entropy_with_label_smoothing(&c.v(0)?, &c.t(1)?, c.float(2)).into()),
        ),
        op("nll_loss", 2, &[V, T], OUT_V, |c| {
            Ok(nll_loss(&c.v(0)?, &c.t(1)?).into())
        }),
        op("bce_with_logits", 1, &[V, V], OUT_V, |c| {
            Ok(bce_with_logits(&c.v(0)?, &c.v(1)?).into())
        }),
        op("layer training step", 3, &[L, V], NONE, |c| {
            // Forward, a scalar loss, backward: what a training loop does with the layer.
            let (l, x) = (c.layer(0)?, c.v(1)?);
            let run = || -> tessera_core::Result<()> {
                let y: Var<B> = l.module.forward(&x)?;
                y.sum_all()?.backward()
            };
            Ok(run().into())
        }),
    ]
}
