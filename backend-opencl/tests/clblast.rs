//! Matrix products through CLBlast (`TESSERA_OPENCL_GEMM=clblast`, `GemmEngine::Blas`)
//! compared with the CPU backend: transposed, offset, strided, batched and broadcast operands
//! that CLBlast reads in place (counted as BLAS calls), and operands it cannot read (no unit
//! stride), which fall back to the tiled kernel. Also the route's choice and errors: `auto`
//! without the library runs the tiled kernel, `clblast` without it fails with a typed error
//! naming why, and an unknown value of the variable is refused when the device is opened (those
//! run in a child process of this test binary, with its own environment).
//!
//! Skips, printing why, without an OpenCL device or without CLBlast (`libclblast1`);
//! `TESSERA_REQUIRE_CLBLAST=1` (set by CI) turns a missing CLBlast into a failure.

mod common;

use std::process::Command;
use std::sync::{Mutex, MutexGuard, PoisonError};
use tessera_core::{Backend, DType, Error, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_gpu::GemmKernel;
use tessera_opencl::clblast::{GEMM_ENV_VAR, LIBRARY_ENV_VAR};
use tessera_opencl::{DeviceKind, GemmEngine, OpenCl, OpenClTensor};

/// Serialises the tests of this binary that count BLAS calls: the count is the device's, shared
/// by every test running in parallel.
fn counting() -> MutexGuard<'static, ()> {
    static COUNTING: Mutex<()> = Mutex::new(());
    COUNTING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The shared device with the CLBlast route, or None after printing why it is skipped.
fn clblast_device() -> Option<OpenCl> {
    let dev = common::device()?;
    match dev.driver().clblast_library() {
        Ok(path) => {
            eprintln!("CLBlast: {}", path.display());
            Some(dev.with_gemm(GemmEngine::Blas))
        }
        Err(reason) if std::env::var_os("TESSERA_REQUIRE_CLBLAST").is_some() => {
            panic!("TESSERA_REQUIRE_CLBLAST is set but {reason}")
        }
        Err(reason) => {
            eprintln!("skipped: no CLBlast ({reason})");
            None
        }
    }
}

/// One product: the operands' shapes, the views taken of them, and whether CLBlast can read
/// those views in place.
#[derive(Clone, Copy, Debug)]
enum Case {
    /// `[m, k] x [k, n]`, contiguous.
    Plain,
    /// `Aᵀ x B` with A stored `[k, m]`.
    TransposedA,
    /// `A x Bᵀ` with B stored `[n, k]` (a linear layer's weight).
    TransposedB,
    /// Both transposed.
    BothTransposed,
    /// Column windows of wider matrices: offsets and leading dimensions above the width.
    OffsetWindows,
    /// `[batch, m, k] x [batch, k, n]`.
    Batched,
    /// A batch of transposed B (`[batch, n, k]` read as `[batch, k, n]`) from an offset.
    BatchedTransposedOffset,
    /// One A broadcast over B's batch (batch stride 0).
    BroadcastA,
    /// Four-dimensional, batch dims merged into one CLBlast call.
    FourDimensional,
    /// `[1, k] x [k, n]` and a single column: degenerate sizes.
    RowTimesMatrix,
    /// Every other column of A: no unit stride, so the tiled kernel runs.
    SteppedColumns,
    /// A slice with steps along both axes of B: the tiled kernel runs.
    SteppedBoth,
}

impl Case {
    const ALL: [Case; 12] = [
        Case::Plain,
        Case::TransposedA,
        Case::TransposedB,
        Case::BothTransposed,
        Case::OffsetWindows,
        Case::Batched,
        Case::BatchedTransposedOffset,
        Case::BroadcastA,
        Case::FourDimensional,
        Case::RowTimesMatrix,
        Case::SteppedColumns,
        Case::SteppedBoth,
    ];

    /// Shapes of the stored operands.
    fn shapes(self) -> (Vec<usize>, Vec<usize>) {
        match self {
            Case::Plain => (vec![37, 19], vec![19, 23]),
            Case::TransposedA => (vec![19, 37], vec![19, 23]),
            Case::TransposedB => (vec![37, 19], vec![23, 19]),
            Case::BothTransposed => (vec![19, 37], vec![23, 19]),
            Case::OffsetWindows => (vec![37, 30], vec![19, 40]),
            Case::Batched => (vec![3, 17, 9], vec![3, 9, 21]),
            Case::BatchedTransposedOffset => (vec![3, 17, 9], vec![4, 21, 9]),
            Case::BroadcastA => (vec![17, 9], vec![5, 9, 21]),
            Case::FourDimensional => (vec![2, 3, 8, 5], vec![2, 3, 5, 7]),
            Case::RowTimesMatrix => (vec![1, 33], vec![33, 1]),
            Case::SteppedColumns => (vec![12, 38], vec![19, 11]),
            Case::SteppedBoth => (vec![12, 19], vec![38, 22]),
        }
    }

    /// Whether the product makes BLAS calls on a device whose kernel for the dtype is
    /// `kernel`: every case CLBlast reads in place; a B without any unit stride only when the
    /// engine packs it first for the direct kernel (which reads B's columns contiguously), after
    /// which CLBlast reads the packed copy; never a stepped A.
    fn reaches_clblast(self, kernel: GemmKernel) -> bool {
        match self {
            Case::SteppedColumns => false,
            Case::SteppedBoth => kernel == GemmKernel::Direct,
            _ => true,
        }
    }

    /// The product of the case's views of `a` and `b`.
    fn product<B: Backend>(self, a: &Tensor<B>, b: &Tensor<B>) -> Result<Tensor<B>> {
        match self {
            Case::Plain => a.matmul(b),
            Case::TransposedA => a.t()?.matmul(b),
            Case::TransposedB => a.matmul(&b.t()?),
            Case::BothTransposed => a.t()?.matmul(&b.t()?),
            Case::OffsetWindows => a.narrow(1, 7, 19)?.matmul(&b.narrow(1, 11, 23)?),
            Case::Batched => a.matmul(b),
            Case::BatchedTransposedOffset => a.matmul(&b.narrow(0, 1, 3)?.transpose(1, 2)?),
            Case::BroadcastA => a.unsqueeze(0)?.expand([5, 17, 9])?.matmul(b),
            Case::FourDimensional => a.matmul(b),
            Case::RowTimesMatrix => a.matmul(b)?.matmul(&b.t()?),
            Case::SteppedColumns => a.slice(1, 0, 38, 2)?.matmul(b),
            Case::SteppedBoth => a.matmul(&b.slice(0, 0, 38, 2)?.slice(1, 0, 22, 2)?),
        }
    }
}

/// Runs every case in `dtype` on `dev` and on the CPU (in f64): results within `tol` of each
/// other relative to the largest magnitude, and BLAS calls exactly where CLBlast can read the
/// operands.
fn compare_with_cpu(dev: &OpenCl, dtype: DType, tol: f64) {
    let _serial = counting();
    let cpu = Cpu::new();
    let kernel = dev.gemm_config(dtype).unwrap().kernel;
    for (i, case) in Case::ALL.into_iter().enumerate() {
        let (sa, sb) = case.shapes();
        let a = Tensor::randn(sa, DType::F64, 10 + i as u64, &cpu).unwrap();
        let b = Tensor::randn(sb, DType::F64, 100 + i as u64, &cpu).unwrap();
        let expected = case.product(&a, &b).unwrap();
        let (da, db): (OpenClTensor, OpenClTensor) = (
            a.to_dtype(dtype).unwrap().to_backend(dev).unwrap(),
            b.to_dtype(dtype).unwrap().to_backend(dev).unwrap(),
        );
        let before = dev.stats().blas_calls;
        let got = case.product(&da, &db).unwrap();
        let got_values = got.to_vec_f64().unwrap();
        let calls = dev.stats().blas_calls - before;
        assert_eq!(got.dims(), expected.dims(), "{case:?} {dtype}");
        let want = expected.to_vec_f64().unwrap();
        let scale = want.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (j, (g, w)) in got_values.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= tol * scale,
                "{case:?} {dtype}: element {j} is {g}, the CPU says {w}"
            );
        }
        if case.reaches_clblast(kernel) {
            assert!(calls >= 1, "{case:?} {dtype}: no CLBlast call");
        } else {
            assert_eq!(calls, 0, "{case:?} {dtype}: CLBlast was called");
        }
    }
}

#[test]
fn f32_products_through_clblast_match_the_cpu() {
    let Some(dev) = clblast_device() else { return };
    compare_with_cpu(&dev, DType::F32, 1e-5);
}

#[test]
fn f64_products_through_clblast_match_the_cpu() {
    let Some(dev) = clblast_device() else { return };
    if !dev.supports_dtype(DType::F64) {
        eprintln!("skipped: the device has no f64");
        return;
    }
    compare_with_cpu(&dev, DType::F64, 1e-12);
}

#[test]
fn sixteen_bit_products_stay_on_the_tiled_kernel() {
    let Some(dev) = clblast_device() else { return };
    let _serial = counting();
    let cpu = Cpu::new();
    for dtype in [DType::F16, DType::BF16] {
        let a = Tensor::randn([8, 16], DType::F64, 1, &cpu).unwrap();
        let b = Tensor::randn([16, 4], DType::F64, 2, &cpu).unwrap();
        let before = dev.stats().blas_calls;
        let got = a
            .to_dtype(dtype)
            .unwrap()
            .to_backend(&dev)
            .unwrap()
            .matmul(&b.to_dtype(dtype).unwrap().to_backend(&dev).unwrap())
            .unwrap()
            .to_vec_f64()
            .unwrap();
        assert_eq!(dev.stats().blas_calls, before, "{dtype}");
        let want = a.matmul(&b).unwrap().to_vec_f64().unwrap();
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 0.05 * (1.0 + w.abs()),
                "{dtype}: {g} vs {w}"
            );
        }
    }
}

#[test]
fn the_tiled_and_clblast_routes_agree_and_only_one_calls_clblast() {
    let Some(blas) = clblast_device() else { return };
    let _serial = counting();
    let host_a: Vec<f32> = (0..64 * 48)
        .map(|i| ((i * 7 % 23) as f32 - 11.0) / 8.0)
        .collect();
    let host_b: Vec<f32> = (0..48 * 80)
        .map(|i| ((i * 5 % 19) as f32 - 9.0) / 4.0)
        .collect();
    let product = |dev: &OpenCl| {
        let a = OpenClTensor::from_vec(host_a.clone(), [64, 48], dev).unwrap();
        let b = OpenClTensor::from_vec(host_b.clone(), [48, 80], dev).unwrap();
        let before = dev.stats().blas_calls;
        let c = a.matmul(&b).unwrap().to_vec::<f32>().unwrap();
        (c, dev.stats().blas_calls - before)
    };
    let (tiled, tiled_calls) = product(&blas.with_gemm(GemmEngine::Tiled));
    let (clblast, clblast_calls) = product(&blas);
    let (auto, auto_calls) = product(&blas.with_gemm(GemmEngine::Auto));
    // `auto` asks CLBlast on GPUs and accelerators, not on CPU devices (where the tiled kernel
    // measured faster).
    let cpu_device = blas.driver().device_info().kind == DeviceKind::Cpu;
    let auto_expected = if cpu_device { 0 } else { 1 };
    assert_eq!(
        (tiled_calls, clblast_calls, auto_calls),
        (0, 1, auto_expected)
    );
    // Products of multiples of 1/8 and 1/4 with 48 terms are exact in f32 on both routes.
    assert_eq!(tiled, clblast);
    assert_eq!(tiled, auto);
    let route = blas.driver().gemm_route(GemmEngine::Auto);
    let prefix = if cpu_device {
        "tiled GEMM kernel (auto on a CPU"
    } else {
        "CLBlast ("
    };
    assert!(route.starts_with(prefix), "{route}");
}

/// Runs test `name` of this binary in a child process with `env`, expecting it to pass.
fn run_child(name: &str, env: &[(&str, &str)]) {
    let exe = std::env::current_exe().unwrap();
    let mut command = Command::new(exe);
    command.args([name, "--exact", "--nocapture", "--test-threads=1"]);
    command.env("TESSERA_CLBLAST_CHILD", "1");
    for (k, v) in env {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(output.status.success(), "child {name} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "child {name} ran nothing:\n{text}"
    );
}

/// Whether this process is a child started by [`run_child`].
fn in_child() -> bool {
    std::env::var_os("TESSERA_CLBLAST_CHILD").is_some()
}

#[test]
fn without_the_library_auto_runs_the_tiled_kernel_and_clblast_fails_naming_why() {
    if common::device().is_none() {
        return;
    }
    run_child(
        "child_without_clblast",
        &[
            (LIBRARY_ENV_VAR, "/nonexistent/libclblast.so.1"),
            (GEMM_ENV_VAR, "auto"),
        ],
    );
}

#[test]
fn child_without_clblast() {
    if !in_child() {
        return;
    }
    let dev = OpenCl::new().unwrap();
    assert_eq!(dev.options().engine, GemmEngine::Auto);
    let reason = dev.driver().clblast_library().unwrap_err();
    assert!(reason.contains("/nonexistent/libclblast.so.1"), "{reason}");
    let route = dev.driver().gemm_route(GemmEngine::Auto);
    assert!(route.starts_with("tiled GEMM kernel"), "{route}");
    let a = OpenClTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev).unwrap();
    let product = a.matmul(&a).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(product, vec![7.0, 10.0, 15.0, 22.0]);
    assert_eq!(dev.stats().blas_calls, 0);
    // Asking for CLBlast explicitly: a typed error at the first product, saying why.
    let blas = dev.with_gemm(GemmEngine::Blas);
    let b = OpenClTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &blas).unwrap();
    let err = b.matmul(&b).unwrap_err();
    assert!(
        matches!(&err, Error::Backend { backend: "opencl", op: "matmul", msg }
            if msg.contains("unavailable") && msg.contains("libclblast1")),
        "{err}"
    );
    assert!(blas
        .driver()
        .gemm_route(GemmEngine::Blas)
        .contains("unavailable"));
}

#[test]
fn the_variable_chooses_the_route_and_refuses_unknown_values() {
    if common::device().is_none() {
        return;
    }
    run_child("child_with_gemm_variable", &[(GEMM_ENV_VAR, "tiled")]);
    run_child("child_with_bad_gemm_variable", &[(GEMM_ENV_VAR, "fastest")]);
}

#[test]
fn child_with_gemm_variable() {
    if !in_child() {
        return;
    }
    let dev = OpenCl::new().unwrap();
    assert_eq!(dev.options().engine, GemmEngine::Tiled);
    let a = OpenClTensor::randn([16, 16], DType::F32, 5, &dev).unwrap();
    a.matmul(&a).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(dev.stats().blas_calls, 0);
    assert_eq!(
        dev.driver().gemm_route(GemmEngine::Tiled),
        "tiled GEMM kernel (the handle's engine is Tiled)"
    );
}

#[test]
fn child_with_bad_gemm_variable() {
    if !in_child() {
        return;
    }
    let err = OpenCl::new().unwrap_err();
    assert!(
        matches!(&err, Error::InvalidArgument { op, msg } if *op == GEMM_ENV_VAR && msg.contains("fastest")),
        "{err}"
    );
}
