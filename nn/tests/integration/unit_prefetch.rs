//! `ShardedUnits::set_prefetch`: a GPT's blocks sharded over two thread ranks train bit for bit
//! as without prefetch (with evaluation passes between backward and the step), and in the
//! steady state all but two of a step's gathers per optimizer group are started ahead; a
//! gather started before an optimizer step is not used after it. The same over real MPI processes (whose gathers run on a
//! thread) is `distributed/tests/mpi_ranks.rs`'s `3p` level.

use crate::thread_comm::{on_ranks, ThreadComm};
use std::sync::{Arc, Mutex};
use tessera_autograd::{no_grad, Var};
use tessera_core::{Generator, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::distributed::{
    Communicator, LocalCommunicator, PendingCollective, Reduction, ShardedOptimizer, ShardedUnits,
};
use tessera_nn::gpt::{Gpt, GptConfig};
use tessera_nn::layers::{Linear, LinearConfig};
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::{Forward, Module};

/// How many gathers a rank made each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Gathers {
    /// `all_gather` calls (the unit waits for them).
    blocking: usize,
    /// `start_all_gather` calls (prefetches).
    started: usize,
}

/// A communicator that counts the gathers it forwards to `inner`.
struct Counting {
    inner: ThreadComm,
    counts: Mutex<Gathers>,
}

impl Communicator<Cpu> for Counting {
    fn rank(&self) -> usize {
        Communicator::<Cpu>::rank(&self.inner)
    }
    fn world_size(&self) -> usize {
        Communicator::<Cpu>::world_size(&self.inner)
    }
    fn library(&self) -> &'static str {
        "counting"
    }
    fn all_reduce(&self, tensor: &mut Tensor<Cpu>, op: Reduction) -> Result<()> {
        self.inner.all_reduce(tensor, op)
    }
    fn broadcast(&self, tensor: &mut Tensor<Cpu>, root: usize) -> Result<()> {
        self.inner.broadcast(tensor, root)
    }
    fn barrier(&self) -> Result<()> {
        Communicator::<Cpu>::barrier(&self.inner)
    }
    fn all_reduce_host(&self, values: &mut [f64], op: Reduction) -> Result<()> {
        Communicator::<Cpu>::all_reduce_host(&self.inner, values, op)
    }
    fn all_gather(&self, shard: &Tensor<Cpu>) -> Result<Tensor<Cpu>> {
        self.counts.lock().unwrap().blocking += 1;
        self.inner.all_gather(shard)
    }
    fn start_all_gather(self: Arc<Self>, shard: &Tensor<Cpu>) -> Result<PendingCollective<Cpu>> {
        self.counts.lock().unwrap().started += 1;
        Ok(PendingCollective::ready(self.inner.all_gather(shard)?))
    }
}

const BLOCKS: usize = 3;
const STEPS: u64 = 4;

fn gpt(dev: &Cpu) -> Gpt<Cpu> {
    GptConfig::new(BLOCKS, 2, 16, 8, 11)
        .dropout(0.2)
        .init(dev, &mut Generator::new(9))
        .unwrap()
}

fn adamw(params: Vec<(String, Var<Cpu>)>) -> Result<AdamW<Cpu>> {
    AdamW::new(params, AdamWConfig::new(0.01))
}

/// Rank `comm`'s run: `STEPS` steps on rank-dependent windows, each with two evaluation passes
/// between backward and the step. Returns the parameters' bits at the end and the gathers of
/// each step.
fn train(comm: ThreadComm, prefetch: bool) -> (Vec<u32>, Vec<Gathers>) {
    let dev = Cpu::new();
    let rank = comm.rank;
    let counting = Arc::new(Counting {
        inner: comm,
        counts: Mutex::new(Gathers::default()),
    });
    let model = gpt(&dev);
    model.train();
    let units = ShardedUnits::new(counting.clone(), model.block_prefixes()).unwrap();
    units.set_prefetch(prefetch);
    assert_eq!(units.prefetches(), prefetch);
    let mut optimizer =
        ShardedOptimizer::with_units(model.parameters(), &units, 64, adamw).unwrap();
    model.shard_blocks(units.clone()).unwrap();
    units.release_all().unwrap();
    let mut per_step = Vec::new();
    for step in 0..STEPS {
        let before = *counting.counts.lock().unwrap();
        let tokens: Vec<i64> = (0..2 * 9)
            .map(|i| ((i as u64 * 7 + step + rank as u64 * 3) % 11) as i64)
            .collect();
        let all = Tensor::from_vec(tokens, [2, 9], &dev).unwrap();
        let x = all.narrow(1, 0, 8).unwrap().contiguous().unwrap();
        let y = all.narrow(1, 1, 8).unwrap().contiguous().unwrap();
        optimizer.zero_grad();
        model.loss(&x, &y).unwrap().backward().unwrap();
        let after_backward = *counting.counts.lock().unwrap();
        per_step.push(Gathers {
            blocking: after_backward.blocking - before.blocking,
            started: after_backward.started - before.started,
        });
        for _ in 0..2 {
            no_grad(|| model.loss(&x, &y)).unwrap();
        }
        optimizer.step().unwrap();
    }
    units.gather_all().unwrap();
    let bits = model
        .parameters()
        .iter()
        .flat_map(|(_, v)| v.value().to_vec::<f32>().unwrap())
        .map(f32::to_bits)
        .collect();
    (bits, per_step)
}

#[test]
fn prefetched_gathers_train_bit_for_bit_and_replace_all_but_two_blocking_gathers_per_group() {
    let plain = on_ranks(2, |comm| train(comm, false));
    let prefetched = on_ranks(2, |comm| train(comm, true));
    // Both ranks agree, and prefetch changes no bit (a stale prefetch used after a step would).
    assert_eq!(plain[0].0, plain[1].0);
    assert_eq!(prefetched[0].0, plain[0].0);
    assert_eq!(prefetched[1].0, plain[0].0);

    // Without prefetch every unit is gathered for forward and again for backward, one gather
    // per optimizer group of the unit.
    let per_step = plain[0].1[0];
    assert_eq!(per_step.started, 0);
    assert_eq!(per_step.blocking % (2 * BLOCKS), 0);
    let groups = per_step.blocking / (2 * BLOCKS);
    assert!(groups >= 1);
    let counts = &prefetched[0].1;
    // The first forward pass learns the order, which its backward pass already uses.
    assert_eq!(
        counts[0],
        Gathers {
            blocking: (BLOCKS + 1) * groups,
            started: (BLOCKS - 1) * groups,
        }
    );
    // From then on the first forward unit and the first backward unit wait; the rest were
    // started ahead (a wasted prefetch would show as a blocking gather too, as every gather
    // of a unit that the prefetch did not serve is).
    for (step, gathers) in counts.iter().enumerate().skip(1) {
        assert_eq!(
            *gathers,
            Gathers {
                blocking: 2 * groups,
                started: 2 * (BLOCKS - 1) * groups,
            },
            "step {step}"
        );
    }
}

#[test]
fn a_gather_started_before_an_optimizer_step_is_not_used_after_it() -> Result<()> {
    let dev = Cpu::new();
    let mut g = Generator::new(4);
    let a: Linear<Cpu> = LinearConfig::new(4, 4).init(&dev, &mut g)?;
    let b: Linear<Cpu> = LinearConfig::new(4, 3).init(&dev, &mut g)?;
    let comm: Arc<dyn Communicator<Cpu>> = Arc::new(LocalCommunicator::new());
    let units = ShardedUnits::new(comm, vec!["a".into(), "b".into()])?;
    units.set_prefetch(true);
    let named = |prefix: &str, layer: &Linear<Cpu>| -> Vec<(String, Var<Cpu>)> {
        let params = layer.parameters().into_iter();
        params.map(|(n, v)| (format!("{prefix}.{n}"), v)).collect()
    };
    let mut params = named("a", &a);
    params.extend(named("b", &b));
    let mut optimizer = ShardedOptimizer::with_units(params, &units, 64, adamw)?;
    units.release_all()?;
    let x = Var::constant(Tensor::from_f64_values(
        &(0..8).map(|i| i as f64 / 4.0 - 1.0).collect::<Vec<_>>(),
        [2, 4],
        tessera_core::DType::F32,
        &dev,
    )?);
    // A training pass teaches the order a, b.
    let hidden = units.run(0, &x, &a)?;
    units.run(1, &hidden, &b)?.sum_all()?.backward()?;
    optimizer.step()?;
    // Running `a` starts `b`'s gather; a step (with the same gradients) then replaces `b`'s
    // shares before `b` runs.
    let hidden = no_grad(|| units.run(0, &x, &a))?;
    optimizer.step()?;
    let out = no_grad(|| units.run(1, &hidden, &b))?.value();
    units.gather_all()?;
    let want = no_grad(|| b.forward(&hidden))?.value();
    assert_eq!(out.to_vec::<f32>()?, want.to_vec::<f32>()?);
    Ok(())
}
