//! Initialisers: gains, fans, and the bounds and moments of every distribution against
//! PyTorch's formulas.

use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::init::{self, calculate_gain, fan_in_and_fan_out, FanMode, Nonlinearity};

fn dev() -> Cpu {
    Cpu::new()
}

/// `(mean, variance, max |x|)` of a tensor's elements.
fn moments(t: &Tensor<Cpu>) -> (f64, f64, f64) {
    let v = t.to_vec_f64().unwrap();
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    let max = v.iter().fold(0.0f64, |m, x| m.max(x.abs()));
    (mean, var, max)
}

#[test]
fn gains_match_pytorch() {
    assert_eq!(calculate_gain(Nonlinearity::Linear), 1.0);
    assert_eq!(calculate_gain(Nonlinearity::Sigmoid), 1.0);
    assert!((calculate_gain(Nonlinearity::Tanh) - 5.0 / 3.0).abs() < 1e-15);
    assert!((calculate_gain(Nonlinearity::Relu) - std::f64::consts::SQRT_2).abs() < 1e-15);
    assert_eq!(calculate_gain(Nonlinearity::Selu), 0.75);
    // torch.nn.init.calculate_gain('leaky_relu', 0.2) = sqrt(2 / 1.04)
    let leaky = calculate_gain(Nonlinearity::LeakyRelu(0.2));
    assert!((leaky - 1.386_750_490_563_073).abs() < 1e-12);
    // a = √5 gives √(1/3), which makes kaiming_uniform's bound 1/√fan_in.
    let a = calculate_gain(Nonlinearity::LeakyRelu(5f64.sqrt()));
    assert!((a - (1.0f64 / 3.0).sqrt()).abs() < 1e-15);
}

#[test]
fn fans_follow_the_receptive_field() {
    assert_eq!(fan_in_and_fan_out(&[20, 10]).unwrap(), (10, 20));
    assert_eq!(fan_in_and_fan_out(&[16, 8, 3, 5]).unwrap(), (120, 240));
    assert!(fan_in_and_fan_out(&[7]).is_err());
}

#[test]
fn kaiming_uniform_has_bound_sqrt3_gain_over_sqrt_fan() {
    let mut g = Generator::new(1);
    let dims = [256, 64, 3, 3];
    let relu = Nonlinearity::Relu;
    let w = init::kaiming_uniform(dims, FanMode::FanIn, relu, DType::F64, &mut g, &dev()).unwrap();
    let bound = 3f64.sqrt() * 2f64.sqrt() / (64.0f64 * 9.0).sqrt();
    let (mean, var, max) = moments(&w);
    assert!(max <= bound && max > 0.99 * bound);
    assert!(mean.abs() < 0.01 * bound);
    assert!((var / (bound * bound / 3.0) - 1.0).abs() < 0.02);
    let w = init::kaiming_uniform(dims, FanMode::FanOut, relu, DType::F64, &mut g, &dev()).unwrap();
    let bound_out = 3f64.sqrt() * 2f64.sqrt() / (256.0f64 * 9.0).sqrt();
    assert!(moments(&w).2 <= bound_out);
}

#[test]
fn kaiming_normal_has_std_gain_over_sqrt_fan() {
    let mut g = Generator::new(2);
    let dims = [300, 400];
    let tanh = Nonlinearity::Tanh;
    let w = init::kaiming_normal(dims, FanMode::FanIn, tanh, DType::F64, &mut g, &dev()).unwrap();
    let std = (5.0 / 3.0) / 400f64.sqrt();
    let (mean, var, _) = moments(&w);
    assert!(mean.abs() < 0.01 * std);
    assert!((var.sqrt() / std - 1.0).abs() < 0.01);
}

#[test]
fn xavier_uses_both_fans() {
    let mut g = Generator::new(3);
    let dims = [200, 300];
    let gain = 2.0;
    let w = init::xavier_uniform(dims, gain, DType::F64, &mut g, &dev()).unwrap();
    let bound = gain * (6.0f64 / 500.0).sqrt();
    let (_, var, max) = moments(&w);
    assert!(max <= bound && max > 0.99 * bound);
    assert!((var / (bound * bound / 3.0) - 1.0).abs() < 0.02);
    let w = init::xavier_normal(dims, gain, DType::F64, &mut g, &dev()).unwrap();
    let std = gain * (2.0f64 / 500.0).sqrt();
    assert!((moments(&w).1.sqrt() / std - 1.0).abs() < 0.01);
}

#[test]
fn uniform_normal_zeros_ones() {
    let mut g = Generator::new(4);
    let u = init::uniform([50_000], -2.0, 6.0, DType::F32, &mut g, &dev()).unwrap();
    let v = u.to_vec_f64().unwrap();
    assert!(v.iter().all(|x| (-2.0..6.0).contains(x)));
    assert!((moments(&u).0 - 2.0).abs() < 0.05);
    let n = init::normal([50_000], 3.0, 0.5, DType::F32, &mut g, &dev()).unwrap();
    let (mean, var, _) = moments(&n);
    assert!((mean - 3.0).abs() < 0.01 && (var - 0.25).abs() < 0.01);
    assert_eq!(
        init::zeros::<Cpu>([3], DType::F64, &dev())
            .unwrap()
            .to_vec_f64()
            .unwrap(),
        vec![0.0; 3]
    );
    assert_eq!(
        init::ones::<Cpu>([2], DType::F64, &dev())
            .unwrap()
            .to_vec_f64()
            .unwrap(),
        vec![1.0; 2]
    );
}

#[test]
fn initialisers_reject_bad_arguments() {
    let mut g = Generator::new(0);
    let d = &dev();
    assert!(init::uniform([3], 1.0, 0.0, DType::F64, &mut g, d).is_err());
    assert!(init::normal([3], 0.0, -1.0, DType::F64, &mut g, d).is_err());
    assert!(init::normal([3], f64::NAN, 1.0, DType::F64, &mut g, d).is_err());
    let linear = Nonlinearity::Linear;
    assert!(init::kaiming_uniform([5], FanMode::FanIn, linear, DType::F64, &mut g, d).is_err());
    assert!(init::kaiming_normal([4, 0], FanMode::FanIn, linear, DType::F64, &mut g, d).is_err());
    assert!(init::xavier_uniform([0, 0], 1.0, DType::F64, &mut g, d).is_err());
    assert!(init::uniform([3], 0.0, 1.0, DType::I64, &mut g, d).is_err());
}

#[test]
fn draws_from_one_generator_do_not_repeat_and_seeds_reproduce() {
    let mut g = Generator::new(11);
    let a = init::normal([100], 0.0, 1.0, DType::F64, &mut g, &dev()).unwrap();
    let b = init::normal([100], 0.0, 1.0, DType::F64, &mut g, &dev()).unwrap();
    assert_ne!(a.to_vec_f64().unwrap(), b.to_vec_f64().unwrap());
    let mut g2 = Generator::new(11);
    let a2 = init::normal([100], 0.0, 1.0, DType::F64, &mut g2, &dev()).unwrap();
    assert_eq!(a.to_vec_f64().unwrap(), a2.to_vec_f64().unwrap());
}
