//! `ShardedUnits::hold_on`: a GPT's blocks sharded over three thread ranks, held whole on one
//! rank alone (what rank 0 does to write a checkpoint or sample). The root holds the
//! parameters of the plain model trained in one process, bit for bit, and computes its loss;
//! the other ranks keep one-element placeholders and refuse to run the model; after the
//! release, training goes on bit for bit as the plain model's (what the root wrote while it
//! held them is dropped), and a root outside the world is a typed error on every rank.

use crate::gpt_steps::{adamw, batch, bits, step};
use crate::thread_comm::on_ranks;
use std::sync::Arc;
use tessera_autograd::{no_grad, Var};
use tessera_core::{BackendStorage, Error, Generator};
use tessera_cpu::Cpu;
use tessera_nn::distributed::{Communicator, ShardedOptimizer, ShardedUnits};
use tessera_nn::gpt::{Gpt, GptConfig};
use tessera_nn::Module;

const RANKS: usize = 3;
const ROOT: usize = 1;

fn gpt(dev: &Cpu) -> Gpt<Cpu> {
    GptConfig::new(3, 2, 16, 8, 11)
        .init(dev, &mut Generator::new(21))
        .unwrap()
}

/// The blocks' parameters (the units' ones).
fn block_params(model: &Gpt<Cpu>) -> Vec<(String, Var<Cpu>)> {
    let params = model.parameters().into_iter();
    params
        .filter(|(n, _)| n.starts_with("transformer.h."))
        .collect()
}

/// What one rank saw.
struct Seen {
    losses: Vec<f64>,
    /// The parameters while held on the root (the root's only).
    held: Option<Vec<(String, Vec<u32>)>>,
    /// The loss the root computed while holding them.
    held_loss: Option<f64>,
    /// Every rank's parameters at the end (gathered on every rank).
    end: Vec<(String, Vec<u32>)>,
}

#[test]
fn units_held_on_one_rank_are_whole_there_only_and_training_goes_on_after_the_release() {
    let dev = Cpu::new();
    let plain_model = gpt(&dev);
    let mut plain = adamw(plain_model.parameters()).unwrap();
    let mut plain_losses: Vec<f64> = (0..2).map(|s| step(&plain_model, &mut plain, s)).collect();
    let plain_held = bits(&plain_model);
    let (x, y) = batch(7, &dev);
    let plain_held_loss = no_grad(|| plain_model.loss(&x, &y))
        .unwrap()
        .value()
        .to_scalar_f64()
        .unwrap();
    plain_losses.extend((2..4).map(|s| step(&plain_model, &mut plain, s)));

    let seen = on_ranks(RANKS, |comm| {
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let rank = comm.rank();
        let dev = Cpu::new();
        let model = gpt(&dev);
        let units = ShardedUnits::new(comm, model.block_prefixes()).unwrap();
        let mut sharded =
            ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        model.shard_blocks(units.clone()).unwrap();
        units.release_all().unwrap();
        // Each share holds its own elements only, not the parameter it was cut from.
        for share in sharded.shards() {
            assert_eq!(share.value().storage().len(), share.numel());
        }
        let mut losses: Vec<f64> = (0..2).map(|s| step(&model, &mut sharded, s)).collect();

        // A root outside the world: a typed error on every rank, nothing held.
        let outside = units.hold_on(RANKS).unwrap_err();
        assert!(
            matches!(outside, Error::InvalidArgument { .. }),
            "{outside}"
        );
        assert!(!units.is_held() && units.held_only_on().is_none());

        units.hold_on(ROOT).unwrap();
        assert_eq!(units.held_only_on(), Some(ROOT));
        assert_eq!(units.is_held(), rank == ROOT);
        // Holding again on the same rank changes nothing (no collective).
        units.hold_on(ROOT).unwrap();
        let (x, y) = batch(7, &dev);
        let (held, held_loss) = if rank == ROOT {
            let loss = no_grad(|| model.loss(&x, &y)).unwrap();
            let held = bits(&model);
            // Written while held on one rank: dropped at the release.
            for (_, var) in block_params(&model) {
                var.set_value(var.value().zeros_like().unwrap()).unwrap();
            }
            (Some(held), Some(loss.value().to_scalar_f64().unwrap()))
        } else {
            // Only placeholders: one element broadcast to each parameter's shape.
            for (name, var) in block_params(&model) {
                let value = var.value();
                assert!(value.layout().strides().iter().all(|&s| s == 0), "{name}");
            }
            let refused = no_grad(|| model.loss(&x, &y)).unwrap_err().to_string();
            assert!(refused.contains("held whole on rank 1 only"), "{refused}");
            (None, None)
        };
        units.release_all().unwrap();
        assert!(!units.is_held() && units.held_only_on().is_none());
        losses.extend((2..4).map(|s| step(&model, &mut sharded, s)));
        units.gather_all().unwrap();
        Seen {
            losses,
            held,
            held_loss,
            end: bits(&model),
        }
    });
    for (rank, seen) in seen.iter().enumerate() {
        assert_eq!(seen.losses, plain_losses, "rank {rank}");
        assert!(seen.end == bits(&plain_model), "rank {rank}'s parameters");
        assert_eq!(seen.held.is_some(), rank == ROOT);
        if let Some(held) = &seen.held {
            assert!(*held == plain_held, "the root's held parameters");
            assert_eq!(seen.held_loss, Some(plain_held_loss));
        }
    }
}
