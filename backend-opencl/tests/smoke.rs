//! Quick end-to-end checks of each kernel family against hand-computed values.

mod common;

use tessera_core::DType;
use tessera_opencl::OpenClTensor;

#[test]
fn elementwise_matmul_and_reductions() {
    let dev = device_or_skip!();
    let a = OpenClTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], [2, 3], &dev).unwrap();
    let b = (&a + 1.0).unwrap();
    assert_eq!(
        b.to_vec::<f32>().unwrap(),
        vec![2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    );
    let t = a.t().unwrap().contiguous().unwrap();
    assert_eq!(
        t.to_vec::<f32>().unwrap(),
        vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]
    );
    let c = a.matmul(&a.t().unwrap()).unwrap();
    assert_eq!(c.to_vec::<f32>().unwrap(), vec![14.0, 32.0, 32.0, 77.0]);
    let s = a.sum(&[1], false).unwrap();
    assert_eq!(s.to_vec::<f32>().unwrap(), vec![6.0, 15.0]);
    let m = a.argmax(1, false).unwrap();
    assert_eq!(m.to_vec::<i64>().unwrap(), vec![2, 2]);
    let i = a.to_dtype(DType::I64).unwrap();
    assert_eq!(i.to_vec::<i64>().unwrap(), vec![1, 2, 3, 4, 5, 6]);
}

#[test]
fn fused_softmax_matches_the_definition() {
    let dev = device_or_skip!();
    let x = OpenClTensor::from_vec(vec![1.0f32, 2.0, 3.0, 1.0, 1.0, 1.0], [2, 3], &dev).unwrap();
    let s = x.softmax(-1).unwrap().to_vec::<f32>().unwrap();
    let e = [1f32.exp(), 2f32.exp(), 3f32.exp()];
    let total: f32 = e.iter().sum();
    for (got, want) in s.iter().zip([
        e[0] / total,
        e[1] / total,
        e[2] / total,
        1.0 / 3.0,
        1.0 / 3.0,
        1.0 / 3.0,
    ]) {
        assert!((got - want).abs() < 1e-6, "{s:?}");
    }
}
