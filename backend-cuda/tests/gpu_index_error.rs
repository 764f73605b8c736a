//! An out-of-range index on a real GPU (device 0) is reported at the next read-back as a typed
//! error (by the indexing and the cross-entropy kernels), and the flag is cleared afterwards;
//! and the conformance suite's errors family (every method called directly with bad operands
//! must return `Err`). Alone in their test binary, one after the other: the error goes to the
//! next read-back on the device whichever thread makes it, so no other test may share the
//! device. Skips, printing why, without a CUDA driver or device.

use std::sync::Mutex;

/// Taken by each test: the two must not run at the same time.
static DEVICE: Mutex<()> = Mutex::new(());

use tessera_core::{Error, Tensor};
use tessera_cuda::Cuda;

#[test]
fn the_error_half_of_the_contract() {
    let _alone = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let dev = match Cuda::new() {
        Ok(dev) => dev,
        Err(e) => return eprintln!("skipped: {e}"),
    };
    let capabilities = tessera_conformance::suite::Capabilities::declared_by(&dev);
    let config = tessera_conformance::runner::RunConfig::from_env();
    tessera_conformance::suite::assert_family(
        &dev,
        tessera_conformance::suite::Family::Errors,
        &capabilities,
        &config,
    );
}

#[test]
fn an_out_of_range_index_surfaces_at_read_back() {
    let _alone = DEVICE.lock().unwrap_or_else(|e| e.into_inner());
    let dev = match Cuda::new() {
        Ok(dev) => dev,
        Err(e) => return eprintln!("skipped: {e}"),
    };
    let x = Tensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &dev).unwrap();
    let bad = Tensor::from_vec(vec![0i64, 5], [2], &dev).unwrap();
    let picked = x.index_select(0, &bad).expect("the op only queues work");
    let err = picked.to_vec::<f32>().unwrap_err();
    assert_eq!(
        err,
        Error::IndexOutOfRange {
            op: "index_select",
            index: 5,
            size: 2
        }
    );
    // The flag was cleared: the next read-back succeeds.
    assert_eq!(x.sum_all().unwrap().to_vec::<f32>().unwrap(), vec![10.0]);
    // Negative indices too, through gather.
    let negative = Tensor::from_vec(vec![-1i64, 0, 1, 1], [2, 2], &dev).unwrap();
    let err = x.gather(1, &negative).unwrap().to_vec::<f32>().unwrap_err();
    assert_eq!(
        err,
        Error::IndexOutOfRange {
            op: "gather",
            index: -1,
            size: 2
        }
    );
    // The cross-entropy kernels check each row's target on the device too.
    let targets = Tensor::from_vec(vec![1i64, 2], [2], &dev).unwrap();
    let losses = tessera_core::dispatch::cross_entropy(&x, &targets, 0.0).unwrap();
    assert_eq!(
        losses.to_vec::<f32>().unwrap_err(),
        Error::IndexOutOfRange {
            op: "cross_entropy",
            index: 2,
            size: 2
        }
    );
    let ones = Tensor::from_vec(vec![1.0f32; 2], [2], &dev).unwrap();
    let good = Tensor::from_vec(vec![1i64, 0], [2], &dev).unwrap();
    let grad = tessera_core::dispatch::cross_entropy_backward(&x, &good, &ones, 0.0).unwrap();
    // Rows [1, 2] and [3, 4]: softmax [e^-1, 1] / (1 + e^-1), minus the one-hot target.
    let p = 1.0 / (1.0 + (-1.0f32).exp());
    let want = [1.0 - p, p - 1.0, -p, p];
    for (g, w) in grad.to_vec::<f32>().unwrap().iter().zip(want) {
        assert!((g - w).abs() < 1e-6, "{g} vs {w}");
    }
}
