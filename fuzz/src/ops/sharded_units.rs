//! Sharding level 3 for the reference models (`ReferenceModel::shard_layers`, one rank): a
//! model whose layers run as sharded units must refuse units that do not match its layers, and
//! otherwise compute what the plain model computes: the same loss (or the same kind of
//! failure) and, after a training step, the same parameters bit for bit.

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome};
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{DType, Result, Tensor};
use tessera_nn::distributed::{Communicator, LocalCommunicator, ShardedOptimizer, ShardedUnits};
use tessera_nn::loss::cross_entropy;
use tessera_nn::models::{ModelKind, ReferenceModel};
use tessera_nn::optim::{Optimizer, Sgd, SgdConfig};
use tessera_nn::{Forward, Module};

/// Every bit of a model's parameters.
fn bits<B: FuzzBackend>(model: &ReferenceModel<B>) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for (_, v) in model.parameters() {
        out.extend(v.value().to_vec_f64()?.into_iter().map(f64::to_bits));
    }
    Ok(out)
}

/// One SGD step of `model` on `(x, y)`: the loss, or the step's error.
fn train_step<B: FuzzBackend>(
    model: &ReferenceModel<B>,
    optimizer: &mut dyn Optimizer<B>,
    x: &Tensor<B>,
    y: &Tensor<B>,
) -> Result<f64> {
    let loss = cross_entropy(&model.forward(&Var::constant(x.clone()))?, y)?;
    optimizer.zero_grad();
    loss.backward()?;
    optimizer.step()?;
    loss.value().to_scalar_f64()
}

/// The plain and the level-3 step's outcomes, then both models' parameter bits.
type BothSteps = (Result<f64>, Result<f64>, Vec<u64>, Vec<u64>);

fn level_three<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let b = c.backend();
    let (batch, units_change, width) = (c.size(0) % 5, c.size(1) % 4, c.size(2) % 3);
    let (seed, label_range) = (c.seed(3), 9 + c.size(4) % 3);
    let setup = || -> Result<_> {
        let plain = ModelKind::Mlp.build(DType::F32, seed, b)?;
        let model = ModelKind::Mlp.build(DType::F32, seed, b)?;
        let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
        let mut prefixes = model.unit_prefixes();
        match units_change {
            1 => {
                prefixes.pop();
            }
            2 => prefixes.push("9".into()),
            _ => {}
        }
        Ok((plain, model, ShardedUnits::new(comm, prefixes)?))
    };
    let (plain, model, units) = match setup() {
        Ok(v) => v,
        Err(e) => return Outcome::Err(e.to_string()),
    };
    let model = match (model.shard_layers(units.clone()), units_change) {
        (Err(e), 1 | 2) => return Outcome::Err(e.to_string()),
        (Ok(_), 1 | 2) => {
            return Outcome::Break(format!(
                "shard_layers accepted {} units for the MLP's 3 layers",
                units.len()
            ))
        }
        (Err(e), _) => return Outcome::Break(format!("shard_layers refused its own units: {e}")),
        (Ok(m), _) => m,
    };
    let run = || -> Result<BothSteps> {
        let config = SgdConfig::new(0.1).momentum(0.9);
        let mut plain_opt = Sgd::new(plain.parameters(), config)?;
        let mut sharded = ShardedOptimizer::with_units(model.parameters(), &units, 4096, |s| {
            Sgd::new(s, config)
        })?;
        units.release_all()?;
        // Inputs of 784 features, or (width 1, 2) of a width the first layer refuses.
        let features = [784, 783, 785][width];
        let x = Tensor::randn([batch, features], DType::F32, seed, b)?;
        let labels: Vec<i64> = (0..batch).map(|i| (i * 7 % label_range) as i64).collect();
        let y = Tensor::from_vec(labels, [batch], b)?;
        let want = train_step(&plain, &mut plain_opt, &x, &y);
        let got = train_step(&model, &mut sharded, &x, &y);
        units.gather_all()?;
        Ok((want, got, bits(&plain)?, bits(&model)?))
    };
    match run() {
        Err(e) => Outcome::Err(e.to_string()),
        Ok((Ok(want), Ok(got), a, b)) if want.to_bits() != got.to_bits() || a != b => {
            Outcome::Break(format!(
                "level 3 computed loss {got} where the plain MLP computed {want}, or other \
                 parameters after the step"
            ))
        }
        Ok((Ok(_), Ok(_), _, _)) => Outcome::Ok(Vec::new()),
        Ok((Err(_), Err(e), _, _)) => Outcome::Err(e.to_string()),
        Ok((want, got, _, _)) => {
            Outcome::Break(format!("the plain MLP gave {want:?}, level 3 gave {got:?}"))
        }
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![op(
        "ReferenceModel::shard_layers: a level-3 MLP step against the plain one",
        1,
        &[SIZE, SIZE, SIZE, SEED, SIZE],
        NONE,
        |c| Ok(level_three(c)),
    )
    .work(|_| Ok(1 << 21))]
}
