//! End to end: a two-layer MLP trained with Adam on a small separable problem reaches 100%
//! accuracy and a near-zero loss.

use tessera_autograd::{no_grad, Var};
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{LinearConfig, ReLU, Sequential};
use tessera_nn::loss::cross_entropy;
use tessera_nn::optim::{Adam, AdamConfig, Optimizer};
use tessera_nn::{Forward, Module};

type B = Cpu;

/// Three Gaussian blobs in 2-D, well apart: 30 points each, labels 0, 1, 2.
fn blobs(dev: &B) -> (Tensor<B>, Tensor<B>) {
    let centres = [(-2.0, -2.0), (2.0, -1.0), (0.0, 2.5)];
    let noise = Tensor::<B>::randn([90, 2], DType::F64, 17, dev)
        .unwrap()
        .to_vec_f64()
        .unwrap();
    let mut xs = Vec::new();
    let mut ys = Vec::new();
    for i in 0..90 {
        let class = i % 3;
        xs.push((centres[class].0 + 0.4 * noise[2 * i]) as f32);
        xs.push((centres[class].1 + 0.4 * noise[2 * i + 1]) as f32);
        ys.push(class as i64);
    }
    (
        Tensor::from_vec(xs, [90, 2], dev).unwrap(),
        Tensor::from_vec(ys, [90], dev).unwrap(),
    )
}

#[test]
fn mlp_with_adam_fits_a_separable_problem() {
    let dev = Cpu::new();
    let (x, y) = blobs(&dev);
    let mut g = Generator::new(0);
    let model = Sequential::new((
        LinearConfig::new(2, 16).init(&dev, &mut g).unwrap(),
        ReLU::new(),
        LinearConfig::new(16, 3).init(&dev, &mut g).unwrap(),
    ));
    let mut opt = Adam::new(model.parameters(), AdamConfig::new(0.02)).unwrap();
    let input = Var::constant(x);
    let mut first_loss = None;
    let mut last_loss = f64::INFINITY;
    for _ in 0..200 {
        opt.zero_grad();
        let loss = cross_entropy(&model.forward(&input).unwrap(), &y).unwrap();
        loss.backward().unwrap();
        opt.step().unwrap();
        last_loss = loss.value().to_scalar_f64().unwrap();
        first_loss.get_or_insert(last_loss);
    }
    let first_loss = first_loss.unwrap();
    assert!(first_loss > 0.5, "initial loss {first_loss}");
    assert!(last_loss < 0.02, "final loss {last_loss}");

    model.eval();
    let predictions = no_grad(|| model.forward(&input))
        .unwrap()
        .value()
        .argmax(-1, false)
        .unwrap()
        .to_vec::<i64>()
        .unwrap();
    assert_eq!(predictions, y.to_vec::<i64>().unwrap(), "100% accuracy");
}
