//! `Checked<Planted, Cpu>` turns each planted bug into a typed divergence at the first op that
//! computes wrongly, naming the op, the input shapes and the max error.

use super::planted;
use super::planted::Bug;
use std::fmt::Debug;
use tessera_checked::Checked;
use tessera_core::{Error, Result, Shape, Tensor};
use tessera_cpu::Cpu;

type Dev = Checked<planted::Planted<tessera_backend_example::ExampleBackend>, Cpu>;

fn checked(bug: Bug) -> Dev {
    Checked::new(planted(bug), Cpu::new())
}

fn tensor(values: &[f32], dims: &[usize], dev: &Dev) -> Tensor<Dev> {
    Tensor::from_slice(values, dims.to_vec(), dev).expect("upload")
}

/// The fields of the divergence `result` must be.
fn divergence<T: Debug>(result: Result<T>) -> (&'static str, Vec<Shape>, f64) {
    match result {
        Err(Error::Divergence {
            op,
            inputs,
            max_error,
            under_test,
            reference,
            ..
        }) => {
            assert_eq!((under_test, reference), ("planted", "cpu"));
            (op, inputs, max_error)
        }
        other => panic!("expected a divergence, got {other:?}"),
    }
}

#[test]
fn a_wrong_broadcast_is_a_divergence_of_mul() {
    let dev = checked(Bug::WrongBroadcast(tessera_core::BinaryOp::Mul));
    let a = tensor(&[1.0, 2.0], &[2, 1], &dev);
    let b = tensor(&[1.0, 10.0, 100.0], &[1, 3], &dev);
    // Other ops are right: add broadcasts the same operands correctly.
    assert_eq!(
        a.add(&b).unwrap().to_vec::<f32>().unwrap(),
        vec![2.0, 11.0, 101.0, 3.0, 12.0, 102.0]
    );
    // The buggy mul reads lhs as [1, 2, 1, 2, 1, 2]: [1, 20, 100, 2, 10, 200] instead of
    // [1, 10, 100, 2, 20, 200].
    let (op, inputs, max_error) = divergence(a.mul(&b));
    assert_eq!(op, "mul");
    assert_eq!(inputs, vec![Shape::new([2, 3]), Shape::new([2, 3])]);
    assert_eq!(max_error, 10.0);
}

#[test]
fn an_off_by_one_is_a_divergence_of_sum() {
    let dev = checked(Bug::SumOffByOneOnOuterAxis);
    let x = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2], &dev);
    assert_eq!(
        x.sum(&[1], false).unwrap().to_vec::<f32>().unwrap(),
        vec![3.0, 7.0]
    );
    let (op, inputs, max_error) = divergence(x.sum(&[0], false));
    assert_eq!(op, "sum");
    assert_eq!(inputs, vec![Shape::new([2, 2])]);
    assert_eq!(max_error, 4.0); // [1, 2] instead of [4, 6]
}

#[test]
fn an_ignored_transpose_is_a_divergence_of_matmul() {
    let dev = checked(Bug::MatmulIgnoresTranspose);
    let a = tensor(&[1.0, 0.0, 0.0, 1.0], &[2, 2], &dev);
    let b = tensor(&[1.0, 2.0, 3.0, 4.0], &[2, 2], &dev);
    assert!(a.matmul(&b).is_ok());
    // I @ bᵀ is bᵀ = [1, 3, 2, 4]; the bug reads b as is: [1, 2, 3, 4].
    let (op, _, max_error) = divergence(a.matmul(&b.t().unwrap()));
    assert_eq!(op, "matmul");
    assert_eq!(max_error, 1.0);
}

#[test]
fn a_swallowed_nan_is_a_divergence_of_max() {
    let dev = checked(Bug::MaxSwallowsNan);
    let x = tensor(&[1.0, f32::NAN, 3.0], &[3], &dev);
    let (op, inputs, max_error) = divergence(x.max(&[], false));
    assert_eq!(op, "max");
    assert_eq!(inputs, vec![Shape::new([3])]);
    assert_eq!(max_error, f64::INFINITY);
}
