//! The conformance suite and device behaviour on a real NVIDIA GPU (device 0). Every test
//! prints why and returns when there is no CUDA driver or device, which is the case wherever
//! the `libcuda` link stub answers; `cargo xtask gpu-check` bundles this binary for a GPU
//! machine.

include!("common/suite.rs");

use tessera_core::{Backend, DType, Error, Tensor};
use tessera_cuda::{AttentionRoute, Cuda, GemmEngine, TF32_ENV_VAR};

/// Device 0, or None after printing why the test is skipped.
fn cuda() -> Option<Cuda> {
    match Cuda::new() {
        Ok(dev) => Some(dev),
        Err(e) => {
            eprintln!("skipped: {e}");
            None
        }
    }
}

mod conformance {
    // Nothing persisted: the bundle runs on a machine without the source tree.
    conformance_suite_or_skip!(super::cuda(), None);
}

/// Ignored in a plain run: the device's counters are shared by every handle, so cuBLAS calls of
/// tests running beside it would count against the tiled handle. The gpu-check bundle runs it
/// alone (`--ignored --exact`).
#[test]
#[ignore = "reads the device-wide BLAS counter: run alone with --ignored"]
fn matmul_with_the_tiled_kernel() {
    let Some(dev) = cuda() else { return };
    let tiled = dev.with_gemm(GemmEngine::Tiled);
    let before = tiled.stats().blas_calls;
    for dtype in [DType::F32, DType::F64] {
        tessera_conformance::checks::matmul::run(&tiled, dtype);
    }
    assert_eq!(
        tiled.stats().blas_calls,
        before,
        "the tiled handle called cuBLAS"
    );
}

#[test]
fn matmul_with_cublas() {
    let Some(dev) = cuda() else { return };
    if let Err(reason) = dev.driver().cublas_library() {
        eprintln!("skipped: cuBLAS is not available on this machine ({reason})");
        return;
    }
    let blas = dev.with_gemm(GemmEngine::Blas);
    let before = blas.stats().blas_calls;
    for dtype in [DType::F32, DType::F64] {
        tessera_conformance::checks::matmul::run(&blas, dtype);
    }
    assert!(blas.stats().blas_calls > before, "cuBLAS was never called");
}

/// Attention on the routes the suite's default run does not take for most shapes: the fused
/// kernels, and the materialised route cut into one chunk per sequence (dropout counters per
/// chunk), every float dtype CUDA declares.
#[test]
fn attention_on_the_fused_and_the_chunked_routes() {
    use tessera_conformance::checks::attention::{self, AttentionOp};
    let Some(dev) = cuda() else { return };
    for route in [
        AttentionRoute::Fused,
        AttentionRoute::Materialized { chunk_scores: 1 },
    ] {
        let dev = dev.with_attention(route);
        for dtype in [DType::F32, DType::F64, DType::F16, DType::BF16] {
            if dev.supports_dtype(dtype) {
                for op in AttentionOp::ALL {
                    attention::run(&dev, op, dtype);
                }
            }
        }
    }
}

#[test]
fn cuda_declares_the_16_bit_dtypes() {
    let Some(dev) = cuda() else { return };
    for dtype in [DType::F16, DType::BF16] {
        assert!(
            dev.supports_dtype(dtype),
            "CUDA does not declare {dtype}: the conformance families skipped its cells"
        );
    }
}

#[test]
fn sixteen_bit_matmul_with_cublas_gemm_ex() {
    let Some(dev) = cuda() else { return };
    if let Err(reason) = dev.driver().cublas_library() {
        eprintln!("skipped: cuBLAS is not available on this machine ({reason})");
        return;
    }
    let blas = dev.with_gemm(GemmEngine::Blas);
    for dtype in [DType::F16, DType::BF16] {
        if !blas.supports_dtype(dtype) {
            eprintln!("skipped {dtype}: not declared (see cuda_declares_the_16_bit_dtypes)");
            continue;
        }
        let before = blas.stats().blas_calls;
        tessera_conformance::checks::matmul::run(&blas, dtype);
        assert!(
            blas.stats().blas_calls > before,
            "{dtype} products never reached cublasGemmStridedBatchedEx"
        );
    }
}

/// `count` reproducible values in [-1, 1).
fn uniform(count: usize, seed: u64) -> Vec<f32> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..count)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            ((state >> 40) as f32 / (1u64 << 23) as f32) - 1.0
        })
        .collect()
}

/// `||C - C_ref||_F / ||C_ref||_F` of `a (m x k) * b (k x n)` on `dev` against f64 on the host.
fn normwise_error(dev: &Cuda, m: usize, k: usize, n: usize) -> f64 {
    let (a, b) = (uniform(m * k, 1), uniform(k * n, 2));
    let ta = Tensor::<Cuda>::from_vec(a.clone(), [m, k], dev).unwrap();
    let tb = Tensor::<Cuda>::from_vec(b.clone(), [k, n], dev).unwrap();
    let c = ta.matmul(&tb).unwrap().to_vec::<f32>().unwrap();
    let (mut diff, mut norm) = (0.0f64, 0.0f64);
    for i in 0..m {
        for j in 0..n {
            let exact: f64 = (0..k)
                .map(|p| a[i * k + p] as f64 * b[p * n + j] as f64)
                .sum();
            diff += (c[i * n + j] as f64 - exact).powi(2);
            norm += exact * exact;
        }
    }
    (diff / norm).sqrt()
}

#[test]
fn tf32_is_off_by_default_and_within_its_rounding_when_on() {
    let Some(dev) = cuda() else { return };
    if let Err(reason) = dev.driver().cublas_library() {
        eprintln!("skipped: cuBLAS is not available on this machine ({reason})");
        return;
    }
    if std::env::var_os(TF32_ENV_VAR).is_none() {
        assert!(!dev.options().allow_tf32, "TF32 must be off by default");
    }
    let blas = dev.with_gemm(GemmEngine::Blas);
    let (m, k, n) = (256, 1024, 256);
    let f32_error = normwise_error(&blas.with_tf32(false), m, k, n);
    let before = blas.stats().blas_calls;
    let tf32_error = normwise_error(&blas.with_tf32(true), m, k, n);
    assert!(
        blas.stats().blas_calls > before,
        "the TF32 product did not use cuBLAS"
    );
    // Printed for the record: TF32 rounds the inputs to 10 mantissa bits, so its error is
    // expected near 1e-4 to 1e-3 and f32's near 1e-7.
    eprintln!("normwise relative error at {m}x{k}x{n}: f32 {f32_error:.2e}, TF32 {tf32_error:.2e}");
    assert!(f32_error < 1e-5, "f32 error {f32_error:.2e}");
    assert!(tf32_error < 1e-2, "TF32 error {tf32_error:.2e}");
}

#[test]
fn a_chain_of_ops_waits_only_at_read_back_and_reuses_memory() {
    let Some(dev) = cuda() else { return };
    let step = |seed: u64| -> tessera_core::Result<Vec<f32>> {
        let a = Tensor::<Cuda>::randn([64, 64], DType::F32, seed, &dev)?;
        let b = a.matmul(&a.t()?)?;
        let c = (&b + 1.0)?.relu()?.sum(&[1], false)?;
        c.softmax(0)?.to_vec::<f32>()
    };
    step(0).unwrap();
    let before = dev.stats();
    let values = step(1).unwrap();
    let after = dev.stats();
    assert!((values.iter().sum::<f32>() - 1.0).abs() < 1e-4);
    // Other tests share the device, so only lower bounds hold for them; this step alone
    // needs one synchronisation, and its allocations fit in blocks freed by the first step.
    assert!(after.host_syncs > before.host_syncs);
    assert!(
        after.buffers_reused > before.buffers_reused,
        "{before:?} -> {after:?}"
    );
}

#[test]
fn an_impossible_allocation_is_a_typed_out_of_memory_error() {
    let Some(dev) = cuda() else { return };
    let huge = 1usize << 46; // 256 TiB of f32
    let err = Tensor::<Cuda>::zeros([huge], DType::F32, &dev).unwrap_err();
    assert!(
        matches!(err, Error::OutOfMemory { requested_bytes, .. } if requested_bytes == huge * 4),
        "{err:?}"
    );
    // The device still works.
    let ok = Tensor::<Cuda>::ones([4], DType::F32, &dev).unwrap();
    assert_eq!(ok.to_vec::<f32>().unwrap(), vec![1.0; 4]);
}

/// 16-bit attention gradients within one ulp of the exact values on the systematic set of
/// issue 22 (the CPU and OpenCL backends run it too).
#[test]
fn sixteen_bit_attention_gradients_are_within_one_ulp() {
    use tessera_conformance::checks::attention_accuracy::check_systematic_set;
    let Some(dev) = cuda() else { return };
    for dtype in [DType::F16, DType::BF16] {
        if let Err(e) = check_systematic_set(&dev, dtype) {
            panic!("{e}");
        }
    }
}
