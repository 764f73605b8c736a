//! The conformance suite and device behaviour on a real NVIDIA GPU (device 0). Every test
//! prints why and returns when there is no CUDA driver or device, which is the case wherever
//! the `libcuda` link stub answers; `cargo xtask gpu-check` bundles this binary for a GPU
//! machine.

include!("common/suite.rs");

use tessera_core::{DType, Error, Tensor};
use tessera_cuda::{Cuda, GemmEngine};

/// Device 0, or None after printing why the test is skipped.
fn cuda() -> Option<Cuda> {
    match Cuda::new(0) {
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

/// The fused attention kernels, both passes (until the harness registers an attention family).
#[test]
fn attention_with_the_fused_kernels() {
    let Some(dev) = cuda() else { return };
    for op in tessera_conformance::checks::attention::AttentionOp::ALL {
        for dtype in [DType::F32, DType::F64] {
            tessera_conformance::checks::attention::run(&dev, op, dtype);
        }
    }
}

#[test]
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
    if let Err(reason) = dev.cublas_library() {
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
