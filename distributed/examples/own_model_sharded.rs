//! A model of your own trained at sharding level 3 (FSDP) over MPI, built without any rank
//! holding it whole: its constructor builds each block through `DeferredUnits::unit`, its
//! forward pass runs each block through a `UnitSlot`, and `DeferredUnits::initialize` gives
//! the blocks their values one at a time, each rank keeping its shares.
//!
//! ```text
//! cargo build --release -p tessera-distributed --features mpi --example own_model_sharded
//! mpirun --oversubscribe -np 4 target/release/examples/own_model_sharded [--plain] \
//!     [--blocks 8] [--width 1024] [--steps 3]
//! ```
//!
//! `--plain` builds the same model whole on every rank first (`DeferredUnits::immediate`), then
//! shards it (`ShardedUnits::release_all`): the same training, bit for bit, at the cost of a
//! whole model per rank at the start. Each rank prints one JSON line: its last loss, a hash of
//! the trained parameters' bits (gathered), the seconds to build and shard the model and to
//! train it, and its peak resident memory (`VmHWM`) once the model is built and sharded and
//! after training.

use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{Backend, DType, Error, Generator, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_distributed::{Bootstrap, MpiCommunicator};
use tessera_nn::distributed::{
    Communicator, DeferredUnits, DistributedDataParallel, ShardedOptimizer, ShardedUnits, UnitSlot,
};
use tessera_nn::layers::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::{Forward, Module};

/// Input features and classes of the synthetic task.
const FEATURES: usize = 16;
const CLASSES: usize = 4;
/// Samples per rank and step.
const BATCH: usize = 8;

/// A pre-norm residual MLP block: `x + fc2(gelu(fc1(norm(x))))`.
#[derive(Module, Clone)]
struct Block<B: Backend> {
    norm: LayerNorm<B>,
    fc1: Linear<B>,
    fc2: Linear<B>,
}

impl<B: Backend> Block<B> {
    fn new(dev: &B, width: usize, g: &mut Generator) -> Result<Self> {
        Ok(Block {
            norm: LayerNormConfig::new(vec![width]).init(dev)?,
            fc1: LinearConfig::new(width, 4 * width).init(dev, g)?,
            fc2: LinearConfig::new(4 * width, width).init(dev, g)?,
        })
    }
}

impl<B: Backend> Forward<B> for Block<B> {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let h = self.fc1.forward(&self.norm.forward(x)?)?.gelu()?;
        x.add(&self.fc2.forward(&h)?)
    }
}

/// The model: an input projection, the blocks (the sharded units) and a head.
#[derive(Module)]
struct Net<B: Backend> {
    embed: Linear<B>,
    blocks: Vec<Block<B>>,
    head: Linear<B>,
    units: UnitSlot<B>,
}

impl<B: Backend> Net<B> {
    /// One constructor for both builds: `units` says whether the blocks get values now.
    fn new<'a>(
        dev: &'a B,
        blocks: usize,
        width: usize,
        g: &mut Generator,
        units: &mut DeferredUnits<'a, B>,
    ) -> Result<Self> {
        let embed = LinearConfig::new(FEATURES, width).init(dev, g)?;
        let blocks = (0..blocks)
            .map(|i| units.unit(format!("blocks.{i}"), g, move |g| Block::new(dev, width, g)))
            .collect::<Result<_>>()?;
        let head = LinearConfig::new(width, CLASSES).init(dev, g)?;
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

/// This rank's batch of step `step`: features drawn from a seed, the class the index of the
/// largest of the first `CLASSES` features.
fn batch(rank: usize, step: usize, dev: &Cpu) -> Result<(Var<Cpu>, Tensor<Cpu>)> {
    let seed = (rank * 1_000 + step) as u64;
    let x = Tensor::randn([BATCH, FEATURES], DType::F32, seed, dev)?;
    let values = x.to_vec::<f32>()?;
    let y: Vec<i64> = values
        .chunks(FEATURES)
        .map(|row| {
            let first = &row[..CLASSES];
            (0..CLASSES).fold(0, |best, c| if first[c] > first[best] { c } else { best }) as i64
        })
        .collect();
    Ok((Var::constant(x), Tensor::from_vec(y, [BATCH], dev)?))
}

/// The largest resident set this process has had, in bytes (`VmHWM`).
fn peak_rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|kb| kb.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

/// FNV-1a over every parameter's f32 bits, in order.
fn parameter_hash(model: &impl Module<Cpu>) -> Result<u64> {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for (_, v) in model.parameters() {
        for x in v.value().to_vec::<f32>()? {
            for byte in x.to_bits().to_le_bytes() {
                hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
            }
        }
    }
    Ok(hash)
}

/// `--name value` from the command line, or `default`.
fn option(args: &[String], name: &str, default: usize) -> Result<usize> {
    match args.iter().position(|a| a == name) {
        None => Ok(default),
        Some(i) => {
            (args.get(i + 1).and_then(|v| v.parse().ok())).ok_or_else(|| Error::InvalidArgument {
                op: "own_model_sharded",
                msg: format!("{name} takes a number"),
            })
        }
    }
}

fn run() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let plain = args.iter().any(|a| a == "--plain");
    let (blocks, width) = (
        option(&args, "--blocks", 8)?,
        option(&args, "--width", 1024)?,
    );
    let steps = option(&args, "--steps", 3)?;
    // Keep freed tensor memory in the process, as `train` does: each step gathers and frees
    // every block's parameters and gradients.
    tessera_cpu::tune_allocator();
    let mpi = Arc::new(MpiCommunicator::init()?);
    let rank = Bootstrap::rank(&*mpi);
    let comm: Arc<dyn Communicator<Cpu>> = mpi;
    let dev = Cpu::new();

    let t0 = std::time::Instant::now();
    let mut deferred = match plain {
        true => DeferredUnits::immediate(),
        false => DeferredUnits::deferred(),
    };
    let model = Net::new(&dev, blocks, width, &mut Generator::new(7), &mut deferred)?;
    let ddp = DistributedDataParallel::new(model, comm.clone())?;
    let model = ddp.module();
    let units = ShardedUnits::new(comm.clone(), deferred.prefixes())?;
    let mut optimizer = ShardedOptimizer::with_units(model.parameters(), &units, 16 << 20, |s| {
        AdamW::new(s, AdamWConfig::new(1e-3))
    })?;
    model.units.install(units.clone(), deferred.len())?;
    match plain {
        true => units.release_all()?,
        false => deferred.initialize(&units, model)?,
    }

    let build_seconds = t0.elapsed().as_secs_f64();
    let init_peak = peak_rss_bytes();
    let mut loss = f64::NAN;
    for step in 0..steps {
        let (x, y) = batch(rank, step, &dev)?;
        optimizer.zero_grad();
        let l = cross_entropy(&model.forward(&x)?, &y)?;
        l.backward()?;
        optimizer.step()?;
        loss = l.value().to_scalar_f64()?;
    }
    let train_seconds = t0.elapsed().as_secs_f64() - build_seconds;
    let peak = peak_rss_bytes();
    units.gather_all()?;
    println!(
        "{{\"rank\":{rank},\"deferred\":{},\"parameters\":{},\"last_loss\":{loss},\
         \"parameter_hash\":\"{:016x}\",\"build_seconds\":{build_seconds:.3},\
         \"train_seconds\":{train_seconds:.3},\"init_peak_rss_bytes\":{init_peak},\
         \"peak_rss_bytes\":{peak}}}",
        !plain,
        model.num_parameters(),
        parameter_hash(model)?
    );
    Ok(())
}

fn main() {
    if let Err(e) = run() {
        eprintln!("own_model_sharded: error: {e}");
        std::process::exit(1);
    }
}
