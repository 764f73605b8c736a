//! A tuning tool, not a test: times the blocked f32 GEMM of this CPU's micro-kernel under
//! several blockings in one process, round-robin, so that a noisy machine's drift hits every
//! candidate alike; prints GFLOP/s (best of the rounds) per size and candidate, with each
//! candidate's ratio to the first.
//!
//! ```text
//! RAYON_NUM_THREADS=1 taskset -c 1 cargo test --release -p tessera-cpu --lib -- \
//!     --ignored --nocapture sweep_blockings
//! ```
//!
//! `TESSERA_SWEEP_SIZES=256,1024` and `TESSERA_SWEEP_BLOCKINGS="256,1536,512;320,1536,304"`
//! (`kc,mc,nc` each) override the defaults: the sizes of `cargo xtask bench gemm`, and the
//! kernel's constants, the blocking chosen for this machine's caches and a few around it.
//!
//! Beside it, `cold_weight_products` and `cold_weight_vector_products` time the products of
//! batch-1 prefill and decoding against weights read from memory (`TESSERA_SWEEP_ROWS`, default
//! 128, sets the prefill's rows; `TESSERA_SWEEP_MIB`, default 256, the weights' rotation).

use std::time::Instant;

use super::blocking::Blocking;
use super::{blocked, chosen_path, GemmElement, MatMut, MatRef, MicroKernel};
use crate::cpu_caches::CacheSizes;

fn sizes() -> Vec<usize> {
    std::env::var("TESSERA_SWEEP_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![256, 512, 1024, 2048, 4096])
}

fn candidates(kernel: &MicroKernel<f32>) -> Vec<Blocking> {
    if let Ok(list) = std::env::var("TESSERA_SWEEP_BLOCKINGS") {
        return list
            .split(';')
            .map(|b| Blocking::parse(b, kernel).unwrap_or_else(|e| panic!("{e}")))
            .collect();
    }
    let tuned = Blocking::of_kernel(kernel);
    let chosen = Blocking::for_caches(kernel, &CacheSizes::of_this_machine());
    let mut list = vec![tuned, chosen];
    for kc in [128, 192, 256, 320, 384] {
        for nc in [128, 256, 384, 512] {
            let b = Blocking {
                kc,
                mc: tuned.mc,
                nc: nc / kernel.nr * kernel.nr,
            };
            let fits_row_major = kernel.row_major_a.is_none() || kc <= kernel.kc;
            if fits_row_major && !list.contains(&b) {
                list.push(b);
            }
        }
    }
    list
}

#[test]
#[ignore = "a tuning tool: run by hand, pinned, on a quiet machine"]
fn sweep_blockings() {
    let Some(kernel) = f32::micro_kernel(chosen_path()) else {
        eprintln!("no SIMD micro-kernel on this CPU: nothing to tune");
        return;
    };
    // The kernel as it is, and (if it has them) without its row-major A panels, so that A is
    // packed step by step: what the row-major panels save.
    let without_rows = MicroKernel {
        row_major_a: None,
        chosen_blocking: std::sync::OnceLock::new(),
        ..*kernel
    };
    let mut variants = vec![("", kernel)];
    if kernel.row_major_a.is_some() {
        variants.push((" (A packed by steps)", &without_rows));
    }
    let candidates: Vec<(&str, &MicroKernel<f32>, Blocking)> = candidates(kernel)
        .into_iter()
        .flat_map(|b| variants.iter().map(move |&(label, k)| (label, k, b)))
        .collect();
    println!(
        "{}; caches {:?}; chosen {:?}",
        kernel.name,
        CacheSizes::of_this_machine(),
        Blocking::for_caches(kernel, &CacheSizes::of_this_machine())
    );
    for n in sizes() {
        let a: Vec<f32> = (0..n * n)
            .map(|i| ((i * 7 % 13) as f32 - 6.0) / 7.0)
            .collect();
        let b: Vec<f32> = (0..n * n)
            .map(|i| ((i * 5 % 11) as f32 - 5.0) / 5.0)
            .collect();
        let mut c = vec![0f32; n * n];
        let flops = 2.0 * (n as f64).powi(3);
        let rounds = ((2e10 / flops) as usize).clamp(8, 100);
        // times[i][r]: candidate i in round r.
        let mut times = vec![Vec::with_capacity(rounds); candidates.len()];
        for _ in 0..rounds {
            for (i, &(_, kernel, blocking)) in candidates.iter().enumerate() {
                let start = Instant::now();
                // SAFETY: three n x n row-major matrices, C disjoint from A and B; the kernel
                // is the one this CPU was found to support.
                unsafe {
                    blocked::gemm(
                        kernel,
                        blocking,
                        (n, n, n),
                        MatRef::row_major(&a, n),
                        MatRef::row_major(&b, n),
                        0.0,
                        None,
                        MatMut::row_major(&mut c, n),
                    )
                }
                .unwrap();
                times[i].push(start.elapsed().as_secs_f64());
            }
        }
        for (&(label, _, blocking), own) in candidates.iter().zip(&times) {
            // Each round's ratio to the first candidate, timed next to it.
            let ratios: Vec<f64> = times[0].iter().zip(own).map(|(t0, t)| t0 / t).collect();
            let (lo, mid, hi) = spread(ratios);
            let (_, median_time, _) = spread(own.clone());
            println!(
                "n {n:5} kc {:4} mc {:5} nc {:5}{label}: {:6.1} GFLOP/s (median), {mid:.3}x [{lo:.3}, {hi:.3}] the first ({rounds} rounds)",
                blocking.kc,
                blocking.mc,
                blocking.nc,
                flops / median_time / 1e9,
            );
        }
    }
}

/// Min, median and max.
fn spread(mut values: Vec<f64>) -> (f64, f64, f64) {
    values.sort_by(f64::total_cmp);
    (
        values[0],
        values[values.len() / 2],
        values[values.len() - 1],
    )
}

#[test]
#[ignore = "a tuning tool: run by hand, pinned, on a quiet machine"]
fn micro_kernel_alone() {
    let Some(kernel) = f32::micro_kernel(chosen_path()) else {
        eprintln!("no SIMD micro-kernel on this CPU: nothing to time");
        return;
    };
    let (mr, nr) = (kernel.mr, kernel.nr);
    for k in [64usize, 128, 256, 320, 384] {
        let a = vec![0.5f32; mr * k];
        let b = vec![0.25f32; nr * k];
        let mut c = vec![0f32; mr * nr];
        let calls = 200_000_000 / (mr * nr * k);
        let best = best_of_five(|| {
            for _ in 0..calls {
                // SAFETY: panels of `mr * k` and `nr * k` values, an `mr x nr` tile.
                unsafe {
                    (kernel.run)(
                        k,
                        a.as_ptr(),
                        b.as_ptr(),
                        c.as_mut_ptr(),
                        nr as isize,
                        0.0,
                        false,
                    )
                };
            }
        });
        let flops = 2.0 * (mr * nr * k * calls) as f64;
        println!(
            "{} k {k}: {:.1} GFLOP/s from L1",
            kernel.name,
            flops / best / 1e9
        );
    }
}

#[test]
#[ignore = "a tuning tool: run by hand, pinned, on a quiet machine"]
fn micro_kernel_streaming() {
    let Some(kernel) = f32::micro_kernel(chosen_path()) else {
        return;
    };
    let (mr, nr, k) = (kernel.mr, kernel.nr, 256usize);
    // panels: how many distinct panels of the streamed operand a pass walks.
    for (what, a_panels, b_panels) in [
        ("L1 only", 1usize, 1usize),
        ("B streams 32 panels (our order, nc 512)", 1, 32),
        ("B streams 16 panels (nc 256)", 1, 16),
        ("A streams 24 panels (BLIS order, mc 144)", 24, 1),
        ("A streams 64 panels (mc 384)", 64, 1),
    ] {
        let a = vec![0.5f32; mr * k * a_panels];
        let b = vec![0.25f32; nr * k * b_panels];
        let mut c = vec![0f32; mr * nr * a_panels.max(b_panels)];
        let passes = 100_000_000 / (mr * nr * k * a_panels.max(b_panels));
        let best = best_of_five(|| {
            for _ in 0..passes {
                for p in 0..a_panels.max(b_panels) {
                    let (ai, bi) = (p % a_panels, p % b_panels);
                    // SAFETY: panel `ai` of A and `bi` of B, tile `p` of C, all inside.
                    unsafe {
                        (kernel.run)(
                            k,
                            a[ai * mr * k..].as_ptr(),
                            b[bi * nr * k..].as_ptr(),
                            c[p * mr * nr..].as_mut_ptr(),
                            nr as isize,
                            0.0,
                            false,
                        )
                    };
                }
            }
        });
        let flops = 2.0 * (mr * nr * k * passes * a_panels.max(b_panels)) as f64;
        println!("{what}: {:.1} GFLOP/s", flops / best / 1e9);
    }
}

#[test]
#[ignore = "a tuning tool: run by hand, pinned, on a quiet machine"]
fn micro_kernel_in_context() {
    let Some(kernel) = f32::micro_kernel(chosen_path()) else {
        return;
    };
    let (mr, nr, k) = (kernel.mr, kernel.nr, 256usize);
    let n = 1024usize;
    // The driver's inner loops for one 1024-row A block and one B block of `b_panels` panels:
    // for each A panel (jr), every B panel (ir), the tile (jr, ir) of a row-major n x n C.
    for (what, b_panels, c_stride, load_c) in [
        ("compact C, no load", 32usize, 0usize, false),
        ("C rows n apart, no load", 32, n, false),
        ("C rows n apart, load", 32, n, true),
        ("C rows n apart, load, nc 256", 16, n, true),
        ("C rows n apart, load, nc 128", 8, n, true),
        ("A fixed, C rows n apart, load", 32, n + 1, true),
    ] {
        let fixed_a = c_stride == n + 1;
        let c_stride = if fixed_a { n } else { c_stride };
        let a_panels = n / mr;
        let a = vec![0.5f32; mr * k * a_panels];
        let b = vec![0.25f32; nr * k * b_panels];
        let mut c = vec![0f32; n * n];
        let best = best_of_five(|| {
            for jr in 0..a_panels {
                for ir in 0..b_panels {
                    let (tile, rsc) = if c_stride == 0 {
                        (ir * mr * nr, nr)
                    } else {
                        (jr * mr * c_stride + ir * nr, c_stride)
                    };
                    // SAFETY: panel `jr` of A and `ir` of B; the tile lies inside C.
                    unsafe {
                        (kernel.run)(
                            k,
                            a[if fixed_a { 0 } else { jr * mr * k }..].as_ptr(),
                            b[ir * nr * k..].as_ptr(),
                            c[tile..].as_mut_ptr(),
                            rsc as isize,
                            1.0,
                            load_c,
                        )
                    };
                }
            }
        });
        let flops = 2.0 * (mr * nr * k * a_panels * b_panels) as f64;
        println!("{what}: {:.1} GFLOP/s", flops / best / 1e9);
    }
}

#[test]
#[ignore = "a tuning tool: run by hand, pinned, on a quiet machine"]
fn micro_kernel_blis_order() {
    let Some(kernel) = f32::micro_kernel(chosen_path()) else {
        return;
    };
    let (mr, nr, k) = (kernel.mr, kernel.nr, 256usize);
    let n = 1024usize;
    // BLIS's order: an mc-row A block in L2, each B panel in L1 for the whole block.
    for mc in [72usize, 144, 240, 1020] {
        let a_panels = mc / mr;
        let b_panels = n / nr;
        let a = vec![0.5f32; mr * k * a_panels];
        let b = vec![0.25f32; nr * k * b_panels];
        let mut c = vec![0f32; n * n];
        let best = best_of_five(|| {
            for jr in 0..b_panels {
                for ir in 0..a_panels {
                    // SAFETY: panel `ir` of A and `jr` of B; the tile lies inside C.
                    unsafe {
                        (kernel.run)(
                            k,
                            a[ir * mr * k..].as_ptr(),
                            b[jr * nr * k..].as_ptr(),
                            c[ir * mr * n + jr * nr..].as_mut_ptr(),
                            n as isize,
                            1.0,
                            true,
                        )
                    };
                }
            }
        });
        let flops = 2.0 * (mr * nr * k * a_panels * b_panels) as f64;
        println!("BLIS order, mc {mc}: {:.1} GFLOP/s", flops / best / 1e9);
    }
}

/// The shortest of five timings of `run`, in seconds.
fn best_of_five(mut run: impl FnMut()) -> f64 {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            run();
            start.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

/// `name` parsed as a number, or `default`.
fn env_number(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Distinct `k x n` f32 weights filling about `megabytes` MiB (at least one), so that a pass
/// over them reads each from memory rather than from a cache (0: one weight, which stays in
/// the caches when read again).
fn weight_rotation(k: usize, n: usize, megabytes: usize) -> Vec<Vec<f32>> {
    let copies = ((megabytes << 20) / (k * n * 4)).max(1);
    (0..copies)
        .map(|c| (0..k * n).map(|i| ((i + c) % 7) as f32 * 0.1).collect())
        .collect()
}

/// The products of a batch-1 prompt's forward pass (prefill): `m` = 128 rows of activations
/// times weights that come from memory, not from the caches (a model's weights are read once
/// per pass). Times `X·Wᵀ` (a `Linear` weight stored `[out, in]`, the transposing pack) beside
/// `X·W` (stored `[in, out]`, packed by row copies) over a rotation of weights larger than L3.
#[test]
#[ignore = "a tuning tool: run by hand, pinned, on a quiet machine"]
fn cold_weight_products() {
    let m = env_number("TESSERA_SWEEP_ROWS", 128);
    let megabytes = env_number("TESSERA_SWEEP_MIB", 256);
    for (k, n) in [
        (768usize, 768usize),
        (768, 256),
        (768, 2048),
        (2048, 768),
        (768, 32000),
    ] {
        let weights = weight_rotation(k, n, megabytes);
        let x = vec![0.5f32; m * k];
        let mut out = vec![0f32; m * n];
        for (what, transposed) in [("X·Wᵀ (W [out, in])", true), ("X·W (W [in, out])", false)] {
            let best = best_of_five(|| {
                for w in &weights {
                    let b = if transposed {
                        MatRef::row_major(w, k).t()
                    } else {
                        MatRef::row_major(w, n)
                    };
                    // SAFETY: `x` is m x k, `w` holds k x n in either layout, `out` is m x n.
                    unsafe {
                        super::try_gemm(
                            (m, k, n),
                            MatRef::row_major(&x, k),
                            b,
                            0.0,
                            MatMut::row_major(&mut out, n),
                        )
                        .unwrap()
                    };
                }
            });
            let flops = 2.0 * (m * k * n * weights.len()) as f64;
            println!(
                "m {m} k {k} n {n}, {what}: {:.1} GFLOP/s",
                flops / best / 1e9
            );
        }
    }
}

/// Batch-1 decoding's products: one row `x` times `Wᵀ` for a weight `[n, k]` read from memory
/// (a model's weights stream through once per token), as GB/s of weight read.
#[test]
#[ignore = "a tuning tool: run by hand, pinned, on a quiet machine"]
fn cold_weight_vector_products() {
    for (k, n, megabytes) in [
        (768usize, 2048usize, 256usize),
        (2048, 768, 256),
        (768, 32000, 256),
        (784, 512, 0),
        (512, 512, 0),
    ] {
        // `megabytes` 0: one weight, read again and again from the caches (batch-1 inference
        // of a small model).
        let weights = weight_rotation(k, n, megabytes);
        let copies = weights.len();
        let x = vec![0.5f32; k];
        let mut out = vec![0f32; n];
        let repeats = if copies == 1 { 200 } else { 1 };
        let best = best_of_five(|| {
            for _ in 0..repeats {
                for w in &weights {
                    // SAFETY: `x` is 1 x k, `w` holds n x k, `out` is 1 x n.
                    unsafe {
                        super::try_gemm(
                            (1, k, n),
                            MatRef::row_major(&x, k),
                            MatRef::row_major(w, k).t(),
                            0.0,
                            MatMut::row_major(&mut out, n),
                        )
                        .unwrap()
                    };
                }
            }
        });
        let bytes = (k * n * 4 * copies * repeats) as f64;
        let place = if copies == 1 { "cached" } else { "from memory" };
        println!("x·Wᵀ k {k} n {n}, {place}: {:.1} GB/s", bytes / best / 1e9);
    }
}
