//! The engine's buffer pool on an OpenCL device: requests no device can meet are typed
//! `OutOfMemory` errors naming the bytes (never an abort), the device keeps working, and the
//! pool reports and gives back what it caches.
//!
//! A single test on purpose: it empties the device's cache, which no other test may fill
//! meanwhile.

mod common;

use tessera_core::{DType, Error, Tensor};
use tessera_opencl::OpenCl;

#[test]
fn impossible_requests_are_out_of_memory_and_the_cache_can_be_emptied() {
    let dev = device_or_skip!();
    let huge = 1usize << 40;
    let out_of_memory = |result: tessera_core::Result<Tensor<OpenCl>>, bytes: usize| {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::OutOfMemory { device, requested_bytes }
                if device.starts_with("opencl:") && *requested_bytes == bytes),
            "{err:?}"
        );
    };
    out_of_memory(Tensor::zeros([huge], DType::F32, &dev), huge * 4);
    out_of_memory(Tensor::randn([huge], DType::F32, 0, &dev), huge * 4);
    out_of_memory(Tensor::full([huge], 1.0, DType::I64, &dev), huge * 8);
    let err = dev.runtime().alloc(DType::F32, usize::MAX / 2).unwrap_err();
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

    // The device still works, and what it freed is cached, then given back.
    let x = Tensor::<OpenCl>::ones([1000], DType::F32, &dev).unwrap();
    assert_eq!(x.sum_all().unwrap().to_vec::<f32>().unwrap(), vec![1000.0]);
    drop(x);
    let usage = dev.memory_usage();
    assert!(usage.cached_bytes >= 4000, "{usage:?}");
    assert!(usage.cached_bytes <= usage.allocated_bytes, "{usage:?}");
    dev.empty_cache().unwrap();
    assert_eq!(dev.memory_usage().cached_bytes, 0);
}
