//! Dropout (mask rate, inverted scaling, evaluation identity, reproducibility) and Embedding
//! (lookup, shapes, gradients, initialisation, bad indices).

use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{Dropout, Embedding, EmbeddingConfig};
use tessera_nn::{Forward, Module};

fn dev() -> Cpu {
    Cpu::new()
}

fn forward_values(layer: &Dropout, x: &Tensor<Cpu>) -> Vec<f64> {
    Forward::<Cpu>::forward(layer, &Var::constant(x.clone()))
        .unwrap()
        .value()
        .to_vec_f64()
        .unwrap()
}

#[test]
fn dropout_zeroes_at_rate_p_and_scales_survivors() {
    let p = 0.3;
    let n = 40_000;
    let x = Tensor::randn([n], DType::F32, 1, &dev()).unwrap();
    let xv = x.to_vec_f64().unwrap();
    let layer = Dropout::new(p, 123).unwrap();
    let y = forward_values(&layer, &x);
    let dropped = y.iter().filter(|v| **v == 0.0).count() as f64 / n as f64;
    // Binomial standard deviation √(p(1-p)/n) ≈ 0.0023: allow 5σ.
    assert!((dropped - p).abs() < 0.012, "dropped fraction {dropped}");
    for (a, b) in y.iter().zip(&xv) {
        if *a != 0.0 {
            assert!(
                (a - b / (1.0 - p)).abs() < 1e-5 * (1.0 + b.abs()),
                "{a} vs {b}"
            );
        }
    }
}

#[test]
fn dropout_masks_are_reproducible_per_seed_and_fresh_per_call() {
    let x = Tensor::ones([1000], DType::F64, &dev()).unwrap();
    let a = Dropout::new(0.5, 9).unwrap();
    let b = Dropout::new(0.5, 9).unwrap();
    let first = forward_values(&a, &x);
    assert_eq!(first, forward_values(&b, &x));
    let second = forward_values(&a, &x);
    assert_ne!(first, second, "a second call must draw a new mask");
    let other_seed = forward_values(&Dropout::new(0.5, 10).unwrap(), &x);
    assert_ne!(first, other_seed);
    // The keep decision is `uniform sample >= p` from the documented counter-based stream.
    let expected: Vec<f64> = (0..1000)
        .map(|i| {
            let u = tessera_core::random::sample_f64(
                tessera_core::Distribution::Uniform {
                    low: 0.0,
                    high: 1.0,
                },
                9,
                i,
            );
            if u >= 0.5 {
                2.0
            } else {
                0.0
            }
        })
        .collect();
    assert_eq!(first, expected);
    // Starting from a generator reproduces the same stream.
    let c = Dropout::with_generator(0.5, Generator::new(9)).unwrap();
    assert_eq!(forward_values(&c, &x), first);
}

#[test]
fn dropout_is_the_identity_in_eval_mode_and_for_p_zero() {
    let x = Tensor::randn([64], DType::F64, 2, &dev()).unwrap();
    let xv = x.to_vec_f64().unwrap();
    let layer = Dropout::new(0.9, 1).unwrap();
    Module::<Cpu>::eval(&layer);
    assert_eq!(forward_values(&layer, &x), xv);
    Module::<Cpu>::train(&layer);
    assert_ne!(forward_values(&layer, &x), xv);
    assert_eq!(forward_values(&Dropout::new(0.0, 1).unwrap(), &x), xv);
    assert!(forward_values(&Dropout::new(1.0, 1).unwrap(), &x)
        .iter()
        .all(|v| *v == 0.0));
    assert!(Dropout::new(1.5, 1).is_err());
    assert!(Dropout::new(-0.1, 1).is_err());
    assert!(Dropout::new(f64::NAN, 1).is_err());
}

#[test]
fn dropout_gradient_is_the_scaled_mask() {
    let layer = Dropout::new(0.25, 4).unwrap();
    let x = Var::param(Tensor::ones([200], DType::F64, &dev()).unwrap());
    let y = Forward::<Cpu>::forward(&layer, &x).unwrap();
    y.sum_all().unwrap().backward().unwrap();
    assert_eq!(
        x.grad().unwrap().to_vec_f64().unwrap(),
        y.value().to_vec_f64().unwrap()
    );
}

#[test]
fn embedding_looks_up_rows_for_any_index_shape() {
    let table: Vec<f64> = (0..15).map(|v| v as f64).collect();
    let emb = Embedding::from_tensor(Tensor::from_vec(table, [5, 3], &dev()).unwrap()).unwrap();
    let idx = Tensor::from_vec(vec![4i64, 0, 2, 2, 1, 3], [2, 3], &dev()).unwrap();
    let y = emb.forward(&Var::constant(idx)).unwrap();
    assert_eq!(y.dims(), &[2, 3, 3]);
    let expected: Vec<f64> = [4, 0, 2, 2, 1, 3]
        .iter()
        .flat_map(|&r| (0..3).map(move |k| (r * 3 + k) as f64))
        .collect();
    assert_eq!(y.value().to_vec_f64().unwrap(), expected);
}

#[test]
fn embedding_gradient_accumulates_repeated_indices() {
    let emb = EmbeddingConfig::new(4, 2)
        .dtype(DType::F64)
        .init(&dev(), &mut Generator::new(0))
        .unwrap();
    let idx = Tensor::from_vec(vec![1i64, 3, 1, 1], [4], &dev()).unwrap();
    emb.lookup(&idx)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    let g = emb.weight().grad().unwrap().to_vec_f64().unwrap();
    assert_eq!(g, vec![0.0, 0.0, 3.0, 3.0, 0.0, 0.0, 1.0, 1.0]);
}

#[test]
fn embedding_init_is_standard_normal() {
    let emb = EmbeddingConfig::new(200, 100)
        .init(&dev(), &mut Generator::new(5))
        .unwrap();
    let w = emb.weight().value().to_vec_f64().unwrap();
    let n = w.len() as f64;
    let mean = w.iter().sum::<f64>() / n;
    let var = w.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n;
    assert!(mean.abs() < 0.02, "mean {mean}");
    assert!((var - 1.0).abs() < 0.03, "var {var}");
    let names: Vec<String> = emb.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["weight"]);
}

#[test]
fn embedding_rejects_bad_indices() {
    let emb = EmbeddingConfig::new(3, 2)
        .dtype(DType::F64)
        .init(&dev(), &mut Generator::new(0))
        .unwrap();
    let out_of_range = Tensor::from_vec(vec![0i64, 3], [2], &dev()).unwrap();
    assert!(emb.lookup(&out_of_range).is_err());
    let negative = Tensor::from_vec(vec![-1i64], [1], &dev()).unwrap();
    assert!(emb.lookup(&negative).is_err());
    let floats = Tensor::from_vec(vec![0.0f64, 1.0], [2], &dev()).unwrap();
    assert!(emb.lookup(&floats).is_err());
    assert!(
        Embedding::from_tensor(Tensor::<Cpu>::zeros([3], DType::F64, &dev()).unwrap()).is_err()
    );
}
