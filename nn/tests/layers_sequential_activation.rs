//! Sequential composition and parameter naming (also of nested and hand-written modules),
//! training-mode propagation, Flatten, and the activation modules against f64 formulas.

use tessera_autograd::Var;
use tessera_core::{DType, Generator, Result, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::layers::{
    BatchNorm1d, Dropout, Flatten, LeakyReLU, Linear, ReLU, Sequential, Sigmoid, Softmax, Tanh,
    GELU,
};
use tessera_nn::module::{child_name, Module};

type B = Cpu;

fn dev() -> B {
    Cpu::new()
}

fn apply(layer: &dyn Module<B>, x: &[f64]) -> Vec<f64> {
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

fn mlp(g: &mut Generator) -> Sequential<B> {
    Sequential::new()
        .with(Linear::new(3, 4, true, DType::F64, g, &dev()).unwrap())
        .with(ReLU::new())
        .with(
            Sequential::new()
                .with(Linear::new(4, 2, false, DType::F64, g, &dev()).unwrap())
                .with(BatchNorm1d::new(2, DType::F64, &dev()).unwrap())
                .with(Dropout::new(0.5, 0).unwrap()),
        )
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
    assert_eq!(model.len(), 3);
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
    let inner = model.get(2).unwrap();
    assert!(!model.is_training() && !inner.is_training());
    // In eval mode dropout is the identity and batch norm uses its running stats, so the
    // output is deterministic.
    let x = Var::constant(Tensor::randn([5, 3], DType::F64, 1, &dev()).unwrap());
    let a = model.forward(&x).unwrap().value().to_vec_f64().unwrap();
    let b = model.forward(&x).unwrap().value().to_vec_f64().unwrap();
    assert_eq!(a, b);
    model.train();
    assert!(inner.is_training());
    // A layer pushed later takes the chain's mode.
    let mut chain = Sequential::<B>::new();
    chain.eval();
    chain.push(Dropout::new(0.5, 0).unwrap());
    assert!(!chain.get(0).unwrap().is_training());
}

#[test]
fn sequential_forward_is_the_composition_and_empty_is_identity() {
    let mut g = Generator::new(3);
    let l1 = Linear::new(3, 4, true, DType::F64, &mut g, &dev()).unwrap();
    let l2 = Linear::new(4, 2, true, DType::F64, &mut g, &dev()).unwrap();
    let x = Var::constant(Tensor::randn([5, 3], DType::F64, 2, &dev()).unwrap());
    let manual = l2
        .forward(&l1.forward(&x).unwrap().tanh().unwrap())
        .unwrap()
        .value()
        .to_vec_f64()
        .unwrap();
    let model = Sequential::new().with(l1).with(Tanh::new()).with(l2);
    let chained = model.forward(&x).unwrap().value().to_vec_f64().unwrap();
    assert_eq!(manual, chained);
    let empty = Sequential::<B>::new();
    assert!(empty.is_empty());
    assert_eq!(
        empty.forward(&x).unwrap().value().to_vec_f64().unwrap(),
        x.value().to_vec_f64().unwrap()
    );
}

/// A hand-written model: fields named like PyTorch attributes.
struct TwoLayer {
    fc1: Linear<B>,
    fc2: Linear<B>,
    norm: BatchNorm1d<B>,
}

impl Module<B> for TwoLayer {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        self.fc2
            .forward(&self.norm.forward(&self.fc1.forward(x)?)?.relu()?)
    }

    fn visit_parameters(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        self.fc1.visit_parameters(&child_name(prefix, "fc1"), f);
        self.norm.visit_parameters(&child_name(prefix, "norm"), f);
        self.fc2.visit_parameters(&child_name(prefix, "fc2"), f);
    }

    fn visit_buffers(&self, prefix: &str, f: &mut dyn FnMut(&str, &Var<B>)) {
        self.norm.visit_buffers(&child_name(prefix, "norm"), f);
    }

    fn set_training(&self, training: bool) {
        self.fc1.set_training(training);
        self.norm.set_training(training);
        self.fc2.set_training(training);
    }

    fn is_training(&self) -> bool {
        self.norm.is_training()
    }
}

#[test]
fn hand_written_modules_compose_names_and_zero_grads() {
    let mut g = Generator::new(1);
    let model = TwoLayer {
        fc1: Linear::new(2, 3, true, DType::F64, &mut g, &dev()).unwrap(),
        fc2: Linear::new(3, 1, true, DType::F64, &mut g, &dev()).unwrap(),
        norm: BatchNorm1d::new(3, DType::F64, &dev()).unwrap(),
    };
    let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        vec![
            "fc1.weight",
            "fc1.bias",
            "norm.weight",
            "norm.bias",
            "fc2.weight",
            "fc2.bias"
        ]
    );
    assert_eq!(model.buffers()[0].0, "norm.running_mean");
    let x = Var::constant(Tensor::randn([4, 2], DType::F64, 0, &dev()).unwrap());
    model
        .forward(&x)
        .unwrap()
        .sum_all()
        .unwrap()
        .backward()
        .unwrap();
    assert!(model.parameters().iter().all(|(_, p)| p.grad().is_some()));
    model.zero_grad();
    assert!(model.parameters().iter().all(|(_, p)| p.grad().is_none()));
}
