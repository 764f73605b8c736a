//! The rank program of `cargo xtask bench ddp`: data-parallel training steps of the `train`
//! command's MLP (784-512-512-10, f32, Adam) on synthetic data, on the CPU backend, over
//! `MpiCommunicator`. Rank 0 prints one JSON line: the world size, the per-rank batch, and per
//! measured step its seconds, the slowest rank's computation (forward, backward, optimizer
//! step) and the fastest rank's gradient synchronisation (flattening, all-reduce,
//! unflattening: the exchange itself, without waiting for a slower rank).
//!
//! ```text
//! cargo build --release -p tessera-distributed --features mpi --example ddp_bench
//! RAYON_NUM_THREADS=1 mpirun -np 2 --bind-to core target/release/examples/ddp_bench 64 5 30
//! ```
//! Arguments: batch per rank, warm-up steps, measured steps.

use std::sync::Arc;
use std::time::Instant;
use tessera_autograd::Var;
use tessera_core::{DType, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_distributed::MpiCommunicator;
use tessera_nn::distributed::{Communicator, DistributedDataParallel, Reduction};
use tessera_nn::loss::cross_entropy;
use tessera_nn::models::ModelKind;
use tessera_nn::optim::{Adam, AdamConfig, Optimizer};
use tessera_nn::{Forward, Module};

fn arg(position: usize, default: usize) -> usize {
    std::env::args()
        .nth(position)
        .map(|a| a.parse().expect("a number"))
        .unwrap_or(default)
}

fn main() -> Result<()> {
    tessera_cpu::tune_allocator();
    let (batch, warmup, steps) = (arg(1, 64), arg(2, 5), arg(3, 30));
    let mpi = Arc::new(MpiCommunicator::init()?);
    let comm: Arc<dyn Communicator<Cpu>> = mpi.clone();
    let (rank, world) = (comm.rank(), comm.world_size());
    let dev = Cpu::new();
    let model = ModelKind::Mlp.build(DType::F32, 0, &dev)?;
    let ddp = DistributedDataParallel::new(model, comm.clone())?;
    let mut optimizer = Adam::new(ddp.parameters(), AdamConfig::new(1e-3))?;
    // Each rank its own fixed batch (different data, as in real data-parallel training).
    let x = Tensor::randn([batch, 784], DType::F32, 100 + rank as u64, &dev)?;
    let labels: Vec<i64> = (0..batch).map(|i| ((i * 7 + rank) % 10) as i64).collect();
    let y = Tensor::from_vec(labels, [batch], &dev)?;
    for _ in 0..warmup {
        ddp.train_step(&mut optimizer, x.clone(), &y)?;
    }
    comm.barrier()?;
    // Per measured step: this rank's computation (forward, backward, optimizer step), its
    // gradient synchronisation, and the whole step.
    let (mut compute, mut sync, mut total) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..steps {
        let started = Instant::now();
        let logits = ddp.forward(&Var::constant(x.clone()))?;
        let loss = cross_entropy(&logits, &y)?;
        optimizer.zero_grad();
        loss.backward()?;
        let backward_done = Instant::now();
        ddp.sync_gradients()?;
        let synced = Instant::now();
        optimizer.step()?;
        let done = Instant::now();
        compute.push((backward_done - started + (done - synced)).as_secs_f64());
        sync.push((synced - backward_done).as_secs_f64());
        total.push((done - started).as_secs_f64());
    }
    // The slowest rank's computation, and the fastest rank's synchronisation: the rank that
    // arrives last at the all-reduce waits for nobody, so its time is the exchange itself; the
    // others' also includes waiting for it.
    let mut slowest_compute = compute.clone();
    comm.all_reduce_host(&mut slowest_compute, Reduction::Max)?;
    let mut fastest_sync = sync.clone();
    comm.all_reduce_host(&mut fastest_sync, Reduction::Min)?;
    if rank == 0 {
        let grad_bytes: usize = ddp.reducer().buckets().iter().map(|b| b.bytes()).sum();
        let version = MpiCommunicator::library_version();
        let summary = serde_json::json!({
            "world_size": world,
            "batch_per_rank": batch,
            "steps": steps,
            "step_seconds": total,
            "compute_seconds_slowest_rank": slowest_compute,
            "sync_seconds_fastest_rank": fastest_sync,
            "sync_seconds_rank0": sync,
            "gradient_bytes": grad_bytes,
            "buckets": ddp.reducer().buckets().len(),
            "mpi": version.lines().next().unwrap_or(""),
        });
        println!("{summary}");
    }
    Ok(())
}
