//! A user's own model built for level 3 without holding it whole (`DeferredUnits`): its
//! constructor builds each block through `DeferredUnits::unit`; deferred, the blocks are
//! placeholders until `DeferredUnits::initialize` gives each its values in turn, after which
//! the model is the plain build's bit for bit and trains at level 3 as the plain build does.

use crate::gpt_steps::{bits, is_placeholder};
use crate::thread_comm::on_ranks;
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, Error, Generator, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::distributed::{
    Communicator, DeferredUnits, DistributedDataParallel, ShardedOptimizer, ShardedUnits, UnitSlot,
};
use tessera_nn::layers::{Dropout, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::{Forward, Module};

const RANKS: usize = 3;
const SEED: u64 = 5;
const WIDTH: usize = 8;
const BLOCKS: usize = 3;

/// A residual block of the user's: `x + dropout(fc2(gelu(fc1(norm(x)))))`.
#[derive(Module, Clone)]
struct Block<B: Backend> {
    norm: LayerNorm<B>,
    fc1: Linear<B>,
    fc2: Linear<B>,
    drop: Dropout,
}

impl<B: Backend> Forward<B> for Block<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let h = self.fc1.forward(&self.norm.forward(x)?)?.gelu()?;
        x.add(&self.drop.forward(&self.fc2.forward(&h)?)?)
    }
}

/// The user's model: an input projection, blocks (the units) and a head.
#[derive(Module)]
struct Net<B: Backend> {
    embed: Linear<B>,
    blocks: Vec<Block<B>>,
    head: Linear<B>,
    units: UnitSlot<B>,
}

impl<B: Backend> Net<B> {
    /// The model's one constructor, deferred or not as `units` says.
    fn new<'a>(
        dev: &'a B,
        dropout: f64,
        g: &mut Generator,
        units: &mut DeferredUnits<'a, B>,
    ) -> Result<Self> {
        let embed = LinearConfig::new(5, WIDTH).init(dev, g)?;
        let blocks = (0..BLOCKS)
            .map(|i| {
                units.unit(format!("blocks.{i}"), g, move |g| {
                    Ok(Block {
                        norm: LayerNormConfig::new(vec![WIDTH]).init(dev)?,
                        fc1: LinearConfig::new(WIDTH, 2 * WIDTH).init(dev, g)?,
                        fc2: LinearConfig::new(2 * WIDTH, WIDTH).init(dev, g)?,
                        drop: Dropout::with_generator(dropout, g.fork())?,
                    })
                })
            })
            .collect::<Result<_>>()?;
        let head = LinearConfig::new(WIDTH, 3).init(dev, g)?;
        Ok(Net {
            embed,
            blocks,
            head,
            units: UnitSlot::new(),
        })
    }
}

impl<B: Backend> Forward<B> for Net<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let mut x = self.embed.forward(x)?;
        for (i, block) in self.blocks.iter().enumerate() {
            x = self.units.run(i, &x, block)?;
        }
        self.head.forward(&x)
    }
}

/// Four samples of 5 features and their classes, drawn from `seed`.
fn batch(seed: u64, dev: &Cpu) -> (Var<Cpu>, Tensor<Cpu>) {
    let x: Vec<f32> = (0..20)
        .map(|i| ((i * 7 + seed as usize * 3) % 11) as f32 / 11.0 - 0.4)
        .collect();
    let y: Vec<i64> = (0..4).map(|i| ((i + seed as usize) % 3) as i64).collect();
    (
        Var::constant(Tensor::from_vec(x, [4, 5], dev).unwrap()),
        Tensor::from_vec(y, [4], dev).unwrap(),
    )
}

/// One optimizer step on `batch(seed)`: the loss.
fn step(model: &Net<Cpu>, optimizer: &mut dyn Optimizer<Cpu>, seed: u64) -> f64 {
    let (x, y) = batch(seed, &Cpu::new());
    optimizer.zero_grad();
    let loss = cross_entropy(&model.forward(&x).unwrap(), &y).unwrap();
    loss.backward().unwrap();
    optimizer.step().unwrap();
    loss.value().to_scalar_f64().unwrap()
}

fn adamw(params: Vec<(String, Var<Cpu>)>) -> Result<AdamW<Cpu>> {
    AdamW::new(params, AdamWConfig::new(0.01))
}

/// The names of block `block`'s parameters that hold placeholders.
fn placeholders_in(model: &Net<Cpu>, block: usize) -> Vec<String> {
    let inside = format!("blocks.{block}.");
    (model.parameters().into_iter())
        .filter(|(n, v)| n.starts_with(&inside) && is_placeholder(&v.value()))
        .map(|(n, _)| n)
        .collect()
}

#[test]
fn a_deferred_build_of_a_users_model_gets_the_plain_builds_values_unit_by_unit() {
    let dev = Cpu::new();
    let plain = Net::new(
        &dev,
        0.5,
        &mut Generator::new(SEED),
        &mut DeferredUnits::immediate(),
    )
    .unwrap();
    let mut units = DeferredUnits::deferred();
    let model = Net::new(&dev, 0.5, &mut Generator::new(SEED), &mut units).unwrap();
    assert_eq!(units.prefixes(), ["blocks.0", "blocks.1", "blocks.2"]);
    // Each block's two matrices and two biases are placeholders; the head, drawn after the
    // blocks, has the plain build's values.
    for block in 0..BLOCKS {
        assert_eq!(placeholders_in(&model, block).len(), 4, "block {block}");
    }
    let head = |m: &Net<Cpu>| m.head.weight().value().to_vec::<f32>().unwrap();
    assert_eq!(head(&model), head(&plain));

    // Run before its values, a unit refuses (through one-rank sharded units, held whole).
    let one = ShardedUnits::new(
        Arc::new(tessera_nn::distributed::LocalCommunicator::new()),
        units.prefixes(),
    )
    .unwrap();
    model.units.install(one.clone(), BLOCKS).unwrap();
    let (x, _) = batch(0, &dev);
    let refused = model.forward(&x).unwrap_err();
    assert!(
        matches!(refused, Error::InvalidArgument { .. }),
        "{refused}"
    );
    assert!(
        refused.to_string().contains("blocks.0.fc1.weight"),
        "{refused}"
    );

    units.init_unit(&model, 1).unwrap();
    assert!(placeholders_in(&model, 1).is_empty());
    assert_eq!(placeholders_in(&model, 0).len(), 4);
    let past = units.init_unit(&model, BLOCKS).unwrap_err();
    assert!(matches!(past, Error::InvalidArgument { .. }), "{past}");
    units.init_all(&model).unwrap();
    assert!(bits(&model) == bits(&plain));
    // The dropout streams are the plain build's too: the same outputs in training mode.
    let (x, _) = batch(1, &dev);
    let run = |m: &Net<Cpu>| m.forward(&x).unwrap().value().to_vec::<f32>().unwrap();
    assert_eq!(run(&model), run(&plain));

    // A prefix the model does not have, or a build that differs from the model's, is refused.
    let mut wrong = DeferredUnits::deferred();
    let mut g = Generator::new(SEED);
    let _: Linear<Cpu> = wrong
        .unit("blocks.9", &mut g, |g| {
            LinearConfig::new(2, 2).init(&dev, g)
        })
        .unwrap();
    let _: Linear<Cpu> = wrong
        .unit("head", &mut g, |g| LinearConfig::new(2, 2).init(&dev, g))
        .unwrap();
    let missing = wrong.init_unit(&model, 0).unwrap_err().to_string();
    assert!(missing.contains("blocks.9.weight"), "{missing}");
    let shape = wrong.init_unit(&model, 1).unwrap_err().to_string();
    assert!(shape.contains("head.weight"), "{shape}");
    let repeated = wrong.unit("head", &mut g, |g| LinearConfig::new(2, 2).init(&dev, g));
    assert!(matches!(repeated, Err(Error::InvalidArgument { .. })));
}

/// What one rank saw.
struct Seen {
    /// For each unit's `init`: how many other units held values meanwhile.
    others_whole: Vec<usize>,
    losses: Vec<f64>,
    /// Every parameter after the initialisation and after training (gathered).
    start: Vec<(String, Vec<u32>)>,
    end: Vec<(String, Vec<u32>)>,
}

#[test]
fn sharded_ranks_build_a_users_model_one_unit_at_a_time_and_train_as_the_plain_model() {
    let dev = Cpu::new();
    // Without dropout: each rank draws its own masks.
    let plain_model = Net::new(
        &dev,
        0.0,
        &mut Generator::new(SEED),
        &mut DeferredUnits::immediate(),
    )
    .unwrap();
    let plain_start = bits(&plain_model);
    let mut plain = adamw(plain_model.parameters()).unwrap();
    let plain_losses: Vec<f64> = (0..3).map(|s| step(&plain_model, &mut plain, s)).collect();

    let seen = on_ranks(RANKS, |comm| {
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let dev = Cpu::new();
        // Other ranks draw from other seeds: rank 0's model is the one every rank trains.
        let mut deferred = DeferredUnits::deferred();
        let seed = SEED + comm.rank() as u64;
        let model = Net::new(&dev, 0.0, &mut Generator::new(seed), &mut deferred).unwrap();
        let ddp = DistributedDataParallel::new(model, comm.clone()).unwrap();
        let model = ddp.module();
        let units = ShardedUnits::new(comm, deferred.prefixes()).unwrap();
        let mut sharded =
            ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        model.units.install(units.clone(), BLOCKS).unwrap();
        let mut others_whole = Vec::new();
        units
            .initialize(&mut |unit| {
                others_whole.push(
                    (0..BLOCKS)
                        .filter(|&b| b != unit && placeholders_in(model, b).is_empty())
                        .count(),
                );
                deferred.init_unit(model, unit)
            })
            .unwrap();
        assert!(!units.is_held());
        units.gather_all().unwrap();
        let start = bits(model);
        units.release_all().unwrap();
        let losses = (0..3).map(|s| step(model, &mut sharded, s)).collect();
        units.gather_all().unwrap();
        let end = bits(model);
        // Units made from other prefixes are refused before anything moves.
        let other = ShardedUnits::new(units.communicator().clone(), vec!["embed".into()]).unwrap();
        let refused = deferred.initialize(&other, model).unwrap_err();
        assert!(
            matches!(refused, Error::InvalidArgument { .. }),
            "{refused}"
        );
        Seen {
            others_whole,
            losses,
            start,
            end,
        }
    });
    for (rank, seen) in seen.iter().enumerate() {
        assert_eq!(seen.others_whole, vec![0; BLOCKS], "rank {rank}");
        assert!(
            seen.start == plain_start,
            "rank {rank}'s initial parameters"
        );
        assert_eq!(seen.losses, plain_losses, "rank {rank}");
        assert!(seen.end == bits(&plain_model), "rank {rank}'s parameters");
    }
}

#[test]
fn the_convenience_initialize_matches_the_per_unit_closure() {
    let seen = on_ranks(2, |comm| {
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let dev = Cpu::new();
        let mut deferred = DeferredUnits::deferred();
        let model = Net::new(&dev, 0.0, &mut Generator::new(SEED), &mut deferred).unwrap();
        let units = ShardedUnits::new(comm, deferred.prefixes()).unwrap();
        let _sharded = ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        deferred.initialize(&units, &model).unwrap();
        units.gather_all().unwrap();
        bits(&model)
    });
    let dev = Cpu::new();
    let plain = Net::new(
        &dev,
        0.0,
        &mut Generator::new(SEED),
        &mut DeferredUnits::immediate(),
    )
    .unwrap();
    for got in seen {
        assert!(got == bits(&plain));
    }
}

#[test]
fn a_users_deferred_model_resumes_at_level_three_one_unit_at_a_time() {
    use serde_json::json;
    use tessera_nn::run::{self, RunDir};
    let dev = Cpu::new();
    let tmp = tempfile::tempdir().unwrap();
    // The plain model: 2 steps, a checkpoint, 2 more steps.
    let plain_model = Net::new(
        &dev,
        0.0,
        &mut Generator::new(SEED),
        &mut DeferredUnits::immediate(),
    )
    .unwrap();
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
        // Another seed: the checkpoint replaces every value; no unit is ever drawn.
        let mut deferred = DeferredUnits::deferred();
        let model = Net::new(&dev, 0.0, &mut Generator::new(SEED + 9), &mut deferred).unwrap();
        let units = ShardedUnits::new(comm, deferred.prefixes()).unwrap();
        let mut sharded =
            ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
        model.units.install(units.clone(), BLOCKS).unwrap();
        let run_dir = RunDir::open(tmp.path()).unwrap();
        let groups: &mut [(&str, &mut dyn Optimizer<Cpu>)] = &mut [("opt", &mut sharded)];
        let found = run::resume_sharded(&run_dir, &model, &units, groups, &json!({}), &dev, &[])
            .unwrap()
            .unwrap();
        assert_eq!(found.step, 2);
        assert!(!units.is_held());
        let released: usize = (0..BLOCKS).map(|b| placeholders_in(&model, b).len()).sum();
        let unit_params = (model.parameters().iter())
            .filter(|(n, _)| n.starts_with("blocks."))
            .count();
        assert_eq!(released, unit_params, "every unit parameter released");
        let losses: Vec<f64> = (2..4).map(|s| step(&model, &mut sharded, s)).collect();
        units.gather_all().unwrap();
        (losses, bits(&model))
    });
    for (rank, (losses, end)) in seen.iter().enumerate() {
        assert_eq!(*losses, plain_losses, "rank {rank}");
        assert!(*end == bits(&plain_model), "rank {rank}'s parameters");
    }
}
