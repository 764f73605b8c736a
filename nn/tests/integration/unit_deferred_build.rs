//! Building a model without its blocks' values (`GptConfig::init_deferred`) and giving them
//! one block at a time (`Gpt::init_block`, `ShardedUnits::initialize`): the values are those of
//! the plain build bit for bit, a block that holds placeholders refuses to run, and on three
//! thread ranks no rank holds more than one block whole while the model is built, after which
//! level 3 trains exactly as the plain model does.

use crate::gpt_steps::{adamw, batch, bits, is_placeholder, step};
use crate::thread_comm::on_ranks;
use std::sync::Arc;
use tessera_core::{BackendStorage, Error, Generator};
use tessera_cpu::Cpu;
use tessera_nn::distributed::{
    Communicator, DistributedDataParallel, ShardedOptimizer, ShardedUnits,
};
use tessera_nn::gpt::{Gpt, GptCache, GptConfig};
use tessera_nn::optim::Optimizer;
use tessera_nn::{Forward, Module};

const RANKS: usize = 3;
const SEED: u64 = 21;

fn config() -> GptConfig {
    GptConfig::new(3, 2, 16, 8, 11).dropout(0.25)
}

/// The names of the parameters of block `block` that hold placeholders.
fn placeholders_in(model: &Gpt<Cpu>, block: usize) -> Vec<String> {
    let prefix = format!("transformer.h.{block}.");
    model
        .parameters()
        .into_iter()
        .filter(|(n, v)| n.starts_with(&prefix) && is_placeholder(&v.value()))
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn a_deferred_gpt_refuses_to_run_until_each_block_has_the_plain_builds_values() {
    let dev = Cpu::new();
    let plain = config().init(&dev, &mut Generator::new(SEED)).unwrap();
    let deferred = config()
        .init_deferred(&dev, &mut Generator::new(SEED))
        .unwrap();
    assert!(deferred.is_deferred() && !plain.is_deferred());
    // Every block matrix is a placeholder; everything else is the plain build's.
    for ((name, a), (_, b)) in plain.parameters().iter().zip(deferred.parameters()) {
        let (a, b) = (a.value(), b.value());
        assert_eq!(a.dims(), b.dims(), "{name}");
        if name.starts_with("transformer.h.") && a.rank() == 2 {
            assert!(is_placeholder(&b), "{name}");
        } else {
            assert_eq!(
                a.to_vec::<f32>().unwrap(),
                b.to_vec::<f32>().unwrap(),
                "{name}"
            );
        }
    }

    let (x, y) = batch(0, &dev);
    let refused = deferred.loss(&x, &y).unwrap_err();
    assert!(
        matches!(refused, Error::InvalidArgument { .. }),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("transformer.h.0.attn.in_proj_weight"),
        "{refused}"
    );
    deferred.init_block(0).unwrap();
    deferred.init_block(1).unwrap();
    assert!(placeholders_in(&deferred, 0).is_empty());
    let refused = deferred.loss(&x, &y).unwrap_err().to_string();
    assert!(refused.contains("transformer.h.2."), "{refused}");
    let mut cache = GptCache::new(deferred.config(), 2, &dev).unwrap();
    let refused = deferred.forward_cached(&x, &mut cache).unwrap_err();
    assert!(
        refused.to_string().contains("transformer.h.2."),
        "{refused}"
    );
    let outside = deferred.init_block(3).unwrap_err();
    assert!(
        matches!(outside, Error::InvalidArgument { .. }),
        "{outside}"
    );
    deferred.init_block(2).unwrap();
    assert!(bits(&deferred) == bits(&plain));

    // The dropout streams are the plain build's too: training matches bit for bit.
    let (mut a, mut b) = (
        adamw(plain.parameters()).unwrap(),
        adamw(deferred.parameters()).unwrap(),
    );
    for seed in 0..3 {
        assert_eq!(step(&plain, &mut a, seed), step(&deferred, &mut b, seed));
    }
    assert!(bits(&deferred) == bits(&plain));
    // Re-drawing a block gives back its initial values.
    let fresh = config().init(&dev, &mut Generator::new(SEED)).unwrap();
    deferred.init_block(1).unwrap();
    let block_1 = |m: &Gpt<Cpu>| -> Vec<_> {
        bits(m)
            .into_iter()
            .filter(|(n, _)| n.starts_with("transformer.h.1."))
            .collect()
    };
    assert!(block_1(&deferred) == block_1(&fresh));
}

/// What one rank saw.
struct Seen {
    losses: Vec<f64>,
    /// For each block's `init`: how many other blocks held values meanwhile.
    others_whole: Vec<usize>,
    /// Every parameter at the end (gathered).
    end: Vec<(String, Vec<u32>)>,
}

#[test]
fn sharded_ranks_build_one_block_at_a_time_and_train_as_the_plain_model() {
    let dev = Cpu::new();
    // Without dropout: each rank draws its own masks, so only then is the mean of the ranks'
    // gradients the plain model's.
    let config = || config().dropout(0.0);
    let plain_model = config().init(&dev, &mut Generator::new(SEED)).unwrap();
    let mut plain = adamw(plain_model.parameters()).unwrap();
    let plain_losses: Vec<f64> = (0..3).map(|s| step(&plain_model, &mut plain, s)).collect();

    let seen = on_ranks(RANKS, |comm| {
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let rank = comm.rank();
        let dev = Cpu::new();
        // Other ranks draw from other seeds: rank 0's model is the one every rank trains.
        let model = config()
            .init_deferred(&dev, &mut Generator::new(SEED + rank as u64))
            .unwrap();
        let ddp = DistributedDataParallel::new(model, comm.clone()).unwrap();
        let model = ddp.module();
        // The broadcast sent one element of each placeholder (the block's four matrices),
        // which stays one.
        assert_eq!(placeholders_in(model, 1).len(), 4);
        let units = ShardedUnits::new(comm, model.block_prefixes()).unwrap();
        let mut sharded =
            ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        model.shard_blocks(units.clone()).unwrap();
        // Shares of placeholders would be zeros: a typed error instead.
        let unvalued = units.release_all().unwrap_err();
        assert!(
            unvalued.to_string().contains("ShardedUnits::initialize"),
            "{unvalued}"
        );
        let mut others_whole = Vec::new();
        units
            .initialize(&mut |unit| {
                let blocks = model.config().n_layer;
                others_whole.push(
                    (0..blocks)
                        .filter(|&b| b != unit && placeholders_in(model, b).is_empty())
                        .count(),
                );
                model.init_block(unit)
            })
            .unwrap();
        assert!(!units.is_held());
        // Each share holds its own elements only, not the unit's flat vector it was cut from.
        for share in sharded.shards() {
            assert_eq!(share.value().storage().len(), share.numel());
        }
        let again = units.initialize(&mut |u| model.init_block(u)).unwrap_err();
        assert!(matches!(again, Error::InvalidArgument { .. }), "{again}");
        let losses = (0..3).map(|s| step(model, &mut sharded, s)).collect();
        units.gather_all().unwrap();
        let end = bits(model);
        // A failure on one rank is an error on every rank, and the units end released.
        let failed = units
            .initialize(&mut |unit| match (rank, unit) {
                (2, 1) => Err(Error::InvalidArgument {
                    op: "test",
                    msg: "rank 2 fails".into(),
                }),
                _ => model.init_block(unit),
            })
            .unwrap_err();
        assert!(matches!(failed, Error::InvalidArgument { .. }), "{failed}");
        assert!(!units.is_held());
        Seen {
            losses,
            others_whole,
            end,
        }
    });
    for (rank, seen) in seen.iter().enumerate() {
        assert_eq!(seen.others_whole, vec![0; 3], "rank {rank}");
        assert_eq!(seen.losses, plain_losses, "rank {rank}");
        assert!(seen.end == bits(&plain_model), "rank {rank}'s parameters");
    }
}

#[test]
fn level_three_resumes_one_block_at_a_time_into_a_deferred_gpt() {
    use serde_json::json;
    use tessera_nn::run::{self, RunDir};
    let config = || config().dropout(0.0);
    let dev = Cpu::new();
    let tmp = tempfile::tempdir().unwrap();
    // The plain model: 2 steps, a checkpoint, 2 more steps.
    let plain_model = config().init(&dev, &mut Generator::new(SEED)).unwrap();
    let mut plain = adamw(plain_model.parameters()).unwrap();
    for s in 0..2 {
        step(&plain_model, &mut plain, s);
    }
    let run_dir = RunDir::open(tmp.path()).unwrap();
    let groups: &[(&str, &dyn Optimizer<Cpu>)] = &[("opt", &plain)];
    run::save_checkpoint(&run_dir, 2, &plain_model, groups, &json!({}), &json!({})).unwrap();
    let plain_losses: Vec<f64> = (2..4).map(|s| step(&plain_model, &mut plain, s)).collect();

    let seen = on_ranks(RANKS, |comm| {
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let dev = Cpu::new();
        // Another seed: the checkpoint replaces every value.
        let model = config()
            .init_deferred(&dev, &mut Generator::new(SEED + 1))
            .unwrap();
        let ddp = DistributedDataParallel::new(model, comm.clone()).unwrap();
        let model = ddp.module();
        let units = ShardedUnits::new(comm, model.block_prefixes()).unwrap();
        let mut sharded =
            ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        model.shard_blocks(units.clone()).unwrap();
        let run_dir = RunDir::open(tmp.path()).unwrap();
        let found = {
            let groups: &mut [(&str, &mut dyn Optimizer<Cpu>)] = &mut [("opt", &mut sharded)];
            run::resume_sharded(&run_dir, model, &units, groups, &json!({}), &dev, &[])
                .unwrap()
                .unwrap()
        };
        assert_eq!(found.step, 2);
        // Released, every block's share compact, and no block whole.
        assert!(!units.is_held());
        for share in sharded.shards() {
            assert_eq!(share.value().storage().len(), share.numel());
        }
        let block_params = model
            .parameters()
            .iter()
            .filter(|(n, _)| n.starts_with("transformer.h."))
            .count();
        let released: usize = (0..model.config().n_layer)
            .map(|block| placeholders_in(model, block).len())
            .sum();
        assert_eq!(released, block_params);
        // Released units cannot be restored into.
        let groups: &mut [(&str, &mut dyn Optimizer<Cpu>)] = &mut [("opt", &mut sharded)];
        let released = run::resume_sharded(&run_dir, model, &units, groups, &json!({}), &dev, &[])
            .unwrap_err();
        assert!(
            matches!(released, Error::InvalidArgument { .. }),
            "{released}"
        );
        let losses: Vec<f64> = (2..4).map(|s| step(model, &mut sharded, s)).collect();
        units.gather_all().unwrap();
        (losses, bits(model))
    });
    for (rank, (losses, end)) in seen.iter().enumerate() {
        assert_eq!(*losses, plain_losses, "rank {rank}");
        assert!(*end == bits(&plain_model), "rank {rank}'s parameters");
    }
}

#[test]
fn reference_models_are_built_one_layer_at_a_time_on_sharded_ranks() {
    use tessera_core::DType;
    use tessera_nn::models::ModelKind;
    use tessera_nn::optim::{Sgd, SgdConfig};
    use tessera_nn::precision::Precision;
    for kind in [ModelKind::Mlp, ModelKind::Cnn] {
        let plain = kind.build(DType::F32, SEED, &Cpu::new()).unwrap();
        let seen = on_ranks(RANKS, |comm| {
            let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
            // Other ranks build from other seeds: rank 0's values are what every rank keeps.
            let seed = SEED + comm.rank() as u64;
            let (dtype, precision) = (DType::F32, Precision::F32);
            let model = kind
                .build_deferred(dtype, precision, seed, &Cpu::new())
                .unwrap();
            let prefixes = model.unit_prefixes();
            let valued = |model: &dyn Fn() -> Vec<(String, tessera_autograd::Var<Cpu>)>| {
                (prefixes.iter())
                    .filter(|p| {
                        let inside = format!("{p}.");
                        let params = model();
                        let mut layer = params.iter().filter(|(n, _)| n.starts_with(&inside));
                        layer.all(|(_, v)| !is_placeholder(&v.value()))
                    })
                    .count()
            };
            assert_eq!(valued(&|| model.parameters()), 0, "{kind:?}");
            // Run before its values, it refuses by name instead of computing with zeros.
            let batch_of_one: Vec<usize> = std::iter::once(1).chain(kind.sample_dims()).collect();
            let x = tessera_core::Tensor::zeros(batch_of_one, dtype, &Cpu::new()).unwrap();
            let refused = model
                .forward(&tessera_autograd::Var::constant(x))
                .unwrap_err();
            assert!(refused.to_string().contains("init_unit"), "{refused}");
            let units = ShardedUnits::new(comm.clone(), prefixes.clone()).unwrap();
            let model = model.shard_layers(units.clone()).unwrap();
            let ddp = DistributedDataParallel::new(model, comm).unwrap();
            let sgd = |p| Sgd::new(p, SgdConfig::new(0.1));
            let _sharded = ShardedOptimizer::with_units(ddp.parameters(), &units, 64, sgd).unwrap();
            let mut others_whole = Vec::new();
            units
                .initialize(&mut |unit| {
                    others_whole.push(valued(&|| ddp.parameters()));
                    kind.init_unit(&ddp, dtype, precision, seed, unit)
                })
                .unwrap();
            assert_eq!(valued(&|| ddp.parameters()), 0, "{kind:?}");
            let past = kind.init_unit(&ddp, dtype, precision, seed, prefixes.len());
            assert!(
                matches!(past, Err(Error::InvalidArgument { .. })),
                "{past:?}"
            );
            // A module without parameters is not this model: refused, not a silent no-op.
            let relu = tessera_nn::layers::ReLU::new();
            let none = kind.init_unit::<Cpu>(&relu, dtype, precision, seed, 0);
            assert!(
                matches!(none, Err(Error::InvalidArgument { .. })),
                "{none:?}"
            );
            units.gather_all().unwrap();
            let values: Vec<Vec<u32>> = (ddp.parameters().iter())
                .map(|(_, v)| v.value().to_vec::<f32>().unwrap())
                .map(|v| v.into_iter().map(f32::to_bits).collect())
                .collect();
            (others_whole, values)
        });
        let want: Vec<Vec<u32>> = (plain.parameters().iter())
            .map(|(_, v)| v.value().to_vec::<f32>().unwrap())
            .map(|v| v.into_iter().map(f32::to_bits).collect())
            .collect();
        for (rank, (others_whole, values)) in seen.iter().enumerate() {
            assert!(others_whole.iter().all(|&n| n == 0), "{kind:?} rank {rank}");
            assert!(*values == want, "{kind:?}, rank {rank}'s parameters");
        }
    }
}
