//! Times a product with a transposed right operand (the shape of a linear layer's input
//! gradient in the MLP): `[128, 512] x [784, 512]ᵀ`, 50 times.

use std::time::Instant;
use tessera_core::{Backend, DType, Result, Tensor};
use tessera_opencl::OpenCl;

fn main() -> Result<()> {
    let dev = OpenCl::new()?;
    let x = Tensor::rand([128, 512], DType::F32, 1, &dev)?;
    let w = Tensor::rand([784, 512], DType::F32, 2, &dev)?;
    x.matmul(&w.t()?)?;
    dev.synchronize()?;
    let start = Instant::now();
    for _ in 0..50 {
        x.matmul(&w.t()?)?;
    }
    dev.synchronize()?;
    let s = start.elapsed().as_secs_f64() / 50.0;
    println!(
        "{:.3} ms per product, {:.1} GFLOP/s",
        s * 1e3,
        2.0 * 128.0 * 512.0 * 784.0 / s / 1e9
    );
    Ok(())
}
