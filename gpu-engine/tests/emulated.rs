//! The engine honours its driver's description, checked on `tessera_opencl::testing::emulator`
//! (the OpenCL driver on the default OpenCL device, PoCL in CI, under the description a test
//! gives it): a device without f64 says so through `supports_dtype`, the
//! conformance suite's capabilities follow, and every f64 op is a typed error; requests no
//! device can meet are `OutOfMemory` naming the bytes. Skips, printing why, without an OpenCL
//! device.

use tessera_conformance::suite::{assert_family, Capabilities, Family};
use tessera_core::{Backend, DType, Error, Tensor};
use tessera_gpu::{DriverInfo, GemmOptions, Gpu, Runtime};
use tessera_opencl::testing::emulator;
use tessera_opencl::OpenClDriver;

type Dev = Gpu<OpenClDriver>;

/// A new emulated device whose description `adjust` changes, or None after printing why.
fn emulated(adjust: impl FnOnce(&mut DriverInfo)) -> Option<Dev> {
    let made = emulator(adjust)
        .and_then(Runtime::new)
        .and_then(|rt| Gpu::from_runtime(rt, GemmOptions::default()));
    match made {
        Ok(dev) => Some(dev),
        Err(e) => {
            eprintln!("skipped: no OpenCL device to emulate on ({e})");
            None
        }
    }
}

#[test]
fn without_f64_every_f64_op_is_unsupported_and_the_suite_declares_no_f64() {
    let Some(dev) = emulated(|info| info.supports_f64 = false) else {
        return;
    };
    assert!(!dev.supports_dtype(DType::F64));
    for dtype in [DType::F32, DType::I64, DType::Bool] {
        assert!(dev.supports_dtype(dtype), "{dtype}");
    }
    let capabilities = Capabilities::declared_by(&dev);
    assert!(!capabilities.dtypes().contains(&DType::F64));

    let unsupported = |result: tessera_core::Result<Tensor<Dev>>| {
        let err = result.unwrap_err();
        assert!(
            matches!(
                err,
                Error::UnsupportedDType {
                    dtype: DType::F64,
                    ..
                }
            ),
            "{err:?}"
        );
    };
    unsupported(Tensor::zeros([3], DType::F64, &dev));
    unsupported(Tensor::from_vec(vec![1.0f64, 2.0], [2], &dev));
    unsupported(Tensor::randn([3], DType::F64, 0, &dev));
    let x = Tensor::from_vec(vec![1.0f32, 4.0], [2], &dev).unwrap();
    unsupported(x.to_dtype(DType::F64));
    assert_eq!(
        x.sqrt().unwrap().to_vec::<f32>().unwrap(),
        vec![1.0, 2.0],
        "f32 still works"
    );
    // The suite runs exactly the declared cells (casts among f32, f16, bf16, i64 and bool) and
    // they pass.
    let config = tessera_conformance::runner::RunConfig::from_env();
    assert_family(&dev, Family::Cast, &capabilities, &config);
}

#[test]
fn the_16_bit_floats_are_supported_on_every_device_and_declared() {
    // Not even f64 is needed: 16-bit storage computes in f32 (see kernels/half.cl.c).
    let Some(dev) = emulated(|info| info.supports_f64 = false) else {
        return;
    };
    let capabilities = Capabilities::declared_by(&dev);
    for dtype in [DType::F16, DType::BF16] {
        assert!(dev.supports_dtype(dtype), "{dtype}");
        assert!(capabilities.dtypes().contains(&dtype), "{dtype}");
    }
    let x = Tensor::from_vec(vec![1.0f32, 4.0], [2], &dev).unwrap();
    let h = x.to_dtype(DType::BF16).unwrap().sqrt().unwrap();
    assert_eq!(h.dtype(), DType::BF16);
    assert_eq!(
        h.to_vec::<tessera_core::bf16>().unwrap(),
        [1.0f32, 2.0].map(tessera_core::bf16::from_f32)
    );
}

#[test]
fn with_f64_the_device_answers_what_it_has() {
    let Some(dev) = emulated(|_| {}) else {
        return;
    };
    let has_f64 = dev.runtime().info().supports_f64;
    assert_eq!(dev.supports_dtype(DType::F64), has_f64);
    assert_eq!(
        Capabilities::declared_by(&dev)
            .dtypes()
            .contains(&DType::F64),
        has_f64
    );
    if has_f64 {
        let x = Tensor::from_vec(vec![0.1f64, 0.2], [2], &dev).unwrap();
        assert_eq!(
            x.sum_all().unwrap().to_vec::<f64>().unwrap(),
            vec![0.1 + 0.2]
        );
    }
}

#[test]
fn impossible_requests_are_out_of_memory_naming_the_bytes() {
    let Some(dev) = emulated(|info| info.backend = "emulated") else {
        return;
    };
    let huge = 1usize << 40;
    let err = Tensor::<Dev>::zeros([huge], DType::F32, &dev).unwrap_err();
    assert!(
        matches!(&err, Error::OutOfMemory { device, requested_bytes }
            if device.starts_with("emulated:0") && *requested_bytes == huge * 4),
        "{err:?}"
    );
    let err = Tensor::<Dev>::full([huge], 1.0, DType::I64, &dev).unwrap_err();
    assert!(
        matches!(err, Error::OutOfMemory { requested_bytes, .. } if requested_bytes == huge * 8),
        "{err:?}"
    );
    let err = dev.runtime().alloc(DType::F64, usize::MAX / 4).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfMemory {
                requested_bytes: usize::MAX,
                ..
            }
        ),
        "a byte count past usize::MAX: {err:?}"
    );
    let ok = Tensor::<Dev>::ones([3], DType::F32, &dev).unwrap();
    assert_eq!(ok.to_vec::<f32>().unwrap(), vec![1.0; 3]);
}
