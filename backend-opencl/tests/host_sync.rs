//! A chain of ops performs no host synchronisation until the result is read back, and repeating
//! it creates no device buffer (everything comes from the pool).
//!
//! This file holds a single test on purpose: the counters are per device and process, so no
//! other test may run beside it.

mod common;

use tessera_core::{DType, Result, Tensor};
use tessera_opencl::OpenClTensor;

/// A training-like chain of 20 ops: upload, matmul, broadcast add, relu, softmax, gather,
/// transposed copy, reductions, casts, comparisons, where, random draws.
fn chain(dev: &tessera_opencl::OpenCl, step: u64) -> Result<OpenClTensor> {
    let x = Tensor::from_vec(
        (0..64 * 32).map(|i| (i % 7) as f32 * 0.1).collect(),
        [64, 32],
        dev,
    )?;
    let w = Tensor::randn([32, 16], DType::F32, step, dev)?;
    let b = Tensor::zeros([16], DType::F32, dev)?;
    let h = x.matmul(&w)?.add(&b)?.relu()?;
    let p = h.softmax(-1)?;
    let labels = Tensor::from_vec((0..64).map(|i| i % 16).collect::<Vec<i64>>(), [64, 1], dev)?;
    let picked = p.gather(1, &labels)?.log()?;
    let t = h.t()?.contiguous()?.sum(&[1], false)?;
    let big = h.gt(&h.mean(&[0], true)?)?;
    let masked = big.where_select(&h, &h.zeros_like()?)?;
    let counts = big
        .to_dtype(DType::I64)?
        .sum(&[0], false)?
        .to_dtype(DType::F32)?;
    picked
        .mean_all()?
        .add(&t.sum_all()?)?
        .add(&masked.max(&[0, 1], false)?)?
        .add(&counts.sum_all()?)
}

#[test]
fn a_chain_of_ops_waits_only_at_read_back_and_reuses_buffers() {
    let dev = device_or_skip!();
    // Warm-up: builds the programs, tunes the GEMM tiles (which times kernels, so waits) and
    // fills the buffer pool.
    chain(&dev, 0).unwrap().to_vec::<f32>().unwrap();

    let before = dev.stats();
    let result = chain(&dev, 1).unwrap();
    let enqueued = dev.stats();
    assert_eq!(
        enqueued.host_syncs, before.host_syncs,
        "the chain waited for the device before read-back"
    );
    assert!(
        enqueued.kernel_launches >= before.kernel_launches + 20,
        "the chain launched {} kernels",
        enqueued.kernel_launches - before.kernel_launches
    );
    assert_eq!(
        enqueued.buffers_created, before.buffers_created,
        "steady-state ops created device buffers"
    );
    assert!(enqueued.buffers_reused > before.buffers_reused);

    let value = result.to_vec::<f32>().unwrap();
    assert!(value[0].is_finite(), "{value:?}");
    let after = dev.stats();
    assert_eq!(
        after.host_syncs,
        enqueued.host_syncs + 1,
        "reading back is exactly one synchronisation"
    );
    eprintln!("before {before:?}\nafter  {after:?}");
}
