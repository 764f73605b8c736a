//! gradcheck itself: it must reject wrong gradients and bad arguments, not only pass.

use crate::common::*;
use tessera_autograd::{gradcheck, GradcheckOptions};
use tessera_core::{DType, Error, Tensor};

#[test]
fn a_wrong_gradient_is_reported_with_its_position_and_values() {
    // d/dx (x * detach(x)) is x analytically here, but 2x numerically.
    let x = Tensor::from_vec(vec![1.0f64, -2.0, 3.0], [3], &dev()).unwrap();
    let err = gradcheck(
        |v| v[0].mul(&v[0].detach()),
        &[x],
        GradcheckOptions::default(),
    )
    .unwrap_err();
    let Error::InvalidArgument { op, msg } = err else {
        panic!("unexpected error {err:?}");
    };
    assert_eq!(op, "gradcheck");
    assert!(msg.contains("input 0 element 0"), "{msg}");
    assert!(
        msg.contains("analytic gradient") && msg.contains("numeric"),
        "{msg}"
    );
}

#[test]
fn a_missing_gradient_is_caught() {
    // The second input is used only through a detached copy: its analytic gradient is zero.
    let a = Tensor::from_vec(vec![0.5f64, 1.5], [2], &dev()).unwrap();
    let b = Tensor::from_vec(vec![2.0f64, -1.0], [2], &dev()).unwrap();
    let err = gradcheck(
        |v| v[0].mul(&v[1].detach()),
        &[a, b],
        GradcheckOptions::default(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("input 1 element 0"), "{err}");
}

#[test]
fn a_correct_gradient_reports_small_errors() {
    let x = Tensor::from_vec(vec![0.3f64, -0.7, 1.1, 2.0], [2, 2], &dev()).unwrap();
    let report = gradcheck(
        |v| v[0].exp()?.sum(&[0], false),
        &[x],
        GradcheckOptions::default(),
    )
    .unwrap();
    assert_eq!(report.elements_checked, 4);
    assert!(report.max_abs_error < 1e-7, "{report:?}");
    assert!(report.max_rel_error < 1e-7, "{report:?}");
}

#[test]
fn non_f64_inputs_are_rejected() {
    let x = Tensor::ones([2], DType::F32, &dev()).unwrap();
    let err = gradcheck(|v| v[0].exp(), &[x], GradcheckOptions::default()).unwrap_err();
    assert!(err.to_string().contains("input 0 is f32"), "{err}");
}

#[test]
fn the_test_layouts_are_non_contiguous_with_the_given_values() {
    let values: Vec<f64> = (0..6).map(f64::from).collect();
    for layout in [Layout::Transposed, Layout::Strided] {
        let input = Input {
            values: values.clone(),
            dims: vec![2, 3],
            layout,
        };
        let t = input.tensor();
        assert!(!t.is_contiguous(), "{layout:?}");
        assert_eq!(t.dims(), &[2, 3]);
        assert_eq!(t.to_vec::<f64>().unwrap(), values, "{layout:?}");
    }
}
