//! Sequential composition and parameter naming (also nested), training-mode propagation,
//! Flatten, and the activation modules against f64 formulas.

use tessera_autograd::Var;
use tessera_core::{DType, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{
    BatchNorm1d, BatchNormConfig, Dropout, Flatten, LeakyReLU, Linear, LinearConfig, ReLU,
    Sequential, Sigmoid, Softmax, Tanh, GELU,
};
use tessera_nn::{Forward, Module};

type B = Cpu;

fn dev() -> B {
    Cpu::new()
}

fn apply(layer: &dyn Forward<B>, x: &[f64]) -> Vec<f64> {
    let t = Tensor::from_vec(x.to_vec(), [x.len()], &dev()).unwrap();
    layer
        .forward(&Var::constant(t))
        .unwrap()
        .value()
        .to_vec_f64()
        .unwrap()
}

fn assert_close(actual: &[f64], expected: &[f64], tol: f64) {
    assert_eq!(actual.len(), expected.len());
    for (a, e) in actual.iter().zip(expected) {
        assert!((a - e).abs() <= tol, "got {a}, expected {e}");
    }
}

const XS: [f64; 7] = [-3.0, -1.0, -0.5, 0.0, 0.5, 1.0, 2.5];

#[test]
fn activations_match_their_formulas() {
    let relu: Vec<f64> = XS.iter().map(|x| x.max(0.0)).collect();
    assert_close(&apply(&ReLU::new(), &XS), &relu, 0.0);
    let leaky: Vec<f64> = XS
        .iter()
        .map(|&x| if x > 0.0 { x } else { 0.2 * x })
        .collect();
    assert_close(&apply(&LeakyReLU::new(0.2).unwrap(), &XS), &leaky, 1e-15);
    let default_leaky: Vec<f64> = XS
        .iter()
        .map(|&x| if x > 0.0 { x } else { 0.01 * x })
        .collect();
    assert_close(&apply(&LeakyReLU::default(), &XS), &default_leaky, 1e-15);
    let sigmoid: Vec<f64> = XS.iter().map(|x| 1.0 / (1.0 + (-x).exp())).collect();
    assert_close(&apply(&Sigmoid::new(), &XS), &sigmoid, 1e-15);
    let tanh: Vec<f64> = XS.iter().map(|x| x.tanh()).collect();
    assert_close(&apply(&Tanh::new(), &XS), &tanh, 1e-15);
    assert!(LeakyReLU::new(f64::INFINITY).is_err());
}

#[test]
fn gelu_is_the_exact_erf_form() {
    // x·Φ(x) with Φ the standard normal CDF, at points where Φ is tabulated.
    let xs = [-2.0, -1.0, 0.0, 0.5, 1.0, 2.0];
    let phi = [
        0.022_750_131_948_179_2,
        0.158_655_253_931_457_05,
        0.5,
        0.691_462_461_274_013_1,
        0.841_344_746_068_542_9,
        0.977_249_868_051_820_8,
    ];
    let expected: Vec<f64> = xs.iter().zip(phi).map(|(x, p)| x * p).collect();
    assert_close(&apply(&GELU::new(), &xs), &expected, 1e-12);
}

#[test]
fn softmax_module_normalises_along_its_axis() {
    let x = Tensor::from_vec(vec![1.0f64, 2.0, 3.0, -1.0, 0.0, 1000.0], [2, 3], &dev()).unwrap();
    let y = Softmax::new(-1)
        .forward(&Var::constant(x))
        .unwrap()
        .value()
        .to_vec_f64()
        .unwrap();
    let e: Vec<f64> = [1.0f64, 2.0, 3.0].iter().map(|v| (v - 3.0).exp()).collect();
    let s: f64 = e.iter().sum();
    let mut expected: Vec<f64> = e.iter().map(|v| v / s).collect();
    expected.extend([0.0, 0.0, 1.0]);
    assert_close(&y, &expected, 1e-15);
    assert_eq!(Softmax::new(-1).axis(), -1);
}

#[test]
fn flatten_merges_all_but_the_batch_axis_by_default() {
    let x = Tensor::<B>::zeros([2, 3, 4, 5], DType::F32, &dev()).unwrap();
    let y = Flatten::new().forward(&Var::constant(x.clone())).unwrap();
    assert_eq!(y.dims(), &[2, 60]);
    let y = Flatten::with_axes(1, 2).forward(&Var::constant(x)).unwrap();
    assert_eq!(y.dims(), &[2, 12, 5]);
}

type Inner = Sequential<(Linear<B>, BatchNorm1d<B>, Dropout)>;
type Mlp = Sequential<(Linear<B>, ReLU, Inner)>;

fn mlp(g: &mut Generator) -> Mlp {
    let linear = |i, o, bias, g: &mut Generator| {
        LinearConfig::new(i, o)
            .bias(bias)
            .dtype(DType::F64)
            .init(&dev(), g)
            .unwrap()
    };
    Sequential::new((
        linear(3, 4, true, g),
        ReLU::new(),
        Sequential::new((
            linear(4, 2, false, g),
            BatchNormConfig::new(2)
                .dtype(DType::F64)
                .init_1d(&dev())
                .unwrap(),
            Dropout::new(0.5, 0).unwrap(),
        )),
    ))
}

#[test]
fn nested_sequential_names_children_by_position() {
    let model = mlp(&mut Generator::new(0));
    let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec!["0.weight", "0.bias", "2.0.weight", "2.1.weight", "2.1.bias"]
    );
    let buffers: Vec<String> = model.buffers().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        buffers,
        vec![
            "2.1.running_mean",
            "2.1.running_var",
            "2.1.num_batches_tracked"
        ]
    );
    assert_eq!(model.num_parameters(), 3 * 4 + 4 + 4 * 2 + 2 + 2);
    // Visiting with a prefix puts it in front of every name.
    let mut prefixed = Vec::new();
    model.visit_parameters("encoder", &mut |n, _| prefixed.push(n.to_string()));
    assert_eq!(prefixed[0], "encoder.0.weight");
    assert_eq!(prefixed[4], "encoder.2.1.bias");
}

#[test]
fn set_training_reaches_every_nested_module() {
    let model = mlp(&mut Generator::new(0));
    assert!(model.is_training());
    model.eval();
    let inner = &model.layers().2;
    assert!(!model.is_training() && !inner.is_training());
    assert!(
        !Module::<B>::is_training(&inner.layers().2),
        "the dropout inside"
    );
    // In eval mode dropout is the identity and batch norm uses its running stats, so the
    // output is deterministic.
    let x = Var::constant(Tensor::randn([5, 3], DType::F64, 1, &dev()).unwrap());
    let a = model.forward(&x).unwrap().value().to_vec_f64().unwrap();
    let b = model.forward(&x).unwrap().value().to_vec_f64().unwrap();
    assert_eq!(a, b);
    model.train();
    assert!(inner.is_training() && Module::<B>::is_training(&inner.layers().2));
}

#[test]
fn sequential_forward_is_the_composition_and_a_vec_chains_too() {
    let mut g = Generator::new(3);
    let l1 = LinearConfig::new(3, 4)
        .dtype(DType::F64)
        .init(&dev(), &mut g)
        .unwrap();
    let l2 = LinearConfig::new(4, 2)
        .dtype(DType::F64)
        .init(&dev(), &mut g)
        .unwrap();
    let x = Var::constant(Tensor::randn([5, 3], DType::F64, 2, &dev()).unwrap());
    let manual = l2
        .forward(&l1.forward(&x).unwrap().tanh().unwrap())
        .unwrap()
        .value()
        .to_vec_f64()
        .unwrap();
    let model = Sequential::new((l1, Tanh::new(), l2));
    let chained = model.forward(&x).unwrap().value().to_vec_f64().unwrap();
    assert_eq!(manual, chained);
    // A Vec of one layer type chains its elements, and an empty one is the identity.
    let tanhs = vec![Tanh::new(), Tanh::new()];
    let twice = x.tanh().unwrap().tanh().unwrap();
    assert_eq!(
        Forward::<B>::forward(&tanhs, &x)
            .unwrap()
            .value()
            .to_vec_f64()
            .unwrap(),
        twice.value().to_vec_f64().unwrap()
    );
    let empty: Vec<Tanh> = Vec::new();
    assert_eq!(
        Forward::<B>::forward(&empty, &x)
            .unwrap()
            .value()
            .to_vec_f64()
            .unwrap(),
        x.value().to_vec_f64().unwrap()
    );
}
