//! Data-parallel training without MPI: the sampler's shards, the bucket plan, and
//! `DistributedDataParallel` over a group of threads (an in-test communicator that exchanges
//! host copies and reduces them in rank order), checked against plain single-process training.
//! The same properties are checked across real processes over MPI in `tessera-distributed`.

use crate::thread_comm::on_ranks;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use tessera_autograd::Var;
use tessera_core::{CommFailure, DType, Error, Generator, HostData, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::data::shuffle::epoch_permutation;
use tessera_nn::distributed::{
    plan_buckets, save_on_rank0, Communicator, DdpConfig, DistributedDataParallel,
    DistributedSampler, LocalCommunicator, Reduction,
};
use tessera_nn::layers::{Linear, LinearConfig, ReLU, Sequential};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{Optimizer, Sgd, SgdConfig};
use tessera_nn::{Forward, Module};

// ----- the sampler -----

#[test]
fn every_rank_gets_an_equal_seeded_shard_and_together_they_cover_the_epoch() {
    for (len, world) in [(10, 1), (10, 2), (10, 3), (10, 4), (7, 7), (3, 5), (100, 6)] {
        for drop_last in [false, true] {
            let shards: Vec<Vec<usize>> = (0..world)
                .map(|r| {
                    DistributedSampler::new(len, r, world)
                        .unwrap()
                        .shuffled(9)
                        .drop_last(drop_last)
                        .indices(4)
                })
                .collect();
            let expected = if drop_last {
                len / world
            } else {
                len.div_ceil(world)
            };
            assert!(shards.iter().all(|s| s.len() == expected), "{shards:?}");
            let union: BTreeSet<usize> = shards.iter().flatten().copied().collect();
            if drop_last {
                // Only the tail of the permutation is dropped.
                let kept: BTreeSet<usize> = epoch_permutation(len, 9, 4)
                    .into_iter()
                    .take(expected * world)
                    .collect();
                assert_eq!(union, kept, "len {len}, world {world}");
            } else {
                assert_eq!(union, (0..len).collect(), "len {len}, world {world}");
            }
        }
    }
}

#[test]
fn one_rank_visits_the_loaders_order_and_epochs_and_seeds_change_it() {
    let one = DistributedSampler::new(50, 0, 1).unwrap().shuffled(3);
    assert_eq!(one.indices(2), epoch_permutation(50, 3, 2));
    assert_ne!(one.indices(2), one.indices(3));
    assert_ne!(one.indices(2), one.clone().shuffled(4).indices(2));
    let sequential = DistributedSampler::new(5, 1, 2).unwrap().sequential();
    assert_eq!(sequential.indices(0), vec![1, 3, 0]); // padded with item 0
    assert!(DistributedSampler::new(5, 2, 2).is_err());
    assert!(DistributedSampler::new(5, 0, 0).is_err());
    assert!(DistributedSampler::new(0, 0, 2)
        .unwrap()
        .indices(0)
        .is_empty());
}

#[test]
fn the_ranks_kth_batches_together_are_the_kth_batch_of_one_process() {
    let (len, world, b) = (48, 3, 4);
    let single = epoch_permutation(len, 11, 1);
    let shards: Vec<Vec<usize>> = (0..world)
        .map(|r| {
            DistributedSampler::new(len, r, world)
                .unwrap()
                .shuffled(11)
                .indices(1)
        })
        .collect();
    for k in 0..len / (world * b) {
        let together: BTreeSet<usize> = shards
            .iter()
            .flat_map(|s| s[k * b..(k + 1) * b].iter().copied())
            .collect();
        let global: BTreeSet<usize> = single[k * world * b..(k + 1) * world * b]
            .iter()
            .copied()
            .collect();
        assert_eq!(together, global, "batch {k}");
    }
}

// ----- buckets -----

#[test]
fn buckets_fill_up_to_the_capacity_in_reverse_order_one_dtype_each() {
    let params = [
        (DType::F32, 10), // 40 bytes
        (DType::F32, 5),  // 20
        (DType::F64, 2),  // 16
        (DType::F64, 1),  // 8
        (DType::F32, 30), // 120: larger than the capacity
        (DType::F32, 1),  // 4
    ];
    let buckets = plan_buckets(&params, 64);
    let plan: Vec<(Vec<usize>, DType, usize)> = buckets
        .iter()
        .map(|b| (b.params.clone(), b.dtype, b.numel))
        .collect();
    assert_eq!(
        plan,
        vec![
            (vec![5], DType::F32, 1),
            (vec![4], DType::F32, 30),
            (vec![3, 2], DType::F64, 3),
            (vec![1, 0], DType::F32, 15),
        ]
    );
    let each: Vec<usize> = plan_buckets(&params, 1)
        .iter()
        .map(|b| b.params.len())
        .collect();
    assert_eq!(each, vec![1; 6]);
    assert_eq!(plan_buckets(&params, usize::MAX).len(), 3); // dtype changes still split
}

// ----- data-parallel training -----

type Mlp = Sequential<(Linear<Cpu>, ReLU, Linear<Cpu>)>;

const FEATURES: usize = 6;
const CLASSES: usize = 3;
const ITEMS: usize = 64;

fn mlp(seed: u64, dev: &Cpu) -> Mlp {
    let mut g = Generator::new(seed);
    Sequential::new((
        LinearConfig::new(FEATURES, 8)
            .dtype(DType::F64)
            .init(dev, &mut g)
            .unwrap(),
        ReLU::new(),
        LinearConfig::new(8, CLASSES)
            .dtype(DType::F64)
            .init(dev, &mut g)
            .unwrap(),
    ))
}

/// Items `indices` of a fixed synthetic data set: f64 features and labels.
fn batch(indices: &[usize], dev: &Cpu) -> (Tensor<Cpu>, Tensor<Cpu>) {
    let all = Tensor::randn([ITEMS, FEATURES], DType::F64, 5, dev)
        .unwrap()
        .to_vec::<f64>()
        .unwrap();
    let mut x = Vec::new();
    for &i in indices {
        x.extend_from_slice(&all[i * FEATURES..(i + 1) * FEATURES]);
    }
    let y: Vec<i64> = indices.iter().map(|&i| (i % CLASSES) as i64).collect();
    (
        Tensor::from_vec(x, [indices.len(), FEATURES], dev).unwrap(),
        Tensor::from_vec(y, [indices.len()], dev).unwrap(),
    )
}

fn params_f64(model: &impl Module<Cpu>) -> Vec<Vec<f64>> {
    model
        .parameters()
        .iter()
        .map(|(_, v)| v.value().to_vec::<f64>().unwrap())
        .collect()
}

fn sgd(model: &impl Module<Cpu>) -> Sgd<Cpu> {
    Sgd::new(model.parameters(), SgdConfig::new(0.1).momentum(0.9)).unwrap()
}

const SEED: u64 = 21;
const STEPS: usize = 5;
const GLOBAL_BATCH: usize = 12;

/// Plain training (no communicator at all) at the global batch: the reference.
fn single_process_trajectory() -> Vec<Vec<Vec<f64>>> {
    let dev = Cpu::new();
    let model = mlp(SEED, &dev);
    let mut opt = sgd(&model);
    let order = epoch_permutation(ITEMS, SEED, 0);
    let mut out = Vec::new();
    for k in 0..STEPS {
        let (x, y) = batch(&order[k * GLOBAL_BATCH..(k + 1) * GLOBAL_BATCH], &dev);
        let loss = cross_entropy(&model.forward(&Var::constant(x)).unwrap(), &y).unwrap();
        opt.zero_grad();
        loss.backward().unwrap();
        opt.step().unwrap();
        out.push(params_f64(&model));
    }
    out
}

/// Data-parallel training on `world` thread ranks at batch `GLOBAL_BATCH / world`; rank `r`'s
/// model starts from seed `SEED + r` (DDP must replace it by rank 0's).
fn data_parallel_trajectory(world: usize, bucket_bytes: usize) -> Vec<Vec<Vec<Vec<f64>>>> {
    on_ranks(world, |comm| {
        let dev = Cpu::new();
        let rank = comm.rank;
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let model = mlp(SEED + rank as u64, &dev);
        let config = DdpConfig::new().bucket_bytes(bucket_bytes);
        let ddp = DistributedDataParallel::with_config(model, comm.clone(), config).unwrap();
        let mut opt = sgd(&ddp);
        let shard = DistributedSampler::new(ITEMS, rank, world)
            .unwrap()
            .shuffled(SEED)
            .indices(0);
        let b = GLOBAL_BATCH / world;
        let mut out = Vec::new();
        for k in 0..STEPS {
            let (x, y) = batch(&shard[k * b..(k + 1) * b], &dev);
            ddp.train_step(&mut opt, x, &y).unwrap();
            ddp.check_in_sync().unwrap();
            out.push(params_f64(&ddp));
        }
        out
    })
}

fn max_difference(a: &[Vec<f64>], b: &[Vec<f64>]) -> f64 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max)
}

#[test]
fn ranks_at_a_share_of_the_batch_train_like_one_process_at_the_whole_batch() {
    let reference = single_process_trajectory();
    for world in [2, 3] {
        let ranks = data_parallel_trajectory(world, 64);
        for step in 0..STEPS {
            for rank in 1..world {
                assert_eq!(
                    ranks[rank][step], ranks[0][step],
                    "world {world}: rank {rank} differs from rank 0 after step {step}"
                );
            }
            let diff = max_difference(&ranks[0][step], &reference[step]);
            assert!(
                diff < 1e-12,
                "world {world}, step {step}: {diff:e} from single-process training"
            );
        }
    }
}

#[test]
fn the_bucket_size_changes_nothing_but_the_number_of_collectives() {
    let one_per_param = data_parallel_trajectory(2, 1);
    let one_bucket = data_parallel_trajectory(2, 1 << 20);
    assert_eq!(one_per_param, one_bucket);
}

#[test]
fn the_wrapped_optimizer_and_train_step_average_the_same_way() {
    let results = on_ranks(2, |comm| {
        let dev = Cpu::new();
        let rank = comm.rank;
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let a = DistributedDataParallel::new(mlp(1, &dev), comm.clone()).unwrap();
        let b = DistributedDataParallel::new(mlp(1, &dev), comm.clone()).unwrap();
        let mut opt_a = sgd(&a);
        let mut opt_b = b.wrap_optimizer(sgd(&b));
        let (x, y) = batch(&[rank, rank + 2, rank + 4], &dev);
        a.train_step(&mut opt_a, x.clone(), &y).unwrap();
        tessera_nn::training::train_step(&b, &mut opt_b, x, &y).unwrap();
        assert_eq!(opt_b.learning_rate(), 0.1);
        assert_eq!(a.comm_stats().syncs, 1);
        assert_eq!(b.comm_stats().syncs, 1);
        (params_f64(&a), params_f64(&b))
    });
    for (a, b) in &results {
        assert_eq!(a, b);
    }
    assert_eq!(results[0], results[1]);
}

#[test]
fn a_parameter_without_a_gradient_on_one_rank_gets_the_average_with_zeros() {
    let grads = on_ranks(2, |comm| {
        let dev = Cpu::new();
        let rank = comm.rank;
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let model = mlp(3, &dev);
        let ddp = DistributedDataParallel::new(model, comm).unwrap();
        let params = ddp.parameters();
        let (name, w) = &params[0];
        assert_eq!(name, "0.weight");
        if rank == 0 {
            w.set_grad(Some(
                Tensor::ones(w.dims().to_vec(), DType::F64, &dev).unwrap(),
            ));
        }
        ddp.sync_gradients().unwrap();
        (
            w.grad().unwrap().to_vec::<f64>().unwrap(),
            params[1].1.grad().unwrap().to_vec::<f64>().unwrap(),
        )
    });
    for (w, bias) in grads {
        assert!(w.iter().all(|&g| g == 0.5), "{w:?}");
        assert!(bias.iter().all(|&g| g == 0.0), "{bias:?}");
    }
}

#[test]
fn ranks_that_drift_apart_are_named() {
    let outcomes = on_ranks(2, |comm| {
        let dev = Cpu::new();
        let rank = comm.rank;
        let comm: Arc<dyn Communicator<Cpu>> = Arc::new(comm);
        let ddp = DistributedDataParallel::new(mlp(3, &dev), comm).unwrap();
        ddp.check_in_sync().unwrap();
        if rank == 1 {
            let (_, bias) = &ddp.parameters()[3];
            bias.set_value(bias.value().add_scalar(1e-15).unwrap())
                .unwrap();
        }
        ddp.check_in_sync().unwrap_err()
    });
    for err in outcomes {
        match &err {
            Error::Communication { kind, msg, .. } => {
                assert_eq!(*kind, CommFailure::Mismatch);
                assert!(msg.contains("2.bias") && !msg.contains("0.weight"), "{msg}");
            }
            other => panic!("unexpected {other}"),
        }
    }
}

#[test]
fn checkpoints_are_written_by_rank_zero_and_its_failure_stops_every_rank() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let writers = Mutex::new(Vec::new());
    on_ranks(3, |comm| {
        let dev = Cpu::new();
        let rank = comm.rank;
        let model = mlp(0, &dev);
        save_on_rank0::<Cpu>(&comm, || {
            writers.lock().unwrap().push(rank);
            model.save(&path)
        })
        .unwrap();
        assert!(
            path.exists(),
            "rank {rank} returned before the file was written"
        );
    });
    assert_eq!(*writers.lock().unwrap(), vec![0]);
    let bad = dir.path().join("missing-folder").join("model.safetensors");
    let errors = on_ranks(2, |comm| {
        let dev = Cpu::new();
        save_on_rank0::<Cpu>(&comm, || mlp(0, &dev).save(&bad)).unwrap_err()
    });
    assert!(matches!(errors[0], Error::Io { .. }), "{}", errors[0]);
    assert!(
        matches!(&errors[1], Error::Checkpoint { msg } if msg.contains("rank 0")),
        "{}",
        errors[1]
    );
}

#[test]
fn the_local_communicator_is_one_rank_with_the_same_checks() {
    let dev = Cpu::new();
    let comm = LocalCommunicator::new();
    let c: &dyn Communicator<Cpu> = &comm;
    assert_eq!((c.rank(), c.world_size(), c.library()), (0, 1, "local"));
    let mut t = Tensor::from_vec(vec![1i64, 2], [2], &dev).unwrap();
    c.all_reduce(&mut t, Reduction::Sum).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![1, 2]);
    assert!(matches!(
        c.all_reduce(&mut t, Reduction::Mean),
        Err(Error::UnsupportedDType { .. })
    ));
    let mut mask = Tensor::from_host(HostData::Bool(vec![1]), [1], &dev).unwrap();
    assert!(c.all_reduce(&mut mask, Reduction::Max).is_err());
    c.broadcast(&mut mask, 0).unwrap();
    assert!(matches!(
        c.broadcast(&mut mask, 1),
        Err(Error::InvalidArgument { .. })
    ));
    c.barrier().unwrap();
    // One rank: DDP exchanges nothing and leaves the gradients as they are.
    let ddp = DistributedDataParallel::new(mlp(0, &dev), Arc::new(comm)).unwrap();
    let (x, y) = batch(&[0, 1, 2], &dev);
    let mut opt = sgd(&ddp);
    ddp.train_step(&mut opt, x, &y).unwrap();
    assert_eq!(ddp.comm_stats().syncs, 0);
    ddp.check_in_sync().unwrap();
}
