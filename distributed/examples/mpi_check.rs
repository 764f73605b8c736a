//! The program `tests/mpi_ranks.rs` runs under `mpirun` to check `MpiCommunicator` and
//! `DistributedDataParallel` across real processes. One mode per run:
//!
//! * `train OUT_DIR BUCKET_BYTES`: data-parallel training of the shared problem
//!   (`tests/common/problem.rs`) at batch `GLOBAL_BATCH / world_size` per rank; every rank
//!   appends its parameters after each step to `OUT_DIR/rank<r>.f64` (little-endian f64).
//! * `sharded OUT_DIR LEVEL BUCKET_BYTES`: the same with AdamW, at sharding level `LEVEL`
//!   (`ShardedOptimizer`; 0 is plain data parallelism); rank 0 also writes the consolidated
//!   optimizer state to `OUT_DIR/state.f64` (names in `state.txt`).
//! * `gpt OUT_DIR LEVEL`: a small f64 GPT with dropout, trained 10 steps with AdamW at sharding
//!   level `LEVEL` (3: its blocks as `ShardedUnits`; `3p`: the same with gathers prefetched),
//!   each rank on its own windows, with two evaluation passes between each backward pass and
//!   step; every rank appends its parameters after each step to `OUT_DIR/rank<r>.f64`.
//! * `collectives`: every collective on every dtype against values computed here, and the
//!   typed errors of mismatched calls; prints `collectives ok` on each rank.
//! * `die VICTIM [gather]`: a few all-reduces, then rank `VICTIM` kills itself with SIGKILL
//!   while the others keep all-reducing (with `gather`: starting all-gathers and waiting for
//!   them); each survivor prints one line
//!   `survivor <rank> <kind> <seconds> <message>` with the error it got and when.
//!
//! ```text
//! cargo build -p tessera-distributed --features mpi --example mpi_check
//! mpirun --oversubscribe -np 2 target/debug/examples/mpi_check collectives
//! ```

#[path = "../tests/common/problem.rs"]
mod problem;

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use tessera_core::{CommFailure, DType, Error, Generator, HostData, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_distributed::{Bootstrap, MpiCommunicator};
use tessera_nn::distributed::{
    Communicator, DdpConfig, DistributedDataParallel, DistributedSampler, Reduction, ShardLevel,
    ShardedOptimizer, ShardedUnits,
};
use tessera_nn::gpt::GptConfig;
use tessera_nn::optim::Optimizer;
use tessera_nn::{Forward, Module};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("train") => train(&args[1..]),
        Some("collectives") => collectives(),
        Some("sharded") => sharded(&args[1..]),
        Some("gpt") => sharded_gpt(&args[1..]),
        Some("die") => die(&args[1..]),
        _ => {
            eprintln!(
                "usage: mpi_check train OUT_DIR BUCKET_BYTES | sharded OUT_DIR LEVEL \
                 BUCKET_BYTES | gpt OUT_DIR LEVEL[p] | collectives | die VICTIM [gather]"
            );
            std::process::exit(2);
        }
    };
    if let Err(e) = outcome {
        eprintln!("mpi_check: error: {e}");
        std::process::exit(1);
    }
}

fn train(args: &[String]) -> Result<()> {
    let out = PathBuf::from(&args[0]);
    let bucket_bytes: usize = args[1].parse().expect("BUCKET_BYTES is a number");
    let mpi = Arc::new(MpiCommunicator::init()?);
    let (rank, world) = (Bootstrap::rank(&*mpi), Bootstrap::world_size(&*mpi));
    let comm: Arc<dyn Communicator<Cpu>> = mpi;
    let dev = Cpu::new();
    // Every rank initialises differently: DDP must start them all from rank 0's model.
    let model = problem::model(problem::SEED + rank as u64, &dev);
    let config = DdpConfig::new().bucket_bytes(bucket_bytes);
    let ddp = DistributedDataParallel::with_config(model, comm, config)?;
    let mut optimizer = problem::optimizer(&ddp);
    let shard = DistributedSampler::new(problem::ITEMS, rank, world)?
        .shuffled(problem::SEED)
        .indices(0);
    let b = problem::GLOBAL_BATCH / world;
    let path = out.join(format!("rank{rank}.f64"));
    let mut file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    for k in 0..problem::STEPS {
        let (x, y) = problem::batch(&shard[k * b..(k + 1) * b], &dev);
        ddp.train_step(&mut optimizer, x, &y)?;
        for v in problem::flat_parameters(&ddp) {
            file.write_all(&v.to_le_bytes())
                .map_err(|e| Error::io(&path, e))?;
        }
    }
    ddp.check_in_sync()?;
    let stats = ddp.comm_stats();
    println!(
        "rank {rank}: {} steps, {} all-reduces, {} buckets",
        stats.syncs,
        stats.collectives,
        ddp.reducer().buckets().len()
    );
    Ok(())
}

/// Data-parallel training of the shared problem with AdamW at sharding `LEVEL` (0: plain
/// `DistributedDataParallel`): every rank appends its parameters after each step to
/// `OUT_DIR/rank<r>.f64`, and rank 0 writes the optimizer's consolidated state (sorted by
/// name) to `OUT_DIR/state.f64` and the names to `OUT_DIR/state.txt`.
fn sharded(args: &[String]) -> Result<()> {
    let out = PathBuf::from(&args[0]);
    let level = ShardLevel::from_number(args[1].parse().expect("LEVEL is a number"))?;
    let bucket_bytes: usize = args[2].parse().expect("BUCKET_BYTES is a number");
    let mpi = Arc::new(MpiCommunicator::init()?);
    let (rank, world) = (Bootstrap::rank(&*mpi), Bootstrap::world_size(&*mpi));
    let comm: Arc<dyn Communicator<Cpu>> = mpi;
    let dev = Cpu::new();
    let model = problem::model(problem::SEED + rank as u64, &dev);
    let config = DdpConfig::new().bucket_bytes(bucket_bytes);
    let ddp = DistributedDataParallel::with_config(model, comm.clone(), config)?;
    let mut optimizer: Box<dyn Optimizer<Cpu>> = match level {
        ShardLevel::Replicated => Box::new(ddp.wrap_optimizer(problem::adamw(ddp.parameters()))),
        level => Box::new(ShardedOptimizer::new(
            ddp.parameters(),
            comm.clone(),
            level,
            bucket_bytes,
            |shares| Ok(problem::adamw(shares)),
        )?),
    };
    let shard = DistributedSampler::new(problem::ITEMS, rank, world)?
        .shuffled(problem::SEED)
        .indices(0);
    let b = problem::GLOBAL_BATCH / world;
    let path = out.join(format!("rank{rank}.f64"));
    let mut file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    let write = |file: &mut std::fs::File, values: &[f64]| -> Result<()> {
        for v in values {
            file.write_all(&v.to_le_bytes())
                .map_err(|e| Error::io(&path, e))?;
        }
        Ok(())
    };
    for k in 0..problem::STEPS {
        let (x, y) = problem::batch(&shard[k * b..(k + 1) * b], &dev);
        let logits = ddp.forward(&tessera_autograd::Var::constant(x))?;
        let loss = tessera_nn::loss::cross_entropy(&logits, &y)?;
        optimizer.zero_grad();
        loss.backward()?;
        optimizer.step()?;
        write(&mut file, &problem::flat_parameters(&ddp))?;
    }
    optimizer.prepare_checkpoint()?;
    let mut state = optimizer.state();
    optimizer.finish_checkpoint();
    state.sort_by(|a, b| a.0.cmp(&b.0));
    if rank == 0 {
        let path = out.join("state.f64");
        let mut file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut names = String::new();
        for (name, tensor) in &state {
            names.push_str(&format!("{name} {:?}\n", tensor.dims()));
            for v in tensor.to_vec_f64()? {
                file.write_all(&v.to_le_bytes())
                    .map_err(|e| Error::io(&path, e))?;
            }
        }
        let names_path = out.join("state.txt");
        std::fs::write(&names_path, names).map_err(|e| Error::io(&names_path, e))?;
    }
    // The consolidated state loads back into a fresh optimizer of the same level and gives
    // the same state again.
    if level != ShardLevel::Replicated {
        let mut again = ShardedOptimizer::new(
            ddp.parameters(),
            comm.clone(),
            level,
            bucket_bytes,
            |shares| Ok(problem::adamw(shares)),
        )?;
        again.load_state(&state)?;
        again.prepare_checkpoint()?;
        let mut reloaded = again.state();
        reloaded.sort_by(|a, b| a.0.cmp(&b.0));
        expect_eq(
            "reloaded state names",
            reloaded.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            state.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
        )?;
        for ((name, a), (_, b)) in reloaded.iter().zip(&state) {
            expect_eq(name, a.to_host()?, b.to_host()?)?;
        }
    }
    println!("rank {rank}: level {} trained", level.number());
    Ok(())
}

/// See the module docs (`gpt OUT_DIR LEVEL`).
fn sharded_gpt(args: &[String]) -> Result<()> {
    let out = PathBuf::from(&args[0]);
    let (level, prefetch) = match args[1].strip_suffix('p') {
        Some(level) => (level, true),
        None => (args[1].as_str(), false),
    };
    let level = ShardLevel::from_number(level.parse().expect("LEVEL is a number"))?;
    let mpi = Arc::new(MpiCommunicator::init()?);
    let rank = Bootstrap::rank(&*mpi);
    let comm: Arc<dyn Communicator<Cpu>> = mpi;
    let dev = Cpu::new();
    let model = GptConfig::new(2, 2, 16, 8, 13)
        .dropout(0.1)
        .dtype(DType::F64)
        .init(&dev, &mut Generator::new(problem::SEED + rank as u64))?;
    let ddp = DistributedDataParallel::new(model, comm.clone())?;
    let gpt = ddp.module();
    gpt.train();
    let mut units = None;
    let mut optimizer: Box<dyn Optimizer<Cpu>> = match level {
        ShardLevel::Replicated => Box::new(ddp.wrap_optimizer(problem::adamw(ddp.parameters()))),
        ShardLevel::Parameters => {
            let u = ShardedUnits::new(comm.clone(), gpt.block_prefixes())?;
            let o = ShardedOptimizer::with_units(ddp.parameters(), &u, 512, |shares| {
                Ok(problem::adamw(shares))
            })?;
            gpt.shard_blocks(u.clone())?;
            u.set_prefetch(prefetch);
            u.release_all()?;
            units = Some(u);
            Box::new(o)
        }
        level => Box::new(ShardedOptimizer::new(
            ddp.parameters(),
            comm.clone(),
            level,
            512,
            |shares| Ok(problem::adamw(shares)),
        )?),
    };
    let path = out.join(format!("rank{rank}.f64"));
    let mut file = std::fs::File::create(&path).map_err(|e| Error::io(&path, e))?;
    for step in 0..10u64 {
        let tokens: Vec<i64> = (0..2 * 9)
            .map(|i| ((i as u64 * 5 + step * 3 + rank as u64 * 7) % 13) as i64)
            .collect();
        let all = Tensor::from_vec(tokens, [2, 9], &dev)?;
        let x = all.narrow(1, 0, 8)?.contiguous()?;
        let y = all.narrow(1, 1, 8)?.contiguous()?;
        optimizer.zero_grad();
        gpt.loss(&x, &y)?.backward()?;
        // Evaluation passes (dropout streams advance alike at every level): forward passes
        // without backward, whose order the prefetch follows too.
        for _ in 0..2 {
            tessera_autograd::no_grad(|| gpt.loss(&x, &y))?;
        }
        optimizer.step()?;
        // Level 3, odd steps: held on one rank alone first (gathered there only), which must
        // hold what every rank holds after `gather_all` below; the release keeps the shares.
        let held_on_one = match &units {
            Some(u) if step % 2 == 1 => {
                let root = (step as usize / 2) % comm.world_size();
                u.hold_on(root)?;
                let held = (rank == root).then(|| problem::flat_parameters(gpt));
                u.release_all()?;
                held
            }
            _ => None,
        };
        if let Some(u) = &units {
            u.gather_all()?;
        }
        if let Some(held) = held_on_one {
            expect_eq(
                "the parameters held on one rank",
                held,
                problem::flat_parameters(gpt),
            )?;
        }
        for v in problem::flat_parameters(gpt) {
            file.write_all(&v.to_le_bytes())
                .map_err(|e| Error::io(&path, e))?;
        }
        if let Some(u) = &units {
            u.release_all()?;
        }
    }
    println!("rank {rank}: gpt level {} trained", level.number());
    Ok(())
}

/// Fails unless `got` equals `expected`, naming `what`.
fn expect_eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, expected: T) -> Result<()> {
    if got == expected {
        Ok(())
    } else {
        Err(Error::InvalidArgument {
            op: "mpi_check",
            msg: format!("{what}: got {got:?}, expected {expected:?}"),
        })
    }
}

/// Fails unless `outcome` is a communication error of `kind`.
fn expect_failure(what: &str, outcome: Result<()>, kind: CommFailure) -> Result<()> {
    match outcome {
        Err(Error::Communication { kind: k, .. }) if k == kind => Ok(()),
        other => Err(Error::InvalidArgument {
            op: "mpi_check",
            msg: format!("{what}: expected a {kind:?} communication error, got {other:?}"),
        }),
    }
}

/// A model with bf16 parameters trained data-parallel over MPI (its gradients all-reduced as
/// bf16): every rank on its own batch, the ranks stay equal bit for bit and the step moves
/// the parameters.
fn bf16_data_parallel(comm: Arc<dyn Communicator<Cpu>>, rank: usize) -> Result<()> {
    use tessera_nn::layers::LinearConfig;
    use tessera_nn::optim::{Sgd, SgdConfig};
    use tessera_nn::Module;
    let dev = Cpu::new();
    let layer = LinearConfig::new(4, 3)
        .dtype(DType::BF16)
        .init(&dev, &mut Generator::new(rank as u64))?;
    let ddp = DistributedDataParallel::new(layer, comm)?;
    let before: Vec<Vec<f64>> = (ddp.parameters().iter())
        .map(|(_, v)| v.value().to_vec_f64())
        .collect::<Result<_>>()?;
    let mut sgd = Sgd::new(ddp.parameters(), SgdConfig::new(0.5))?;
    let x = Tensor::randn([6, 4], DType::BF16, 10 + rank as u64, &dev)?;
    let y = Tensor::from_vec(
        (0..6).map(|i| (i + rank as i64) % 3).collect::<Vec<i64>>(),
        [6],
        &dev,
    )?;
    let loss = ddp.train_step(&mut sgd, x, &y)?.to_scalar_f64()?;
    ddp.check_in_sync()?;
    let after: Vec<Vec<f64>> = (ddp.parameters().iter())
        .map(|(_, v)| v.value().to_vec_f64())
        .collect::<Result<_>>()?;
    if !loss.is_finite() || after == before {
        return Err(Error::InvalidArgument {
            op: "mpi_check",
            msg: format!("a bf16 data-parallel step gave loss {loss} and moved nothing"),
        });
    }
    Ok(())
}

fn collectives() -> Result<()> {
    let mpi = Arc::new(MpiCommunicator::init()?);
    let shared: Arc<dyn Communicator<Cpu>> = mpi.clone();
    let comm: &dyn Communicator<Cpu> = &*shared;
    let (rank, world) = (comm.rank(), comm.world_size());
    let dev = Cpu::new();
    let r = rank as f64;
    let n = world as f64;
    let sum_of_ranks = n * (n - 1.0) / 2.0;

    // All-reduce of every reducible dtype and reduction; rank r contributes [r, 2r + 1, -r].
    for dtype in [DType::F32, DType::F64, DType::I64, DType::F16, DType::BF16] {
        let mine = [r, 2.0 * r + 1.0, -r];
        for (op, expected) in [
            (
                Reduction::Sum,
                [sum_of_ranks, 2.0 * sum_of_ranks + n, -sum_of_ranks],
            ),
            (Reduction::Max, [n - 1.0, 2.0 * n - 1.0, 0.0]),
            (Reduction::Min, [0.0, 1.0, 1.0 - n]),
            (
                Reduction::Mean,
                [
                    sum_of_ranks / n,
                    (2.0 * sum_of_ranks + n) / n,
                    -sum_of_ranks / n,
                ],
            ),
        ] {
            if dtype == DType::I64 && op == Reduction::Mean {
                let mut t = Tensor::from_f64_values(&mine, [3], dtype, &dev)?;
                let outcome = comm.all_reduce(&mut t, op);
                if !matches!(outcome, Err(Error::UnsupportedDType { .. })) {
                    return Err(Error::InvalidArgument {
                        op: "mpi_check",
                        msg: format!("a mean of i64 was not refused: {outcome:?}"),
                    });
                }
                continue;
            }
            let mut t = Tensor::from_f64_values(&mine, [3], dtype, &dev)?;
            let before = t.clone();
            comm.all_reduce(&mut t, op)?;
            expect_eq(
                &format!("{dtype} {op:?}"),
                t.to_vec_f64()?,
                Tensor::from_f64_values(&expected, [3], dtype, &dev)?.to_vec_f64()?,
            )?;
            // The handle was replaced; the old tensor keeps its values.
            expect_eq("untouched input", before.to_vec_f64()?, mine.to_vec())?;
        }
    }
    // Broadcast of every dtype from every root.
    for root in 0..world {
        for dtype in [
            DType::F32,
            DType::F64,
            DType::I64,
            DType::Bool,
            DType::F16,
            DType::BF16,
        ] {
            let values = [r + 1.0, 0.0, r * 3.0 + 1.0, 1.0];
            let mut t = Tensor::from_f64_values(&values, [2, 2], dtype, &dev)?;
            comm.broadcast(&mut t, root)?;
            let rr = root as f64;
            let expected = Tensor::from_f64_values(
                &[rr + 1.0, 0.0, rr * 3.0 + 1.0, 1.0],
                [2, 2],
                dtype,
                &dev,
            )?;
            expect_eq(
                &format!("broadcast {dtype} from {root}"),
                t.to_host()?,
                expected.to_host()?,
            )?;
        }
    }
    // The 16-bit floats are combined in f32 and rounded once: rank 0 contributes 256 and the
    // others 1 each, a sum that bf16 (8 significant bits) holds only once it is whole, where
    // rounding after each rank would stay at 256 from 3 ranks on.
    for dtype in [DType::BF16, DType::F16] {
        let mine = if rank == 0 { 256.0 } else { 1.0 };
        let exact = 256.0 + (n - 1.0);
        for (op, want) in [(Reduction::Sum, exact), (Reduction::Mean, exact / n)] {
            let mut t = Tensor::from_f64_values(&[mine], [1], dtype, &dev)?;
            comm.all_reduce(&mut t, op)?;
            let want = Tensor::from_f64_values(&[want], [1], dtype, &dev)?;
            expect_eq(
                &format!("{dtype} {op:?} rounded once"),
                t.to_host()?,
                want.to_host()?,
            )?;
        }
    }
    // Reduce-scatter and all-gather: rank r contributes x_r[i] = (i + 1)·(r + 1) + i/8 over
    // 2·world elements and gets elements [2r, 2r + 2) of the sum; then gathers (rank r: [r, -r]).
    for dtype in [DType::F32, DType::F64, DType::I64, DType::F16, DType::BF16] {
        let len = 2 * world;
        let value = |i: usize, k: f64| (i as f64 + 1.0) * (k + 1.0) + (i / 8) as f64;
        let mine: Vec<f64> = (0..len).map(|i| value(i, r)).collect();
        let t = Tensor::from_f64_values(&mine, [len], dtype, &dev)?;
        let scattered = comm.reduce_scatter(&t, Reduction::Sum)?;
        let expected: Vec<f64> = (2 * rank..2 * rank + 2)
            .map(|i| (0..world).map(|k| value(i, k as f64)).sum())
            .collect();
        expect_eq(
            &format!("reduce_scatter {dtype}"),
            scattered.to_vec_f64()?,
            expected,
        )?;
        // The same bits as the all-reduce's share of the same values (here a mean of floats).
        if dtype != DType::I64 {
            let noisy: Vec<f64> = (0..len).map(|i| (i as f64 + 0.1) / (r + 3.0)).collect();
            let t = Tensor::from_f64_values(&noisy, [len], dtype, &dev)?;
            let mut all = t.clone();
            comm.all_reduce(&mut all, Reduction::Mean)?;
            let share = comm.reduce_scatter(&t, Reduction::Mean)?;
            expect_eq(
                &format!("reduce_scatter {dtype} = its all_reduce share"),
                share.to_host()?,
                all.narrow(0, 2 * rank, 2)?.contiguous()?.to_host()?,
            )?;
        }
        // Started (on a thread of its own): the same bits as the synchronous one, with a
        // collective issued meanwhile running after it; a handle dropped unused.
        let noisy: Vec<f64> = (0..len).map(|i| (i as f64 + 0.3) / (r + 2.0)).collect();
        let t = Tensor::from_f64_values(&noisy, [len], dtype, &dev)?;
        let op = if dtype == DType::I64 {
            Reduction::Sum
        } else {
            Reduction::Mean
        };
        let want = comm.reduce_scatter(&t, op)?;
        let pending = shared.clone().start_reduce_scatter(&t, op)?;
        let mut behind = Tensor::from_f64_values(&[r, 1.0], [2], dtype, &dev)?;
        comm.all_reduce(&mut behind, Reduction::Sum)?;
        expect_eq(
            &format!("all_reduce behind a started reduce_scatter {dtype}"),
            behind.to_vec_f64()?,
            vec![sum_of_ranks, n],
        )?;
        expect_eq(
            &format!("start_reduce_scatter {dtype}"),
            pending.wait()?.to_host()?,
            want.to_host()?,
        )?;
        drop(shared.clone().start_reduce_scatter(&t, op)?);
        let shard = Tensor::from_f64_values(&[r, -r], [2], dtype, &dev)?;
        let gathered = comm.all_gather(&shard)?;
        let expected: Vec<f64> = (0..world).flat_map(|k| [k as f64, -(k as f64)]).collect();
        expect_eq(
            &format!("all_gather {dtype}"),
            gathered.to_vec_f64()?,
            expected.clone(),
        )?;
        // Started ahead (on a thread of its own): the same values, with a collective issued
        // meanwhile running after it; one rank waiting at once while the others gather
        // synchronously; a handle dropped unused.
        let pending = shared.clone().start_all_gather(&shard)?;
        let mut behind = Tensor::from_f64_values(&[r, 1.0], [2], dtype, &dev)?;
        comm.all_reduce(&mut behind, Reduction::Sum)?;
        expect_eq(
            &format!("all_reduce behind a started all_gather {dtype}"),
            behind.to_vec_f64()?,
            vec![sum_of_ranks, n],
        )?;
        expect_eq(
            &format!("start_all_gather {dtype}"),
            pending.wait()?.to_vec_f64()?,
            expected.clone(),
        )?;
        let gathered = if rank == 0 {
            shared.clone().start_all_gather(&shard)?.wait()?
        } else {
            comm.all_gather(&shard)?
        };
        expect_eq(
            &format!("start_all_gather beside all_gather {dtype}"),
            gathered.to_vec_f64()?,
            expected,
        )?;
        drop(shared.clone().start_all_gather(&shard)?);
        // To one rank: the last one receives what the all-gather gave, the others nothing.
        let root = world - 1;
        let to_root = comm.gather(&shard, root)?;
        let expected: Vec<f64> = (0..world).flat_map(|k| [k as f64, -(k as f64)]).collect();
        expect_eq(
            &format!("gather {dtype} to rank {root}"),
            to_root.map(|t| t.to_vec_f64()).transpose()?,
            (rank == root).then_some(expected),
        )?;
    }
    let uneven = Tensor::zeros([2 * world + 1], DType::F32, &dev)?;
    if comm.reduce_scatter(&uneven, Reduction::Sum).is_ok() {
        return Err(Error::InvalidArgument {
            op: "mpi_check",
            msg: "a reduce-scatter of a length the ranks do not divide was not refused".into(),
        });
    }
    let mut bytes = [rank as u8; 5];
    mpi.broadcast_bytes(&mut bytes, world - 1)?;
    expect_eq("broadcast_bytes", bytes, [(world - 1) as u8; 5])?;
    let mut host = [r, 1.0];
    comm.all_reduce_host(&mut host, Reduction::Sum)?;
    expect_eq("all_reduce_host", host, [sum_of_ranks, n])?;
    comm.barrier()?;
    let mut empty = Tensor::zeros([0], DType::F32, &dev)?;
    comm.all_reduce(&mut empty, Reduction::Sum)?;

    // Mismatched calls: typed errors on every rank, and the communicator stays usable.
    let mut sized = Tensor::zeros([3 + rank], DType::F32, &dev)?;
    expect_failure(
        "sizes differ",
        comm.all_reduce(&mut sized, Reduction::Sum),
        CommFailure::Mismatch,
    )?;
    let dtype = if rank == 0 { DType::F32 } else { DType::F64 };
    let mut typed = Tensor::zeros([4], dtype, &dev)?;
    expect_failure(
        "dtypes differ",
        comm.all_reduce(&mut typed, Reduction::Sum),
        CommFailure::Mismatch,
    )?;
    let mut shaped = Tensor::zeros(
        if rank == 0 { vec![2, 3] } else { vec![3, 2] },
        DType::F32,
        &dev,
    )?;
    expect_failure(
        "shapes differ",
        comm.broadcast(&mut shaped, 0),
        CommFailure::Mismatch,
    )?;
    let sized = Tensor::zeros([2 + rank], DType::F32, &dev)?;
    expect_failure(
        "started gathers' sizes differ",
        shared.clone().start_all_gather(&sized).map(drop),
        CommFailure::Mismatch,
    )?;
    let sized = Tensor::zeros([2 * world * (1 + rank)], DType::F32, &dev)?;
    expect_failure(
        "started reduce-scatters' sizes differ",
        shared
            .clone()
            .start_reduce_scatter(&sized, Reduction::Sum)
            .map(drop),
        CommFailure::Mismatch,
    )?;
    let small = Tensor::zeros([2], DType::F32, &dev)?;
    expect_failure(
        "gathers' roots differ",
        comm.gather(&small, rank % 2).map(drop),
        CommFailure::Mismatch,
    )?;
    let mut plain = Tensor::zeros([2], DType::F32, &dev)?;
    let outcome = if rank == 0 {
        comm.barrier()
    } else {
        comm.all_reduce(&mut plain, Reduction::Sum)
    };
    expect_failure("collectives differ", outcome, CommFailure::Mismatch)?;
    let mut host = [0.0; 2];
    comm.all_reduce_host(&mut host, Reduction::Max)?;
    let _ = HostData::F32(Vec::new());
    bf16_data_parallel(shared.clone(), rank)?;
    println!("collectives ok (rank {rank} of {world})");
    Ok(())
}

fn die(args: &[String]) -> Result<()> {
    let victim: usize = args[0].parse().expect("VICTIM is a rank");
    let via_gather = args.get(1).map(String::as_str) == Some("gather");
    let mpi = Arc::new(MpiCommunicator::init()?);
    let shared: Arc<dyn Communicator<Cpu>> = mpi.clone();
    let comm: &dyn Communicator<Cpu> = &*shared;
    let rank = comm.rank();
    let dev = Cpu::new();
    let mut t = Tensor::ones([1000], DType::F32, &dev)?;
    for _ in 0..3 {
        comm.all_reduce(&mut t, Reduction::Sum)?;
    }
    if rank == victim {
        // SIGKILL from outside the process's own code: no handler, no goodbye to MPI.
        let pid = std::process::id().to_string();
        let _ = std::process::Command::new("kill")
            .args(["-KILL", &pid])
            .status();
        std::thread::sleep(std::time::Duration::from_secs(60));
        unreachable!("killed");
    }
    let started = Instant::now();
    let error = loop {
        let outcome = if via_gather {
            // Started on the gather thread and waited for: the failure comes from either.
            let started = shared.clone().start_all_gather(&t);
            started.and_then(|pending| pending.wait()).map(drop)
        } else {
            comm.all_reduce(&mut t, Reduction::Sum)
        };
        if let Err(e) = outcome {
            break e;
        }
    };
    let seconds = started.elapsed().as_secs_f64();
    let kind = match &error {
        Error::Communication { kind, .. } => format!("{kind:?}"),
        _ => "untyped".into(),
    };
    // A broken communicator refuses further calls at once.
    let again = comm.barrier();
    let again_kind = match &again {
        Err(Error::Communication { kind, .. }) => format!("{kind:?}"),
        other => format!("{other:?}"),
    };
    println!("survivor {rank} {kind} {seconds:.2} then {again_kind}: {error}");
    std::io::stdout().flush().ok();
    // The communicator is broken: dropping it skips MPI_Finalize, which could wait for the
    // dead rank.
    drop(shared);
    drop(mpi);
    std::process::exit(0);
}
