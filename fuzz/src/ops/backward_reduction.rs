//! Gradients reduced during the backward pass (`ShardedOptimizer::set_reduce_during_backward`,
//! level 2, one rank) with any bucket size, passes that reach only part of the model, and
//! several passes per step: the parameters after two steps are level 1's (which reduces after
//! the passes) bit for bit with one pass per step, and to rounding with several; whole
//! gradients never outlive a step's last pass when every parameter was reached.

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome};
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Generator, Result, Tensor};
use tessera_nn::distributed::{Communicator, LocalCommunicator, ShardLevel, ShardedOptimizer};
use tessera_nn::layers::{Linear, LinearConfig};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::{Forward, Module};

/// Two layers and their parameters by name.
type Net<B> = (Linear<B>, Linear<B>, Vec<(String, Var<B>)>);

/// Two layers, 5 -> 7 -> 3, in f64, and their parameters by name.
fn net<B: Backend>(seed: u64, b: &B) -> Result<Net<B>> {
    let mut g = Generator::new(seed);
    let l1 = LinearConfig::new(5, 7).dtype(DType::F64).init(b, &mut g)?;
    let l2 = LinearConfig::new(7, 3).dtype(DType::F64).init(b, &mut g)?;
    let mut params = Vec::new();
    for (prefix, layer) in [("l1", &l1), ("l2", &l2)] {
        for (name, v) in layer.parameters() {
            params.push((format!("{prefix}.{name}"), v));
        }
    }
    Ok((l1, l2, params))
}

/// Parameter bits after two steps, and how many whole gradients the last pass left.
fn train<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    level: ShardLevel,
    during: bool,
    overlap: bool,
) -> Result<(Vec<u64>, usize)> {
    let b = c.backend();
    let (bucket_bytes, passes, freeze) = (1 + c.size(0) % 600, 1 + c.size(1) % 3, c.size(2) % 3);
    let seed = c.seed(3);
    let (l1, l2, params) = net(seed, b)?;
    let comm: Arc<dyn Communicator<B>> = Arc::new(LocalCommunicator::new());
    let mut opt = ShardedOptimizer::new(params.clone(), comm, level, bucket_bytes, |s| {
        AdamW::new(s, AdamWConfig::new(0.05))
    })?;
    if level == ShardLevel::Gradients {
        opt.set_reduce_during_backward(during)?;
        opt.set_overlap_reductions(overlap);
    }
    let mut left = 0;
    for step in 0..2u64 {
        opt.zero_grad();
        for pass in 0..passes as u64 {
            let x = Tensor::randn([4, 5], DType::F64, seed ^ (step * 8 + pass), b)?;
            let y = Tensor::from_vec(vec![0i64, 1, 2, 1], [4], b)?;
            let mut h = l1.forward(&Var::constant(x))?.tanh()?;
            // freeze 1: the first step's passes do not reach the first layer; 2: the last
            // pass of every step does not.
            if (freeze == 1 && step == 0) || (freeze == 2 && pass + 1 == passes as u64) {
                h = h.detach();
            }
            cross_entropy(&l2.forward(&h)?, &y)?.backward()?;
        }
        left = params.iter().filter(|(_, v)| v.grad().is_some()).count();
        opt.step()?;
    }
    let mut bits = Vec::new();
    for (_, v) in &params {
        bits.extend(v.value().to_vec_f64()?.into_iter().map(f64::to_bits));
    }
    Ok((bits, left))
}

fn compare<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let (passes, freeze) = (1 + c.size(1) % 3, c.size(2) % 3);
    let run = |level, during, overlap| train(c, level, during, overlap);
    let (during, after, level_one, overlapped) = match (
        run(ShardLevel::Gradients, true, false),
        run(ShardLevel::Gradients, false, false),
        run(ShardLevel::OptimizerState, false, false),
        run(ShardLevel::Gradients, true, true),
    ) {
        (Ok(a), Ok(b), Ok(c), Ok(d)) => (a, b, c, d),
        (Err(e), Err(_), Err(_), Err(_)) => return Outcome::Err(e.to_string()),
        (a, b, c, d) => {
            let show = |r: &Result<_>| r.as_ref().err().map(|e| e.to_string());
            return Outcome::Break(format!(
                "only some of the four failed: {:?} {:?} {:?} {:?}",
                show(&a),
                show(&b),
                show(&c),
                show(&d)
            ));
        }
    };
    if overlapped != during {
        return Outcome::Break(
            "overlapped reductions (started, settled at the step) differ".into(),
        );
    }
    if after.0 != level_one.0 {
        return Outcome::Break("level 2 reducing after backward differs from level 1".into());
    }
    let close = during.0.iter().zip(&after.0).all(|(&x, &y)| {
        let (x, y) = (f64::from_bits(x), f64::from_bits(y));
        x == y || (x - y).abs() <= 1e-12 * (1.0 + y.abs())
    });
    if (passes == 1 && during.0 != after.0) || !close {
        return Outcome::Break(format!(
            "reducing during backward ({passes} passes, freeze {freeze}) changed the parameters"
        ));
    }
    // The last pass reached every parameter: none keeps a whole gradient.
    if freeze != 2 && during.1 != 0 {
        return Outcome::Break(format!("{} whole gradients left after the pass", during.1));
    }
    Outcome::Ok(Vec::new())
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![op(
        "ShardedOptimizer::set_reduce_during_backward (and set_overlap_reductions): level 2 against level 1",
        1,
        &[SIZE, SIZE, SIZE, SEED],
        NONE,
        |c| Ok(compare(c)),
    )
    .work(|_| Ok(1 << 14))]
}
