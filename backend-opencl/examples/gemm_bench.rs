//! GEMM throughput of the OpenCL backend beside the CPU backend (informational).
//!
//! ```text
//! cargo run --release -p tessera-opencl --example gemm_bench -- [sizes...]
//! ```
//! Prints one line per size and backend: `n`, seconds per product (best of 5) and GFLOP/s.

use std::time::Instant;
use tessera_core::{Backend, DType, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_opencl::OpenCl;

/// Best-of-5 seconds for an `n x n x n` f32 product on `dev` (after a warm-up), waiting for the
/// device each time.
fn time_matmul<B: Backend>(dev: &B, n: usize) -> Result<f64> {
    let a = Tensor::rand([n, n], DType::F32, 1, dev)?;
    let b = Tensor::rand([n, n], DType::F32, 2, dev)?;
    a.matmul(&b)?;
    dev.synchronize()?;
    let mut best = f64::INFINITY;
    for _ in 0..5 {
        let start = Instant::now();
        let c = a.matmul(&b)?;
        dev.synchronize()?;
        best = best.min(start.elapsed().as_secs_f64());
        drop(c);
    }
    Ok(best)
}

fn main() -> Result<()> {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|s| s.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![256, 512, 1024]
    } else {
        sizes
    };
    let cl = OpenCl::new()?;
    println!("device: {:?}", cl.driver().device_info());
    println!("gemm (f32): {}", cl.gemm_config(DType::F32)?);
    for &n in &sizes {
        let flops = 2.0 * (n as f64).powi(3);
        let t_cl = time_matmul(&cl, n)?;
        let t_cpu = time_matmul(&Cpu::new(), n)?;
        println!(
            "n={n:5}  opencl {:8.4}s {:7.1} GFLOP/s   cpu {:8.4}s {:7.1} GFLOP/s",
            t_cl,
            flops / t_cl / 1e9,
            t_cpu,
            flops / t_cpu / 1e9
        );
    }
    Ok(())
}
