//! Out-of-range indices (and cross-entropy targets) are detected on the device and reported at
//! the next read-back (or `synchronize`) as `IndexOutOfRange`, naming the op, the index and the
//! dimension size; the report clears the flag. One test on purpose: the flag is per device and process.

mod common;

use tessera_core::{Backend, Error};
use tessera_opencl::OpenClTensor;

fn index_error(err: Error) -> (&'static str, i64, usize) {
    match err {
        Error::IndexOutOfRange { op, index, size } => (op, index, size),
        other => panic!("expected IndexOutOfRange, got {other:?}"),
    }
}

#[test]
fn index_errors_surface_at_read_back_and_then_clear() {
    let dev = device_or_skip!();
    let x = OpenClTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &dev).unwrap();

    // gather: the op is only enqueued; the read-back reports the bad index.
    let bad = OpenClTensor::from_vec(vec![0i64, 5, 1, 2], [2, 2], &dev).unwrap();
    let picked = x
        .gather(1, &bad)
        .expect("enqueueing does not wait for the device");
    assert_eq!(
        index_error(picked.to_vec::<f32>().unwrap_err()),
        ("gather", 5, 3)
    );
    // Reported once: the flag is clear again and valid work reads back normally.
    assert_eq!(x.sum_all().unwrap().to_vec::<f32>().unwrap(), vec![21.0]);

    // index_select with a negative index, reported by synchronize.
    let neg = OpenClTensor::from_vec(vec![1i64, -1], [2], &dev).unwrap();
    let _rows = x.index_select(0, &neg).unwrap();
    assert_eq!(
        index_error(dev.synchronize().unwrap_err()),
        ("index_select", -1, 2)
    );
    dev.synchronize().unwrap();

    // scatter_add: the first error recorded wins; later ones are not reported separately.
    let src = OpenClTensor::from_vec(vec![1.0f32; 4], [2, 2], &dev).unwrap();
    let far = OpenClTensor::from_vec(vec![0i64, 7, 1, 1], [2, 2], &dev).unwrap();
    let sums = x.scatter_add(1, &far, &src).unwrap();
    let _also_bad = x.gather(1, &bad).unwrap();
    let err = index_error(sums.to_vec::<f32>().unwrap_err());
    assert_eq!(err, ("scatter_add", 7, 3));
    let good = OpenClTensor::from_vec(vec![0i64, 2, 1, 1], [2, 2], &dev).unwrap();
    assert_eq!(
        x.scatter_add(1, &good, &src)
            .unwrap()
            .to_vec::<f32>()
            .unwrap(),
        vec![2.0, 2.0, 4.0, 4.0, 7.0, 6.0]
    );

    // cross_entropy and its gradient check each row's target on the device.
    let targets = OpenClTensor::from_vec(vec![2i64, 3], [2], &dev).unwrap();
    let losses = tessera_core::dispatch::cross_entropy(&x, &targets, 0.0).unwrap();
    assert_eq!(
        index_error(losses.to_vec::<f32>().unwrap_err()),
        ("cross_entropy", 3, 3)
    );
    let ones = OpenClTensor::from_vec(vec![1.0f32; 2], [2], &dev).unwrap();
    let negative = OpenClTensor::from_vec(vec![-2i64, 0], [2], &dev).unwrap();
    let _grad = tessera_core::dispatch::cross_entropy_backward(&x, &negative, &ones, 0.0).unwrap();
    assert_eq!(
        index_error(dev.synchronize().unwrap_err()),
        ("cross_entropy_backward", -2, 3)
    );
    dev.synchronize().unwrap();
    // With valid targets the gradient is each row's softmax minus its one-hot target.
    let valid = OpenClTensor::from_vec(vec![2i64, 0], [2], &dev).unwrap();
    let grad = tessera_core::dispatch::cross_entropy_backward(&x, &valid, &ones, 0.0).unwrap();
    let got = grad.to_vec::<f32>().unwrap();
    let rows = [[1.0f64, 2.0, 3.0], [4.0, 5.0, 6.0]];
    for (i, (row, target)) in rows.iter().zip([2, 0]).enumerate() {
        let total: f64 = row.iter().map(|v| v.exp()).sum();
        for (j, v) in row.iter().enumerate() {
            let want = v.exp() / total - f64::from(j == target);
            let g = got[i * 3 + j] as f64;
            assert!((g - want).abs() < 1e-6, "row {i} class {j}: {g} vs {want}");
        }
    }
}
