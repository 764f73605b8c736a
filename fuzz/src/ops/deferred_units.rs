//! A user's own model built deferred (`DeferredUnits`) and run through a `UnitSlot`, against
//! the plain build from the same seed.

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome};
use std::cell::Cell;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{DType, Generator, Result, Tensor};
use tessera_nn::distributed::{DeferredUnits, LocalCommunicator, ShardedUnits, UnitSlot};
use tessera_nn::layers::{Linear, LinearConfig};
use tessera_nn::Module;

/// Layers of the drawn stack.
const LAYERS: usize = 3;

/// Every parameter's bits, in order.
fn bits<B: FuzzBackend>(layers: &Vec<Linear<B>>) -> Result<Vec<u64>> {
    let mut out = Vec::new();
    for (_, v) in layers.parameters() {
        out.extend(v.value().to_vec_f64()?.into_iter().map(f64::to_bits));
    }
    Ok(out)
}

/// Whether any parameter is one element broadcast to a larger shape (a placeholder).
fn holds_placeholders<B: FuzzBackend>(layers: &Vec<Linear<B>>) -> bool {
    (layers.parameters().iter())
        .any(|(_, v)| v.numel() > 1 && v.value().layout().strides().iter().all(|&s| s == 0))
}

/// The stack's forward pass, each layer a unit run through `slot`.
fn forward<B: FuzzBackend>(layers: &[Linear<B>], slot: &UnitSlot<B>, x: &Var<B>) -> Result<Var<B>> {
    let mut x = x.clone();
    for (i, layer) in layers.iter().enumerate() {
        x = slot.run(i, &x, layer)?;
    }
    Ok(x)
}

/// The stack of `widths` built through `units` from `seed`; with `grow`, each run of a unit's
/// build makes its layer one output wider than the run before.
fn build_stack<'a, B: FuzzBackend>(
    b: &'a B,
    widths: &[usize],
    seed: u64,
    units: &mut DeferredUnits<'a, B>,
    grow: Option<&'a Cell<usize>>,
) -> Result<Vec<Linear<B>>> {
    let mut g = Generator::new(seed);
    (0..LAYERS)
        .map(|i| {
            let (fan_in, fan_out) = (widths[i], widths[i + 1]);
            units.unit(i.to_string(), &mut g, move |g| {
                let wider = grow.map_or(0, |n| n.replace(n.get() + 1));
                LinearConfig::new(fan_in, fan_out + wider).init(b, g)
            })
        })
        .collect()
}

/// A stack of three linear layers of drawn widths (zero included), each a unit, built through
/// `DeferredUnits` from a seed, deferred and not. The deferred stack, run through sharded units
/// of one rank, refuses while a unit holds placeholders; its units are given values in a
/// drawn order (one again, now and then a unit past the last, which must be refused); then
/// its parameters and outputs are the plain build's bit for bit. With the flag, the unit's
/// build makes a wider layer each time it runs, which `init_unit` must refuse.
fn deferred_stack<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let b = c.backend();
    let widths: Vec<usize> = (0..=LAYERS).map(|i| c.size(i) % 7).collect();
    let (seed, order, extra, growing) = (c.seed(4), c.seed(5), c.size(6) % 5, c.flag(7));
    let calls = Cell::new(0usize);
    let grow = growing.then_some(&calls);
    let run = || -> Result<Outcome<B>> {
        let plain = build_stack(b, &widths, seed, &mut DeferredUnits::immediate(), None);
        let mut units = DeferredUnits::deferred();
        let deferred = build_stack(b, &widths, seed, &mut units, grow);
        let (plain, deferred) = match (plain, deferred) {
            (Ok(p), Ok(d)) => (p, d),
            (Err(e), Err(_)) => return Err(e),
            (p, d) => {
                return Ok(Outcome::Break(format!(
                    "the plain build gave {}, the deferred one {}",
                    p.map_or_else(|e| e.to_string(), |_| "a model".into()),
                    d.map_or_else(|e| e.to_string(), |_| "a model".into()),
                )))
            }
        };
        let slot = UnitSlot::new();
        let sharded = ShardedUnits::new(Arc::new(LocalCommunicator::new()), units.prefixes())?;
        slot.install(sharded, LAYERS)?;
        let x = Var::constant(Tensor::ones([2, widths[0]], DType::F32, b)?);
        if holds_placeholders(&deferred) && forward(&deferred, &slot, &x).is_ok() {
            return Ok(Outcome::Break("a deferred unit ran on placeholders".into()));
        }
        let mut in_order: Vec<usize> = (0..LAYERS).collect();
        in_order.rotate_left(order as usize % LAYERS);
        in_order.push(extra);
        for unit in in_order {
            match (units.init_unit(&deferred, unit), unit < LAYERS && !growing) {
                (Ok(()), true) | (Err(_), false) => {}
                (Ok(()), false) => {
                    return Ok(Outcome::Break(format!(
                        "init_unit accepted unit {unit} of {LAYERS} (growing builds: {growing})"
                    )))
                }
                (Err(e), true) => return Err(e),
            }
        }
        if growing {
            return Ok(Outcome::Ok(Vec::new()));
        }
        if bits(&plain)? != bits(&deferred)? {
            return Ok(Outcome::Break(
                "DeferredUnits gave other parameters than the plain build".into(),
            ));
        }
        let plain_out = forward(&plain, &UnitSlot::new(), &x)?
            .value()
            .to_vec_f64()?;
        let out = forward(&deferred, &slot, &x)?.value().to_vec_f64()?;
        let same = plain_out
            .iter()
            .map(|v| v.to_bits())
            .eq(out.iter().map(|v| v.to_bits()));
        Ok(match same {
            true => Outcome::Ok(Vec::new()),
            false => Outcome::Break("the initialized stack computes otherwise".into()),
        })
    };
    match run() {
        Ok(outcome) => outcome,
        Err(e) => Outcome::Err(e.to_string()),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![op(
        "DeferredUnits: a user's stack built deferred, units given values in a drawn order (init_unit), run through a UnitSlot, against the plain build",
        1,
        &[SIZE, SIZE, SIZE, SIZE, SEED, SEED, SIZE, B],
        NONE,
        |c| Ok(deferred_stack(c)),
    )
    .work(|_| Ok(1 << 12))]
}
