//! An out-of-range index on a real GPU (device 0) is reported at the next read-back as a typed
//! error, and the flag is cleared afterwards. Alone in its test binary: the error goes to the
//! next read-back on the device whichever thread makes it, so no other test may share the
//! device. Skips, printing why, without a CUDA driver or device.

use tessera_core::{Error, Tensor};
use tessera_cuda::Cuda;

#[test]
fn an_out_of_range_index_surfaces_at_read_back() {
    let dev = match Cuda::new(0) {
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
}
