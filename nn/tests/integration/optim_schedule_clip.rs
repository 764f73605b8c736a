//! Learning-rate schedules at known steps and gradient-norm clipping.

use std::f64::consts::PI;
use tessera_autograd::Var;
use tessera_core::{DType, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::clip::clip_grad_norm;
use tessera_nn::schedule::{CosineAnnealing, LinearWarmup, LrSchedule, StepLr};

type B = Cpu;

fn dev() -> B {
    Cpu::new()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn step_lr_decays_every_step_size_steps() {
    let s = StepLr::new(0.1, 30, 0.1).unwrap();
    assert!(close(s.lr_at(0), 0.1));
    assert!(close(s.lr_at(29), 0.1));
    assert!(close(s.lr_at(30), 0.01));
    assert!(close(s.lr_at(59), 0.01));
    assert!(close(s.lr_at(60), 0.001));
    assert!(StepLr::new(0.1, 0, 0.5).is_err());
    assert!(StepLr::new(-0.1, 10, 0.5).is_err());
}

#[test]
fn cosine_annealing_follows_the_closed_form() {
    let s = CosineAnnealing::new(1.0, 10, 0.1).unwrap();
    assert!(close(s.lr_at(0), 1.0));
    assert!(close(s.lr_at(5), 0.55)); // halfway: the mean of the two ends
    assert!(close(s.lr_at(10), 0.1));
    let at3 = 0.1 + 0.9 * (1.0 + (3.0 * PI / 10.0).cos()) / 2.0;
    assert!(close(s.lr_at(3), at3));
    // PyTorch's closed form is periodic: it rises again after t_max.
    assert!(close(s.lr_at(15), 0.55));
    assert!(close(s.lr_at(20), 1.0));
    assert!(CosineAnnealing::new(1.0, 0, 0.0).is_err());
}

#[test]
fn linear_warmup_ramps_then_hands_over_to_the_inner_schedule() {
    let inner = StepLr::new(0.2, 5, 0.5).unwrap();
    let s = LinearWarmup::new(inner, 4, 0.25).unwrap();
    // factor = 0.25 + 0.75 · step / 4
    assert!(close(s.lr_at(0), 0.05));
    assert!(close(s.lr_at(1), 0.2 * 0.4375));
    assert!(close(s.lr_at(2), 0.2 * 0.625));
    assert!(close(s.lr_at(3), 0.2 * 0.8125));
    assert!(close(s.lr_at(4), 0.2)); // inner step 0
    assert!(close(s.lr_at(8), 0.2)); // inner step 4
    assert!(close(s.lr_at(9), 0.1)); // inner step 5: first decay
    let none = LinearWarmup::new(inner, 0, 0.0).unwrap();
    assert!(close(none.lr_at(7), inner.lr_at(7)));
    assert!(LinearWarmup::new(inner, 3, 1.5).is_err());
    // Works with any schedule, including a boxed one.
    let boxed: Box<dyn LrSchedule> = Box::new(s);
    assert!(close(boxed.lr_at(0), 0.05));
}

fn param_with_grad(grad: &[f64]) -> Var<B> {
    let v = Var::param(Tensor::zeros([grad.len()], DType::F64, &dev()).unwrap());
    v.set_grad(Some(
        Tensor::from_vec(grad.to_vec(), [grad.len()], &dev()).unwrap(),
    ));
    v
}

#[test]
fn clip_grad_norm_scales_down_to_max_norm() {
    let a = param_with_grad(&[3.0, 0.0]);
    let b = param_with_grad(&[0.0, 4.0, 12.0]);
    let no_grad = Var::param(Tensor::ones([2], DType::F64, &dev()).unwrap());
    let norm = clip_grad_norm([&a, &b, &no_grad], 6.5).unwrap();
    assert!(close(norm, 13.0));
    let k = 6.5 / (13.0 + 1e-6);
    let ga = a.grad().unwrap().to_vec_f64().unwrap();
    let gb = b.grad().unwrap().to_vec_f64().unwrap();
    assert!(close(ga[0], 3.0 * k) && close(gb[1], 4.0 * k) && close(gb[2], 12.0 * k));
    let total: f64 = ga.iter().chain(&gb).map(|g| g * g).sum::<f64>().sqrt();
    assert!((total - 6.5).abs() < 1e-6);
    assert!(no_grad.grad().is_none());
}

#[test]
fn clip_grad_norm_leaves_small_gradients_alone() {
    let a = param_with_grad(&[0.3, -0.4]);
    let norm = clip_grad_norm([&a], 1.0).unwrap();
    assert!(close(norm, 0.5));
    assert_eq!(a.grad().unwrap().to_vec_f64().unwrap(), vec![0.3, -0.4]);
    // Mixed dtypes are accumulated in f64; no gradients at all gives 0.
    let f32_param = Var::param(Tensor::zeros([1], DType::F32, &dev()).unwrap());
    f32_param.set_grad(Some(Tensor::from_vec(vec![1.2f32], [1], &dev()).unwrap()));
    let norm = clip_grad_norm([&a, &f32_param], 10.0).unwrap();
    assert!((norm - (0.25f64 + 1.2f32 as f64 * 1.2f32 as f64).sqrt()).abs() < 1e-12);
    let empty: [&Var<B>; 0] = [];
    assert_eq!(clip_grad_norm(empty, 1.0).unwrap(), 0.0);
    assert!(clip_grad_norm([&a], -1.0).is_err());
    assert!(clip_grad_norm([&a], f64::NAN).is_err());
}

#[test]
fn clip_grad_norm_sums_large_f32_gradients_in_f64() {
    // 700,000 elements: more than one of the norm's chunks, the last one partial, given as a
    // transposed (non-contiguous) view. Squares summed in f32 would be off by about 1e-7.
    let (rows, cols) = (1000, 700);
    let values: Vec<f32> = (0..rows * cols)
        .map(|i| 1.0 + (i % 997) as f32 * 1e-3)
        .collect();
    let expected = values
        .iter()
        .map(|&g| f64::from(g) * f64::from(g))
        .sum::<f64>()
        .sqrt();
    let grad = Tensor::from_vec(values, [rows, cols], &dev())
        .unwrap()
        .transpose(0, 1)
        .unwrap();
    let param = Var::param(Tensor::zeros([cols, rows], DType::F32, &dev()).unwrap());
    param.set_grad(Some(grad));
    let norm = clip_grad_norm([&param], f64::MAX).unwrap();
    assert!(
        ((norm - expected) / expected).abs() < 1e-12,
        "{norm} against {expected}"
    );
}
