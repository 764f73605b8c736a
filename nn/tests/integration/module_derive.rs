//! `#[derive(Module)]` and `#[derive(Config)]`: PyTorch state-dict names for every kind of
//! field, train/eval propagation, moving a model to another backend type, and saving/loading
//! (strict and not).

use tessera_autograd::Var;
use tessera_backend_example::ExampleBackend;
use tessera_core::{Backend, DType, Error, Generator, Tensor};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint::LoadMode;
use tessera_nn::layers::{
    BatchNorm1d, BatchNormConfig, Dropout, Linear, LinearConfig, ReLU, Sequential,
};
use tessera_nn::module::LoadOptions;
use tessera_nn::{Config, Forward, Module, ToBackend};

fn linear<B: Backend>(i: usize, o: usize, dev: &B, g: &mut Generator) -> Linear<B> {
    LinearConfig::new(i, o).init(dev, g).unwrap()
}

/// Every kind of field the derive handles.
#[derive(Module)]
struct Everything<B: Backend> {
    encoder: Linear<B>,
    norm: BatchNorm1d<B>,
    maybe: Option<Linear<B>>,
    absent: Option<Linear<B>>,
    blocks: Vec<Linear<B>>,
    pair: [Linear<B>; 2],
    boxed: Box<Linear<B>>,
    scale: Var<B>,
    #[module(buffer)]
    steps: Var<B>,
    head: Sequential<(Linear<B>, ReLU, Dropout)>,
    #[module(skip)]
    width: usize,
}

fn everything<B: Backend>(dev: &B, seed: u64) -> Everything<B> {
    let g = &mut Generator::new(seed);
    Everything {
        encoder: linear(3, 4, dev, g),
        norm: BatchNormConfig::new(4).init_1d(dev).unwrap(),
        maybe: Some(linear(4, 4, dev, g)),
        absent: None,
        blocks: vec![linear(4, 4, dev, g), linear(4, 4, dev, g)],
        pair: [linear(4, 4, dev, g), linear(4, 4, dev, g)],
        boxed: Box::new(linear(4, 4, dev, g)),
        scale: Var::param(Tensor::ones([4], DType::F32, dev).unwrap()),
        steps: Var::constant(Tensor::zeros((), DType::I64, dev).unwrap()),
        head: Sequential::new((
            linear(4, 2, dev, g),
            ReLU::new(),
            Dropout::new(0.5, seed).unwrap(),
        )),
        width: 4,
    }
}

impl<B: Backend> Everything<B> {
    fn forward(&self, x: &Var<B>) -> tessera_core::Result<Var<B>> {
        let mut h = self.norm.forward(&self.encoder.forward(x)?)?;
        if let Some(m) = &self.maybe {
            h = m.forward(&h)?;
        }
        h = self.blocks.forward(&h)?;
        for p in &self.pair {
            h = p.forward(&h)?.tanh()?;
        }
        h = self.boxed.forward(&h)?.mul(&self.scale)?;
        self.head.forward(&h)
    }
}

fn names(pairs: Vec<(String, Var<Cpu>)>) -> Vec<String> {
    pairs.into_iter().map(|(n, _)| n).collect()
}

#[test]
fn every_field_kind_gets_its_pytorch_name() {
    let m = everything(&Cpu::new(), 0);
    assert_eq!(
        names(m.parameters()),
        [
            "encoder.weight",
            "encoder.bias",
            "norm.weight",
            "norm.bias",
            "maybe.weight",
            "maybe.bias",
            "blocks.0.weight",
            "blocks.0.bias",
            "blocks.1.weight",
            "blocks.1.bias",
            "pair.0.weight",
            "pair.0.bias",
            "pair.1.weight",
            "pair.1.bias",
            "boxed.weight",
            "boxed.bias",
            "scale",
            "head.0.weight",
            "head.0.bias",
        ]
    );
    assert_eq!(
        names(m.buffers()),
        [
            "norm.running_mean",
            "norm.running_var",
            "norm.num_batches_tracked",
            "steps"
        ]
    );
    // encoder, norm, six 4x4 linears (maybe, blocks, pair, boxed), scale, head.
    let expected = (3 * 4 + 4) + (4 + 4) + 6 * (4 * 4 + 4) + 4 + (4 * 2 + 2);
    assert_eq!(m.num_parameters(), expected);
    let mut with_prefix = Vec::new();
    m.visit_parameters("model", &mut |n, _| with_prefix.push(n.to_string()));
    assert_eq!(with_prefix[0], "model.encoder.weight");
}

#[test]
fn train_and_eval_reach_every_container() {
    let m = everything(&Cpu::new(), 0);
    assert!(m.is_training());
    m.eval();
    assert!(!m.is_training());
    assert!(!m.encoder.is_training() && !m.norm.is_training());
    assert!(!m.blocks[1].is_training() && !m.pair[0].is_training());
    assert!(!m.boxed.is_training() && !m.maybe.as_ref().unwrap().is_training());
    assert!(
        !Module::<Cpu>::is_training(&m.head.layers().2),
        "dropout in a Sequential"
    );
    m.train();
    assert!(m.blocks[0].is_training() && Module::<Cpu>::is_training(&m.head.layers().2));
}

#[test]
fn a_model_moves_to_another_backend_type_with_its_values_and_modes() {
    let cpu = Cpu::new();
    let m = everything(&cpu, 3);
    m.eval();
    let x = Tensor::randn([5, 3], DType::F32, 9, &cpu).unwrap();
    let expected = m.forward(&Var::constant(x.clone())).unwrap().value();

    let ex = ExampleBackend::new();
    let moved: Everything<ExampleBackend> = m.to_backend(&ex).unwrap();
    assert_eq!(moved.width, 4, "skipped fields are cloned");
    assert!(!moved.is_training(), "the mode moves too");
    let before: Vec<(String, Vec<f64>, bool)> = m
        .state_dict()
        .into_iter()
        .map(|(n, t)| (n, t.to_vec_f64().unwrap(), false))
        .collect();
    let after: Vec<(String, Vec<f64>, bool)> = moved
        .state_dict()
        .into_iter()
        .map(|(n, t)| (n, t.to_vec_f64().unwrap(), false))
        .collect();
    assert_eq!(before, after);
    assert!(moved.parameters().iter().all(|(_, p)| p.requires_grad()));
    assert!(moved.buffers().iter().all(|(_, b)| !b.requires_grad()));
    let got = moved
        .forward(&Var::constant(x.to_backend(&ex).unwrap()))
        .unwrap()
        .value();
    let (e, g) = (
        expected.to_vec::<f32>().unwrap(),
        got.to_vec::<f32>().unwrap(),
    );
    for (a, b) in e.iter().zip(&g) {
        assert!((a - b).abs() <= 1e-5 * (1.0 + a.abs()), "{e:?} vs {g:?}");
    }
    // And back: the round trip is exact.
    let back: Everything<Cpu> = moved.to_backend(&cpu).unwrap();
    assert_eq!(
        back.encoder.weight().value().to_vec::<f32>().unwrap(),
        m.encoder.weight().value().to_vec::<f32>().unwrap()
    );
}

#[test]
fn save_then_load_restores_every_tensor() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let dev = Cpu::new();
    let a = everything(&dev, 1);
    a.steps
        .set_value(Tensor::full((), 7.0, DType::I64, &dev).unwrap())
        .unwrap();
    a.save(&path).unwrap();
    let b = everything(&dev, 2);
    assert_ne!(
        b.encoder.weight().value().to_vec::<f32>().unwrap(),
        a.encoder.weight().value().to_vec::<f32>().unwrap()
    );
    b.load(&path).unwrap();
    for ((na, ta), (nb, tb)) in a.state_dict().into_iter().zip(b.state_dict()) {
        assert_eq!(na, nb);
        assert_eq!(ta.to_vec_f64().unwrap(), tb.to_vec_f64().unwrap(), "{na}");
    }
    // The file loads onto another backend type too.
    let c = everything(&ExampleBackend::new(), 3);
    c.load(&path).unwrap();
    assert_eq!(c.steps.value().to_vec::<i64>().unwrap(), vec![7]);
}

/// Like [`Everything`] but narrower, and without `scale`.
#[derive(Module)]
struct Other<B: Backend> {
    encoder: Linear<B>,
    extra: Linear<B>,
}

#[test]
fn strict_loading_names_missing_unexpected_and_misshaped_tensors_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("model.safetensors");
    let dev = Cpu::new();
    everything(&dev, 1).save(&path).unwrap();

    let g = &mut Generator::new(0);
    let other = Other {
        encoder: linear(3, 5, &dev, g), // 5 outputs instead of 4
        extra: linear(2, 2, &dev, g),
    };
    let before = other.extra.weight().value().to_vec::<f32>().unwrap();
    let err = other.load(&path).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Checkpoint { .. }), "{err:?}");
    assert!(
        msg.contains("encoder.weight") && msg.contains("[5, 3]"),
        "{msg}"
    );
    assert!(msg.contains("missing tensors: 'extra.weight'"), "{msg}");
    assert!(
        msg.contains("unexpected tensors:") && msg.contains("'scale'"),
        "{msg}"
    );
    assert_eq!(
        other.extra.weight().value().to_vec::<f32>().unwrap(),
        before
    );

    // Non-strict: a mis-shaped tensor is still an error (as in PyTorch) ...
    assert!(other.load_with(&path, LoadOptions::non_strict()).is_err());
    // ... and with matching shapes the report lists what was missing or skipped.
    let fits = Other {
        encoder: linear(3, 4, &dev, g),
        extra: linear(2, 2, &dev, g),
    };
    let report = fits.load_with(&path, LoadOptions::non_strict()).unwrap();
    assert_eq!(report.missing, ["extra.weight", "extra.bias"]);
    assert!(report.unexpected.contains(&"scale".to_string()));
    let saved = everything(&dev, 1);
    assert_eq!(
        fits.encoder.weight().value().to_vec::<f32>().unwrap(),
        saved.encoder.weight().value().to_vec::<f32>().unwrap()
    );
    // The in-memory state dict follows the same rules.
    let dict = saved.state_dict();
    assert!(fits.load_state_dict(&dict, LoadMode::Strict).is_err());
    let report = fits.load_state_dict(&dict, LoadMode::NonStrict).unwrap();
    assert_eq!(report.missing.len(), 2);
}

/// Tuple structs name fields by position; other type parameters are modules too.
#[derive(Module)]
struct Residual<B: Backend, M>(M, #[module(skip)] f64, Linear<B>);

#[test]
fn tuple_structs_and_generic_sub_modules() {
    let dev = Cpu::new();
    let g = &mut Generator::new(0);
    let r = Residual(linear(2, 2, &dev, g), 0.5, linear(2, 2, &dev, g));
    let n: Vec<String> = r.parameters().into_iter().map(|(n, _)| n).collect();
    assert_eq!(n, ["0.weight", "0.bias", "2.weight", "2.bias"]);
    let moved: Residual<ExampleBackend, Linear<ExampleBackend>> =
        r.to_backend(&ExampleBackend::new()).unwrap();
    assert_eq!(moved.1, 0.5);
}

/// `#[derive(Config)]`: `new` over the required fields, a builder method per default.
#[derive(Config, Debug, PartialEq)]
struct BlockConfig {
    width: usize,
    #[config(default = 4)]
    heads: usize,
    #[config(default = None)]
    window: Option<usize>,
    #[config(default = "gelu".to_string())]
    activation: String,
}

#[test]
fn config_derive_gives_defaults_and_builders() {
    let c = BlockConfig::new(64);
    assert_eq!(
        c,
        BlockConfig {
            width: 64,
            heads: 4,
            window: None,
            activation: "gelu".into()
        }
    );
    let c = c.heads(8).window(Some(16)).activation("relu".into());
    assert_eq!(
        (c.heads, c.window, c.activation.as_str()),
        (8, Some(16), "relu")
    );
}

#[test]
fn compile_errors_point_at_the_offending_input() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/derive_ui/*.rs");
}
