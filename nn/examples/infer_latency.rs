//! Batch-1 forward latency of the reference models on the CPU backend, for profiling
//! (`perf record`) and quick before/after comparisons. Final figures come from
//! `cargo xtask bench infer`, which also runs the PyTorch peer.
//!
//! `cargo run --release -p tessera-nn --example infer_latency -- [mlp|cnn] [reps]`

use std::time::Instant;

use tessera_autograd::{no_grad, Var};
use tessera_core::{DType, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::models::ModelKind;
use tessera_nn::Forward;
use tessera_nn::Module;

fn main() -> tessera_core::Result<()> {
    let mut args = std::env::args().skip(1);
    let kind = match args.next().as_deref() {
        Some("cnn") => ModelKind::Cnn,
        _ => ModelKind::Mlp,
    };
    let reps: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(2000);
    let dev = Cpu::new();
    tessera_cpu::tune_allocator();
    let net = kind.build(DType::F32, 0, &dev)?;
    net.eval();
    let mut dims = vec![1];
    dims.extend(kind.sample_dims());
    let x = Var::constant(Tensor::<Cpu>::randn(dims, DType::F32, 11, &dev)?);
    for _ in 0..reps / 10 + 1 {
        no_grad(|| net.forward(&x))?;
    }
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        let y = no_grad(|| net.forward(&x))?;
        std::hint::black_box(&y);
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{kind:?} batch 1: min {:.1} us, median {:.1} us, p90 {:.1} us ({reps} reps)",
        times[0],
        times[reps / 2],
        times[reps * 9 / 10]
    );
    Ok(())
}
