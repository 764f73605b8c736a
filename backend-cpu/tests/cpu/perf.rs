//! Timing runs (ignored by default). Run with
//! `cargo test -p tessera-cpu --release -- --ignored --nocapture perf`.

use crate::common::*;
use std::time::Instant;
use tessera_cpu::CpuTensor;

/// Best wall time in seconds of `reps` runs of `f` after one warm-up.
fn best_of(reps: usize, mut f: impl FnMut()) -> f64 {
    f();
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

#[test]
#[ignore = "timing; run in release with --ignored --nocapture"]
fn perf_matmul_1024_f32() {
    let n = 1024;
    let a = tensor_f32(&values(n * n, 1, -1.0, 1.0), &[n, n]);
    let b = tensor_f32(&values(n * n, 2, -1.0, 1.0), &[n, n]);
    let secs = best_of(5, || {
        a.matmul(&b).unwrap();
    });
    let gflops = 2.0 * (n as f64).powi(3) / secs / 1e9;
    println!(
        "matmul {n}x{n}x{n} f32: {:.2} ms, {gflops:.1} GFLOP/s",
        secs * 1e3
    );
    let bt = b.t().unwrap();
    let secs = best_of(5, || {
        a.matmul(&bt).unwrap();
    });
    let gflops = 2.0 * (n as f64).powi(3) / secs / 1e9;
    println!(
        "matmul {n}x{n}x{n} f32 (rhs transposed): {:.2} ms, {gflops:.1} GFLOP/s",
        secs * 1e3
    );
}

#[test]
#[ignore = "timing; run in release with --ignored --nocapture"]
fn perf_elementwise_and_reduce() {
    let n = 4 << 20;
    let a = tensor_f32(&values(n, 3, -1.0, 1.0), &[n]);
    let b = tensor_f32(&values(n, 4, -1.0, 1.0), &[n]);
    let secs = best_of(10, || {
        a.add(&b).unwrap();
    });
    // Two 16 MiB reads and one 16 MiB write.
    println!(
        "add 4M f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        3.0 * 4.0 * n as f64 / secs / 1e9
    );
    let row = tensor_f32(&values(1024, 5, -1.0, 1.0), &[1024]);
    let m = a.reshape([4096, 1024]).unwrap();
    let secs = best_of(10, || {
        m.add(&row).unwrap();
    });
    println!(
        "add [4096,1024] + [1024] f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        2.0 * 4.0 * n as f64 / secs / 1e9
    );
    let secs = best_of(10, || {
        m.sum(&[1], false).unwrap();
    });
    println!(
        "sum [4096,1024] over last axis f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        4.0 * n as f64 / secs / 1e9
    );
    let secs = best_of(10, || {
        m.sum(&[0], false).unwrap();
    });
    println!(
        "sum [4096,1024] over first axis f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        4.0 * n as f64 / secs / 1e9
    );
    let secs = best_of(10, || {
        a.sum_all().unwrap();
    });
    println!(
        "sum_all 4M f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        4.0 * n as f64 / secs / 1e9
    );
    let mt = m.t().unwrap();
    let secs = best_of(10, || {
        mt.contiguous().unwrap();
    });
    println!(
        "transpose copy [1024,4096] f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        2.0 * 4.0 * n as f64 / secs / 1e9
    );
    let sq = a.reshape([2048, 2048]).unwrap();
    let sqt = sq.t().unwrap();
    let secs = best_of(10, || {
        sq.add(&sqt).unwrap();
    });
    println!(
        "add [2048,2048] + its transpose f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        3.0 * 4.0 * n as f64 / secs / 1e9
    );
    let secs = best_of(10, || {
        a.exp().unwrap();
    });
    println!(
        "exp 4M f32: {:.3} ms, {:.1} GB/s",
        secs * 1e3,
        2.0 * 4.0 * n as f64 / secs / 1e9
    );
    let _ = CpuTensor::scalar(0f32, &cpu());
}
