//! The engine's buffer pool under CUDA's profile (every freed block cached), on the emulated
//! device: steady-state work allocates nothing, impossible requests are typed errors.

use super::private_emulated;
use tessera_core::{DType, Error, Tensor};

#[test]
fn repeating_a_step_reuses_every_buffer() {
    let Some(dev) = private_emulated(|_| {}) else {
        return;
    };
    let step = |seed: u64| -> tessera_core::Result<Vec<f32>> {
        let a = Tensor::randn([32, 16], DType::F32, seed, &dev)?;
        let b = a.matmul(&a.t()?)?.relu()?;
        (&b + 1.0)?
            .log_softmax(1)?
            .sum(&[1], false)?
            .to_vec::<f32>()
    };
    step(0).unwrap();
    let before = dev.stats();
    step(1).unwrap();
    let after = dev.stats();
    assert_eq!(after.buffers_created, before.buffers_created, "{after:?}");
    assert!(after.buffers_reused > before.buffers_reused);
    let usage = dev.memory_usage();
    assert!(usage.cached_bytes > 0 && usage.cached_bytes <= usage.allocated_bytes);
    dev.empty_cache().unwrap();
    assert_eq!(dev.memory_usage().cached_bytes, 0);
}

#[test]
fn impossible_requests_are_out_of_memory_and_the_device_keeps_working() {
    let Some(dev) = private_emulated(|_| {}) else {
        return;
    };
    let huge = 1usize << 40;
    for result in [
        Tensor::<super::Emulated>::zeros([huge], DType::F32, &dev),
        Tensor::<super::Emulated>::randn([huge], DType::F32, 0, &dev),
    ] {
        let err = result.unwrap_err();
        assert!(
            matches!(&err, Error::OutOfMemory { device, requested_bytes }
                if device.starts_with("cuda:") && *requested_bytes == huge * 4),
            "{err:?}"
        );
    }
    // A byte count that does not fit in a usize.
    let err = dev.runtime().alloc(DType::F64, usize::MAX / 2).unwrap_err();
    assert!(
        matches!(
            err,
            Error::OutOfMemory {
                requested_bytes: usize::MAX,
                ..
            }
        ),
        "{err:?}"
    );
    let ok = Tensor::<super::Emulated>::ones([4], DType::F32, &dev).unwrap();
    assert_eq!(ok.to_vec::<f32>().unwrap(), vec![1.0; 4]);
}
