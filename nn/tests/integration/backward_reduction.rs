//! Gradients reduced during the backward pass (`ShardedOptimizer::set_reduce_during_backward`,
//! on by default at level 2) over thread ranks with different batches: the parameters come out
//! bit for bit as when reducing after the pass and as at level 1 (an all-reduce); the whole
//! gradients are gone before the step, and fewer of them were ever held at once; a pass that
//! does not reach some parameters, and two passes before a step, still give the step the
//! ranks' mean gradient.

use crate::thread_comm::{on_ranks, ThreadComm};
use std::sync::Arc;
use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::distributed::{Communicator, ShardLevel, ShardedOptimizer};
use tessera_nn::layers::{Linear, LinearConfig};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{AdamW, AdamWConfig, Optimizer};
use tessera_nn::{Forward, Module};

/// Buckets of a few parameters each: `[b2, w2]`, `[b1]`, `[w1]`.
const BUCKET_BYTES: usize = 256;

/// Two layers, 6 -> 8 -> 3, in f64.
struct Net {
    l1: Linear<Cpu>,
    l2: Linear<Cpu>,
}

impl Net {
    fn new(seed: u64) -> Net {
        let (dev, mut g) = (Cpu::new(), Generator::new(seed));
        let mut linear = |i, o| {
            LinearConfig::new(i, o)
                .dtype(DType::F64)
                .init(&dev, &mut g)
                .unwrap()
        };
        Net {
            l1: linear(6, 8),
            l2: linear(8, 3),
        }
    }

    fn params(&self) -> Vec<(String, Var<Cpu>)> {
        let named = |prefix: &str, m: &Linear<Cpu>| {
            m.parameters()
                .into_iter()
                .map(|(n, v)| (format!("{prefix}.{n}"), v))
                .collect::<Vec<_>>()
        };
        [named("l1", &self.l1), named("l2", &self.l2)].concat()
    }

    fn bits(&self) -> Vec<u64> {
        self.params()
            .iter()
            .flat_map(|(_, v)| v.value().to_vec_f64().unwrap())
            .map(f64::to_bits)
            .collect()
    }

    /// This rank's loss on its own batch of step `step`; with `freeze_first` the first layer
    /// is cut from the graph (the pass reaches only the second).
    fn loss(&self, step: u64, rank: usize, freeze_first: bool) -> Var<Cpu> {
        let dev = Cpu::new();
        let seed = 1000 + 10 * step + rank as u64;
        let x = Tensor::randn([5, 6], DType::F64, seed, &dev).unwrap();
        let y: Vec<i64> = (0..5)
            .map(|i| (i + step as i64 + rank as i64) % 3)
            .collect();
        let y = Tensor::from_vec(y, [5], &dev).unwrap();
        let mut h = self.l1.forward(&Var::constant(x)).unwrap().tanh().unwrap();
        if freeze_first {
            h = h.detach();
        }
        cross_entropy(&self.l2.forward(&h).unwrap(), &y).unwrap()
    }
}

fn adamw(params: Vec<(String, Var<Cpu>)>) -> tessera_core::Result<AdamW<Cpu>> {
    AdamW::new(params, AdamWConfig::new(0.05))
}

#[derive(Clone, Copy, Debug)]
enum Way {
    /// Level 2, reduced during backward (the default).
    During,
    /// Level 2, reduced during backward, each reduction started and settled at the step
    /// (the test communicator runs it only then).
    Overlapped,
    /// Level 2, reduced after backward.
    After,
    /// Level 1: all-reduced after backward.
    LevelOne,
}

/// Trains 4 steps on 3 ranks (step 1 only reaches the second layer, step 2 takes two passes
/// when `two_passes`); every rank's parameter bits, the most bytes of gradients held at once
/// (whole ones and reduced shares), and the whole gradients left at the end of the last pass.
fn train(way: Way, two_passes: bool) -> Vec<(Vec<u64>, Option<usize>, usize)> {
    on_ranks(3, |comm: ThreadComm| {
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let net = Net::new(3);
        let level = match way {
            Way::LevelOne => ShardLevel::OptimizerState,
            _ => ShardLevel::Gradients,
        };
        let mut opt =
            ShardedOptimizer::new(net.params(), comm.clone(), level, BUCKET_BYTES, adamw).unwrap();
        if let Way::After = way {
            opt.set_reduce_during_backward(false).unwrap();
        }
        if let Way::Overlapped = way {
            opt.set_overlap_reductions(true);
        }
        let mut left = 0;
        for step in 0..4 {
            opt.zero_grad();
            let passes = if two_passes && step == 2 { 2 } else { 1 };
            for pass in 0..passes {
                let loss = net.loss(step + 7 * pass, comm.rank(), step == 1);
                loss.mul_scalar(1.0 / passes as f64)
                    .unwrap()
                    .backward()
                    .unwrap();
            }
            left = net
                .params()
                .iter()
                .filter(|(_, v)| v.grad().is_some())
                .count();
            opt.step().unwrap();
        }
        (net.bits(), opt.peak_gradient_bytes(), left)
    })
}

#[test]
fn reducing_during_backward_gives_the_same_parameters_and_holds_fewer_gradients() {
    let during = train(Way::During, false);
    let overlapped = train(Way::Overlapped, false);
    let after = train(Way::After, false);
    let level_one = train(Way::LevelOne, false);
    for rank in 0..3 {
        assert_eq!(during[rank], overlapped[rank], "rank {rank}");
        assert_eq!(during[rank].0, after[rank].0, "rank {rank}");
        assert_eq!(during[rank].0, level_one[rank].0, "rank {rank}");
        // The last step reached every parameter: none kept a whole gradient.
        assert_eq!(during[rank].2, 0);
        assert_eq!(after[rank].2, 4);
        // At most the largest bucket's whole gradients (w1: 48 values) and the reduced shares'
        // of the two buckets before it (9 + 3 values on each of 3 ranks), not all 83; measured
        // only when reduced during backward.
        assert_eq!(during[rank].1, Some((48 + 9 + 3) * 8));
        assert_eq!(after[rank].1, None);
    }
    // The ranks agree.
    assert_eq!(during[0].0, during[2].0);
}

#[test]
fn two_passes_before_a_step_add_up_their_reductions() {
    let during = train(Way::During, true);
    let overlapped = train(Way::Overlapped, true);
    let after = train(Way::After, true);
    let level_one = train(Way::LevelOne, true);
    for rank in 0..3 {
        assert_eq!(during[rank], overlapped[rank], "rank {rank}");
        // Reducing after the passes is level 1's arithmetic exactly.
        assert_eq!(after[rank].0, level_one[rank].0);
        // Each pass reduced on its own: the same sums, rounded otherwise.
        let (a, b): (Vec<f64>, Vec<f64>) = (
            during[rank].0.iter().map(|&x| f64::from_bits(x)).collect(),
            after[rank].0.iter().map(|&x| f64::from_bits(x)).collect(),
        );
        for (x, y) in a.iter().zip(&b) {
            assert!((x - y).abs() <= 1e-12 * (1.0 + y.abs()), "{x} vs {y}");
        }
    }
}

#[test]
fn level_one_refuses_to_reduce_during_backward_and_dropping_the_optimizer_removes_its_hooks() {
    let comm: Arc<dyn Communicator<Cpu>> =
        Arc::new(tessera_nn::distributed::LocalCommunicator::new());
    let net = Net::new(1);
    let level = ShardLevel::OptimizerState;
    let mut opt = ShardedOptimizer::new(net.params(), comm.clone(), level, 256, adamw).unwrap();
    assert!(!opt.reduces_during_backward());
    let err = opt.set_reduce_during_backward(true).unwrap_err();
    assert!(err.to_string().contains("level 1"), "{err}");
    let level = ShardLevel::Gradients;
    let opt = ShardedOptimizer::new(net.params(), comm, level, 256, adamw).unwrap();
    assert!(opt.reduces_during_backward());
    assert!(net
        .params()
        .iter()
        .all(|(_, v)| v.grad_ready_hook().is_some()));
    drop(opt);
    assert!(net
        .params()
        .iter()
        .all(|(_, v)| v.grad_ready_hook().is_none()));
    // Without an optimizer, backward leaves the whole gradients as usual.
    net.loss(0, 0, false).backward().unwrap();
    assert!(net.params().iter().all(|(_, v)| v.grad().is_some()));
}
