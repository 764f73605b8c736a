//! Bad input gives the right typed error with a clear message, never a panic (CPU backend).

use tessera_core::{BinaryOp, CmpOp, DType, Error, Shape, Tensor, UnaryOp};
use tessera_cpu::Cpu;

type T = Tensor<Cpu>;

fn f32s(shape: &[usize]) -> T {
    let n: usize = shape.iter().product();
    let values: Vec<f32> = (0..n).map(|i| i as f32).collect();
    Tensor::from_vec(values, shape.to_vec(), &Cpu::new()).expect("valid tensor")
}

fn i64s(values: Vec<i64>) -> T {
    let n = values.len();
    Tensor::from_vec(values, [n], &Cpu::new()).expect("valid tensor")
}

#[test]
fn every_binary_op_rejects_shapes_that_do_not_broadcast() {
    let (a, b) = (f32s(&[2, 3]), f32s(&[4]));
    for op in BinaryOp::ALL {
        let err = a.binary(op, &b).unwrap_err();
        assert_eq!(
            err,
            Error::BroadcastIncompatible {
                op: op.name(),
                lhs: Shape::new([2, 3]),
                rhs: Shape::new([4]),
            }
        );
        assert_eq!(
            err.to_string(),
            format!(
                "{}: shapes cannot be broadcast together: lhs [2, 3] vs rhs [4]",
                op.name()
            )
        );
    }
}

#[test]
fn every_comparison_rejects_shapes_that_do_not_broadcast() {
    let (a, b) = (f32s(&[3, 2]), f32s(&[3]));
    for op in CmpOp::ALL {
        let err = a.compare(op, &b).unwrap_err();
        assert!(
            matches!(&err, Error::BroadcastIncompatible { op: name, .. } if *name == op.name()),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            format!(
                "{}: shapes cannot be broadcast together: lhs [3, 2] vs rhs [3]",
                op.name()
            )
        );
    }
}

#[test]
fn matmul_rejects_different_inner_dimensions() {
    let err = f32s(&[2, 3]).matmul(&f32s(&[4, 5])).unwrap_err();
    assert!(matches!(err, Error::MatmulShape { .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        "matmul: inner dimensions differ: lhs [2, 3] vs rhs [4, 5]"
    );
    // Batch dimensions that do not broadcast are reported the same way.
    let err = f32s(&[2, 2, 3]).matmul(&f32s(&[3, 3, 1])).unwrap_err();
    assert!(matches!(err, Error::MatmulShape { .. }), "{err:?}");
}

#[test]
fn concat_rejects_shapes_that_differ_off_the_axis() {
    let (a, b) = (f32s(&[2, 3]), f32s(&[3, 3]));
    let err = Tensor::cat(&[&a, &b], 1).unwrap_err();
    assert!(
        matches!(err, Error::ShapeMismatch { op: "cat", .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "cat: shapes differ: lhs [2, 3] vs rhs [3, 3]"
    );
    let err = Tensor::stack(&[&a, &b], 0).unwrap_err();
    assert!(
        matches!(err, Error::ShapeMismatch { op: "stack", .. }),
        "{err:?}"
    );
}

/// Asserts an index error of `op` naming `index` and `size`.
fn assert_index_error(err: Error, op: &str, index: i64, size: usize) {
    match &err {
        Error::IndexOutOfRange {
            op: got_op,
            index: got_index,
            size: got_size,
        } => {
            assert_eq!(
                (*got_op, *got_index, *got_size),
                (op, index, size),
                "{err:?}"
            );
        }
        other => panic!("expected IndexOutOfRange from {op}, got {other:?}"),
    }
    assert_eq!(
        err.to_string(),
        format!("{op}: index {index} is out of range for a dimension of size {size}")
    );
}

#[test]
fn index_select_rejects_negative_and_too_large_indices() {
    let x = f32s(&[2, 3]);
    assert_index_error(
        x.index_select(1, &i64s(vec![0, -1])).unwrap_err(),
        "index_select",
        -1,
        3,
    );
    assert_index_error(
        x.index_select(1, &i64s(vec![3])).unwrap_err(),
        "index_select",
        3,
        3,
    );
    assert_index_error(
        x.index_select(0, &i64s(vec![1, 7])).unwrap_err(),
        "index_select",
        7,
        2,
    );
}

#[test]
fn gather_rejects_negative_and_too_large_indices() {
    let x = f32s(&[2, 3]);
    let idx = |v: Vec<i64>| Tensor::from_vec(v, [2, 1], &Cpu::new()).unwrap();
    assert_index_error(x.gather(1, &idx(vec![0, -2])).unwrap_err(), "gather", -2, 3);
    assert_index_error(x.gather(1, &idx(vec![3, 0])).unwrap_err(), "gather", 3, 3);
}

#[test]
fn scatter_add_rejects_negative_and_too_large_indices() {
    let base = f32s(&[2, 3]);
    let src = f32s(&[2, 1]);
    let idx = |v: Vec<i64>| Tensor::from_vec(v, [2, 1], &Cpu::new()).unwrap();
    assert_index_error(
        base.scatter_add(1, &idx(vec![-1, 0]), &src).unwrap_err(),
        "scatter_add",
        -1,
        3,
    );
    assert_index_error(
        base.scatter_add(1, &idx(vec![0, 5]), &src).unwrap_err(),
        "scatter_add",
        5,
        3,
    );
}

#[test]
fn narrow_out_of_range_is_rejected() {
    let err = f32s(&[5, 2]).narrow(0, 3, 4).unwrap_err();
    assert_eq!(
        err,
        Error::RangeOutOfBounds {
            op: "slice",
            axis: 0,
            start: 3,
            end: 7,
            size: 5
        }
    );
    assert_eq!(
        err.to_string(),
        "slice: range 3..7 is out of bounds for axis 0 of size 5"
    );
}

#[test]
fn reshape_to_another_element_count_is_rejected() {
    let err = f32s(&[2, 3]).reshape([4]).unwrap_err();
    assert!(
        matches!(err, Error::ElementCountMismatch { op: "reshape", .. }),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "reshape: cannot view [2, 3] (6 elements) as [4] (4 elements)"
    );
}

#[test]
fn mixing_dtypes_is_rejected() {
    let dev = Cpu::new();
    let a = f32s(&[2]);
    let b = Tensor::from_vec(vec![1.0f64, 2.0], [2], &dev).unwrap();
    let err = a.add(&b).unwrap_err();
    assert_eq!(
        err,
        Error::DTypeMismatch {
            op: "add",
            lhs: DType::F32,
            rhs: DType::F64
        }
    );
    assert_eq!(err.to_string(), "add: dtypes differ: lhs f32 vs rhs f64");

    let err = a.to_vec::<f64>().unwrap_err();
    assert_eq!(
        err,
        Error::DTypeMismatch {
            op: "to_vec",
            lhs: DType::F32,
            rhs: DType::F64
        }
    );
    assert_eq!(err.to_string(), "to_vec: dtypes differ: lhs f32 vs rhs f64");

    let float_index = Tensor::from_vec(vec![0.0f32], [1], &dev).unwrap();
    let err = f32s(&[3]).index_select(0, &float_index).unwrap_err();
    assert_eq!(
        err,
        Error::DTypeMismatch {
            op: "index_select",
            lhs: DType::F32,
            rhs: DType::I64
        }
    );
    assert_eq!(
        err.to_string(),
        "index_select: dtypes differ: lhs f32 vs rhs i64"
    );
}

#[test]
fn unsupported_dtypes_are_rejected() {
    let ints = i64s(vec![1, 2]);
    let err = ints.exp().unwrap_err();
    assert_eq!(
        err,
        Error::UnsupportedDType {
            op: "exp",
            dtype: DType::I64
        }
    );
    assert_eq!(err.to_string(), "exp: not supported for dtype i64");
    // Every op/dtype pair that `UnaryOp::supports` rejects gives the same kind of error.
    let dev = Cpu::new();
    for dtype in DType::ALL {
        let t = Tensor::zeros([2], dtype, &dev).unwrap();
        for op in UnaryOp::ALL.into_iter().filter(|op| !op.supports(dtype)) {
            let err = t.unary(op).unwrap_err();
            assert_eq!(
                err,
                Error::UnsupportedDType {
                    op: op.name(),
                    dtype
                },
                "{op:?} on {dtype}"
            );
        }
    }
    let err = f32s(&[2])
        .to_dtype(DType::I64)
        .unwrap()
        .div(&i64s(vec![1, 1]))
        .unwrap_err();
    assert_eq!(
        err,
        Error::UnsupportedDType {
            op: "div",
            dtype: DType::I64
        }
    );
}

#[test]
fn axes_out_of_range_are_rejected() {
    let x = f32s(&[2, 3]);
    let err = x.sum(&[5], false).unwrap_err();
    assert_eq!(
        err,
        Error::AxisOutOfRange {
            op: "sum",
            axis: 5,
            rank: 2
        }
    );
    assert_eq!(
        err.to_string(),
        "sum: axis 5 is out of range for a tensor of rank 2"
    );
    let err = x.softmax(-3).unwrap_err();
    assert_eq!(
        err,
        Error::AxisOutOfRange {
            op: "softmax",
            axis: -3,
            rank: 2
        }
    );
    let err = x.argmax(2, false).unwrap_err();
    assert!(
        matches!(
            err,
            Error::AxisOutOfRange {
                op: "argmax",
                axis: 2,
                rank: 2
            }
        ),
        "{err:?}"
    );
    let err = x.transpose(0, 2).unwrap_err();
    assert!(
        matches!(
            err,
            Error::AxisOutOfRange {
                op: "transpose",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn from_vec_with_the_wrong_length_is_rejected() {
    let err = Tensor::from_vec(vec![1.0f32, 2.0, 3.0], [2, 2], &Cpu::new()).unwrap_err();
    assert_eq!(
        err,
        Error::DataLength {
            op: "from_vec",
            shape: Shape::new([2, 2]),
            expected: 4,
            got: 3
        }
    );
    assert_eq!(
        err.to_string(),
        "from_vec: shape [2, 2] needs 4 elements but 3 were given"
    );
}

#[test]
fn max_of_an_empty_axis_is_rejected() {
    let x = f32s(&[2, 0]);
    let err = x.max(&[1], false).unwrap_err();
    assert_eq!(err.to_string(), "max: axis 1 of shape [2, 0] is empty");
    let err = x.argmin(1, false).unwrap_err();
    assert!(
        matches!(err, Error::InvalidArgument { op: "argmin", .. }),
        "{err:?}"
    );
}
