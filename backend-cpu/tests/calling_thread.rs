//! `join_thread_pool` makes the calling thread worker 0 of rayon's global pool, the backend's
//! ops started on it compute correctly there (split products and element-wise ops), and other
//! threads can still use the backend while that thread is blocked outside rayon. Its own test
//! binary without libtest's harness (`harness = false`): rayon's global pool is built once per
//! process, and libtest would run the test on a thread of its own. The outcomes that need a
//! fresh process of their own (one thread, switched off, a pool that already existed) run this
//! binary again as a child.

use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use tessera_core::Result;
use tessera_cpu::{join_thread_pool, Cpu, CpuTensor, PoolJoin, CALLING_THREAD_ENV_VAR};

/// The child's argument: which outcome to check.
const CHILD: &str = "--child";

fn main() {
    let mut args = std::env::args().skip(1);
    if args.next().as_deref() == Some(CHILD) {
        child(&args.next().expect("a child case"));
        return;
    }
    for case in ["single", "disabled", "already"] {
        let mut command = Command::new(std::env::current_exe().expect("this test's path"));
        command
            .args([CHILD, case])
            .env_remove(CALLING_THREAD_ENV_VAR);
        match case {
            "single" => command.env("RAYON_NUM_THREADS", "1"),
            "disabled" => command
                .env("RAYON_NUM_THREADS", "3")
                .env(CALLING_THREAD_ENV_VAR, "0"),
            _ => command.env("RAYON_NUM_THREADS", "3"),
        };
        let status = command.status().expect("the child runs");
        assert!(status.success(), "child case {case}: {status}");
        println!("join_thread_pool, {case}: ok");
    }
    joined_pool_computes_and_serves_other_threads();
    println!("join_thread_pool, joined: ok");
}

/// One outcome other than joining, in a process of its own.
fn child(case: &str) {
    let outcome = match case {
        "already" => {
            // Anything that touches rayon first builds the global pool with its defaults.
            assert_eq!(rayon::current_num_threads(), 3);
            join_thread_pool()
        }
        _ => join_thread_pool(),
    };
    let expected_threads = if case == "single" { 1 } else { 3 };
    assert_eq!(
        tessera_cpu::default_pool_threads(),
        expected_threads,
        "case {case}"
    );
    match (case, &outcome) {
        ("single", PoolJoin::SingleThread)
        | ("disabled", PoolJoin::Disabled)
        | ("already", PoolJoin::AlreadyInitialized(_)) => {}
        _ => panic!("case {case}: {outcome:?}"),
    }
    assert_eq!(rayon::current_thread_index(), None, "case {case}");
}

fn joined_pool_computes_and_serves_other_threads() {
    // SAFETY-free in edition 2021: no other thread exists yet to read the environment.
    std::env::set_var("RAYON_NUM_THREADS", "3");
    std::env::remove_var(CALLING_THREAD_ENV_VAR);
    assert_eq!(tessera_cpu::default_pool_threads(), 3);
    assert_eq!(join_thread_pool(), PoolJoin::Joined { threads: 3 });
    assert_eq!(rayon::current_thread_index(), Some(0));
    assert_eq!(rayon::current_num_threads(), 3);
    assert!(matches!(
        join_thread_pool(),
        PoolJoin::AlreadyInitialized(_)
    ));

    // Ops on this thread: a product large enough to be split over the pool, and an
    // element-wise op above the parallel threshold, against f64 arithmetic.
    check_product_and_map(0).expect("ops on the calling thread");

    // Another thread uses the backend while this one waits outside rayon: the pool's other
    // workers run its ops.
    let (done, finished) = mpsc::channel();
    let other = std::thread::spawn(move || {
        let outcome = check_product_and_map(1);
        let _ = done.send(());
        outcome
    });
    finished
        .recv_timeout(Duration::from_secs(120))
        .expect("another thread's ops finish while the pool's first thread is blocked");
    other
        .join()
        .expect("the other thread does not panic")
        .expect("ops on another thread");
}

/// A 192 x 160 x 224 product (split over threads) and `x * 2 + 1` over 100,000 elements.
fn check_product_and_map(seed: u64) -> Result<()> {
    let dev = Cpu::new();
    let (m, k, n) = (192usize, 160usize, 224usize);
    let value = |i: usize, salt: u64| {
        (((i as u64 * 2_654_435_761 + salt * 97) % 1000) as f32) / 500.0 - 1.0
    };
    let a_values: Vec<f32> = (0..m * k).map(|i| value(i, seed)).collect();
    let b_values: Vec<f32> = (0..k * n).map(|i| value(i, seed + 7)).collect();
    let a = CpuTensor::from_vec(a_values.clone(), [m, k], &dev)?;
    let b = CpuTensor::from_vec(b_values.clone(), [k, n], &dev)?;
    let c = a.matmul(&b)?.to_vec::<f32>()?;
    for i in 0..m {
        for j in 0..n {
            let expected: f64 = (0..k)
                .map(|p| a_values[i * k + p] as f64 * b_values[p * n + j] as f64)
                .sum();
            let got = c[i * n + j] as f64;
            assert!(
                (got - expected).abs() <= 1e-4 * (1.0 + expected.abs()),
                "C[{i}, {j}] = {got}, expected {expected}"
            );
        }
    }
    let len = 100_000;
    let x_values: Vec<f32> = (0..len).map(|i| value(i, seed + 3)).collect();
    let x = CpuTensor::from_vec(x_values.clone(), [len], &dev)?;
    let y = x.mul_scalar(2.0)?.add_scalar(1.0)?.to_vec::<f32>()?;
    for (i, (&got, &x)) in y.iter().zip(&x_values).enumerate() {
        assert_eq!(got, x * 2.0 + 1.0, "element {i}");
    }
    Ok(())
}
