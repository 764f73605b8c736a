//! Regression tests of what the fuzzer found (beyond issue 11's own reproducers), each the
//! smallest program that showed it. A new finding gets its test here the day it is fixed.

use autograd::Var;
use backend_cpu::Cpu;
use backend_example::ExampleBackend;
use tensor_core::backend::AdamUpdate;
use tensor_core::{ArgReduceOp, Backend, DType, Layout, Tensor};

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
    assert!(dev.arg_reduce(ArgReduceOp::ArgMax, &x, &l, 1).is_err());
}

#[test]
fn empty_layouts_with_huge_strides_are_copied_without_overflow() {
    // An empty layout passes check_fits whatever its strides; merging them overflowed.
    let dev = Cpu::new();
    let x = dev.full(4, DType::I64, 1.0).unwrap();
    let l = Layout::strided([1, 0, 2, 8], vec![0, 3, 2, isize::MAX], 0, 4).unwrap();
    let out = dev.copy_strided(&x, &l).unwrap();
    assert_eq!(tensor_core::BackendStorage::len(&out), 0);
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
        assert!(tensor_core::composite::adam_update(&p, &p, &p, &g, None, u).is_err());
    }
    let dev = ExampleBackend::new();
    let p = Tensor::ones([2], DType::F64, &dev).unwrap();
    let g = Tensor::ones([1], DType::F64, &dev).unwrap();
    assert!(dev.relu_backward(&p, &g).is_err());
}
