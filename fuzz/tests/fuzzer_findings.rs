//! Regression tests of what the fuzzer found (beyond `bad_input_gets_a_typed_error.rs`), each the
//! smallest program that showed it. A new finding gets its test here the day it is fixed.

use tessera_autograd::Var;
use tessera_backend_example::ExampleBackend;
use tessera_core::backend::AdamUpdate;
use tessera_core::{ArgReduceOp, Backend, DType, Layout, Tensor};
use tessera_cpu::Cpu;

#[test]
fn printing_an_empty_tensor_with_huge_dims_does_not_walk_them() {
    // Printing built one entry per position of the leading dims: 2^31 of them, 32 GiB.
    for text in [
        format!(
            "{}",
            Tensor::zeros([1 << 31, 0, 5], DType::F64, &Cpu::new()).unwrap()
        ),
        format!(
            "{}",
            Tensor::zeros([1 << 31, 0], DType::F32, &ExampleBackend::new()).unwrap()
        ),
    ] {
        assert!(text.len() < 200, "{text}");
        assert!(text.contains("..."), "{text}");
    }
    // Small empty tensors print as before.
    let t = Tensor::zeros([2, 0], DType::F32, &Cpu::new()).unwrap();
    assert_eq!(
        format!("{t}"),
        "tensor([[],\n        []], dtype=f32, device=cpu:0)"
    );
}

#[test]
fn var_narrow_with_an_end_past_usize_max_is_an_error() {
    let v = Var::param(Tensor::ones([3, 2], DType::F32, &Cpu::new()).unwrap());
    assert!(v.narrow(0, usize::MAX - 1, 2).is_err());
}

#[test]
fn cpu_arg_reduce_over_an_empty_axis_is_an_error() {
    // A direct call returned index 0 for an axis with no element.
    let dev = Cpu::new();
    let x = dev.full(0, DType::F32, 0.0).unwrap();
    let l = Layout::contiguous([3, 0, 1]);
    assert!(tessera_core::direct::arg_reduce(&dev, ArgReduceOp::ArgMax, &x, &l, 1).is_err());
}

#[test]
fn empty_layouts_with_huge_strides_are_copied_without_overflow() {
    // An empty layout passes check_fits whatever its strides; merging them overflowed.
    let dev = Cpu::new();
    let x = dev.full(4, DType::I64, 1.0).unwrap();
    let l = Layout::strided([1, 0, 2, 8], vec![0, 3, 2, isize::MAX], 0, 4).unwrap();
    let out = tessera_core::direct::copy_strided(&dev, &x, &l).unwrap();
    assert_eq!(tessera_core::BackendStorage::len(&out), 0);
}

#[test]
fn fused_composites_reject_operands_of_other_shapes() {
    // The composite Adam step and ReLU gradient broadcast mismatched operands silently.
    let dev = Cpu::new();
    {
        let p = Tensor::ones([3, 1], DType::F32, &dev).unwrap();
        let g = Tensor::ones([1, 2], DType::F32, &dev).unwrap();
        let u = AdamUpdate {
            beta1: 0.9,
            beta2: 0.999,
            step_size: 0.1,
            bias_correction2_sqrt: 1.0,
            eps: 1e-8,
            coupled_decay: 0.0,
            decoupled_factor: 1.0,
        };
        assert!(dev.adam_update(&p, &g, &p, &p, None, u).is_err());
        assert!(dev.relu_backward(&p, &g).is_err());
        assert!(tessera_core::composite::adam_update(&p, &p, &p, &g, None, u).is_err());
    }
    let dev = ExampleBackend::new();
    let p = Tensor::ones([2], DType::F64, &dev).unwrap();
    let g = Tensor::ones([1], DType::F64, &dev).unwrap();
    assert!(dev.relu_backward(&p, &g).is_err());
}

#[test]
fn composites_accept_strides_and_dilations_that_are_never_stepped() {
    // A stride of usize::MAX with one output position (or a dilation with one tap) is valid;
    // the composites turned it into a negative view stride and failed where the CPU kernels
    // answered.
    let dev = Cpu::new();
    let x = Tensor::randn([1, 2, 3, 3], DType::F64, 1, &dev).unwrap();
    let w = Tensor::randn([2, 2, 2, 2], DType::F64, 2, &dev).unwrap();
    let p = tessera_core::Conv2dParams {
        stride: (usize::MAX, 1),
        padding: (0, 0),
        dilation: (1, 1),
    };
    let y = x.conv2d(&w, None, p).unwrap();
    assert_eq!(y.dims(), &[1, 2, 1, 2]);
    let reference = tessera_core::composite::conv2d(&x, &w, p).unwrap();
    assert_eq!(y.to_vec::<f64>().unwrap().len(), 4);
    for (a, b) in y
        .to_vec::<f64>()
        .unwrap()
        .iter()
        .zip(reference.to_vec::<f64>().unwrap())
    {
        assert!((a - b).abs() < 1e-12, "{a} vs {b}");
    }
    let gw = tessera_core::composite::conv2d_backward_weight(&x, &y, w.dims(), p).unwrap();
    assert_eq!(gw.dims(), w.dims());
    let pool = tessera_core::Pool2dParams {
        kernel: (2, 2),
        stride: (usize::MAX, usize::MAX),
        padding: (0, 0),
    };
    let (m, _) = tessera_core::composite::max_pool2d(&x, pool).unwrap();
    assert_eq!(m.dims(), &[1, 2, 1, 1]);
}
