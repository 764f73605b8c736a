//! Optimizers over a layer's parameters or over variables, with odd hyper-parameters: steps,
//! learning rates, state export and (possibly mismatched) state import.

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::Ctx;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, Tensor};
use tessera_nn::distributed::{Communicator, LocalCommunicator, ShardLevel, ShardedOptimizer};
use tessera_nn::optim::{Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};
use tessera_nn::precision::DynamicLossScaler;

/// The parameters an optimizer is built over: layer 0's when the step has a layer, else the
/// variable argument as one parameter (it may not even require a gradient).
fn params_of<B: FuzzBackend>(
    c: &Ctx<'_, B>,
) -> Result<Vec<(String, Var<B>)>, crate::machine::Skip> {
    Ok(c.layer(0)?.module.parameters())
}

fn boxed<B: Backend, O: Optimizer<B> + 'static>(o: O) -> Box<dyn Optimizer<B>> {
    Box::new(o)
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("Sgd::new(layer)", 2, &[L, F, F, B], OUT_O, |c| {
            let config = SgdConfig {
                lr: c.float(1),
                momentum: c.float(2).abs(),
                dampening: 0.0,
                weight_decay: 0.0,
                nesterov: c.flag(3),
            };
            Ok(Sgd::new(params_of(c)?, config).map(boxed).into())
        }),
        op("Adam::new(layer)", 2, &[L, F, F, B], OUT_O, |c| {
            let config = AdamConfig {
                lr: c.float(1),
                betas: (0.9, c.float(2)),
                eps: 1e-8,
                weight_decay: 0.0,
                amsgrad: c.flag(3),
            };
            Ok(Adam::new(params_of(c)?, config).map(boxed).into())
        }),
        op("AdamW::new(var)", 2, &[V, F, F, B], OUT_O, |c| {
            let config = AdamWConfig {
                lr: c.float(1),
                betas: (0.9, 0.999),
                eps: 1e-8,
                weight_decay: c.float(2),
                amsgrad: c.flag(3),
            };
            Ok(AdamW::new(vec![("v".to_string(), c.v(0)?)], config)
                .map(boxed)
                .into())
        }),
        op(
            "ShardedOptimizer::new(layer)",
            2,
            &[L, F, F, F],
            OUT_O,
            |c| {
                // Any level number (0 and 3 are refused here, 4 and up are no level), any bucket
                // size (0 is refused), AdamW inside, one rank: every optimizer op then runs on it.
                let level = c.float(1).abs().min(8.0) as usize;
                let bucket_bytes = c.float(2).abs().min(1e9) as usize;
                let config = AdamWConfig::new(c.float(3));
                let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
                let params = params_of(c)?;
                let made = ShardLevel::from_number(level).and_then(|level| {
                    ShardedOptimizer::new(params, comm, level, bucket_bytes, |shares| {
                        AdamW::new(shares, config)
                    })
                });
                Ok(made.map(boxed).into())
            },
        ),
        op("Adam::new(var, var)", 1, &[V, V], OUT_O, |c| {
            // The same name twice, or the same variable twice: an error, not a double update.
            let (a, b) = (c.v(0)?, c.v(1)?);
            let params = vec![("p".to_string(), a), ("p".to_string(), b)];
            Ok(Adam::new(params, AdamConfig::default()).map(boxed).into())
        }),
        op("Optimizer::step", 6, &[O], NONE, |c| {
            Ok(c.optim(0)?.step().into())
        })
        .work(|_| Ok(1 << 20)),
        op(
            "DynamicLossScaler::unscale_and_update(layer)",
            2,
            &[L, F],
            NONE,
            |c| {
                let params: Vec<Var<B>> = params_of(c)?.into_iter().map(|(_, v)| v).collect();
                let mut scaler = DynamicLossScaler::new().init_scale(c.float(1));
                Ok(scaler.unscale_and_update(&params).map(|_| ()).into())
            },
        )
        .work(|_| Ok(1 << 20)),
        op(
            "DynamicLossScaler::unscale_and_update_across(layer, local)",
            1,
            &[L, F],
            NONE,
            |c| {
                let params: Vec<Var<B>> = params_of(c)?.into_iter().map(|(_, v)| v).collect();
                let mut scaler = DynamicLossScaler::new().init_scale(c.float(1));
                let comm = tessera_nn::distributed::LocalCommunicator::new();
                let step = scaler.unscale_and_update_across(&params, &comm);
                Ok(step.map(|_| ()).into())
            },
        )
        .work(|_| Ok(1 << 20)),
        op("Communicator::gather(local)", 1, &[T, B], OUT_T, |c| {
            // Root 0 (this one rank) or 1 (not a rank: a typed error).
            let root = usize::from(c.flag(1));
            let comm = LocalCommunicator::new();
            let gathered = Communicator::<B>::gather(&comm, &c.t(0)?, root).and_then(|t| {
                t.ok_or_else(|| tessera_core::Error::InvalidArgument {
                    op: "gather",
                    msg: "the only rank received nothing".into(),
                })
            });
            Ok(gathered.into())
        })
        .expect(|c, out| {
            // One rank gathers its own shard: the same values.
            super::like_input(c, 0, out)?;
            let (x, o) = (
                c.t(0).map_err(|_| "input vanished")?,
                super::out_tensor(out)?,
            );
            let bits = |t: &Tensor<B>| {
                t.to_vec_f64()
                    .map(|v| v.into_iter().map(f64::to_bits).collect::<Vec<_>>())
            };
            match (bits(&x), bits(o)) {
                (Ok(a), Ok(b)) if a == b => Ok(()),
                (Ok(_), Ok(_)) => Err("gathered values differ from the shard".into()),
                _ => Err("values unreadable".into()),
            }
        }),
        op("Optimizer::zero_grad", 2, &[O], NONE, |c| {
            c.optim(0)?.zero_grad();
            Ok(Ok::<_, String>(()).into())
        }),
        op("Optimizer::set_learning_rate", 1, &[O, F], NONE, |c| {
            let lr = c.float(1);
            c.optim(0)?.set_learning_rate(lr);
            Ok(Ok::<_, String>(()).into())
        }),
        op("Optimizer::load_state", 2, &[O, T, B], NONE, |c| {
            // The optimizer's own state with one tensor replaced by another register's.
            let t = c.t(1)?;
            let replace = c.flag(2);
            let o = c.optim(0)?;
            let mut state: Vec<(String, Tensor<B>)> = o.state();
            match state.first_mut() {
                Some(first) if replace => first.1 = t,
                _ => state.push(("0.unknown".into(), t)),
            }
            Ok(o.load_state(&state).into())
        }),
    ]
}
