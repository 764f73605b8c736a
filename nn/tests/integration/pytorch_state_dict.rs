//! A `state_dict` written by PyTorch (`safetensors.torch.save_file`) for the same architecture
//! loads strictly into a derived Tessera model and gives PyTorch's outputs. The fixture is made
//! by `fixtures/make_torch_fixture.py` (committed, so this test needs no PyTorch).

use std::path::PathBuf;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, Generator, Result};
use tessera_cpu::Cpu;
use tessera_nn::checkpoint;
use tessera_nn::layers::{
    BatchNorm2d, BatchNormConfig, Conv2d, Conv2dConfig, LayerNorm, LayerNormConfig, Linear,
    LinearConfig, Pool2dConfig, ReLU, Sequential,
};
use tessera_nn::{Forward, Module};

/// The `Net` of the fixture script, field for field.
#[derive(Module)]
struct Net<B: Backend> {
    conv: Conv2d<B>,
    bn: BatchNorm2d<B>,
    body: Sequential<(Linear<B>, ReLU, Linear<B>)>,
    norm: LayerNorm<B>,
    head: Linear<B>,
}

impl<B: Backend> Net<B> {
    fn new(dev: &B) -> Result<Self> {
        let g = &mut Generator::new(42);
        Ok(Net {
            conv: Conv2dConfig::new(1, 4, (3, 3))
                .padding((1, 1))
                .init(dev, g)?,
            bn: BatchNormConfig::new(4).init_2d(dev)?,
            body: Sequential::new((
                LinearConfig::new(64, 16).init(dev, g)?,
                ReLU::new(),
                LinearConfig::new(16, 8).init(dev, g)?,
            )),
            norm: LayerNormConfig::new(vec![8]).init(dev)?,
            head: LinearConfig::new(8, 3).init(dev, g)?,
        })
    }

    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let h = self.bn.forward(&self.conv.forward(x)?)?.relu()?;
        let h = h
            .max_pool2d(Pool2dConfig::new((2, 2)).params())?
            .flatten(1, -1)?;
        self.head
            .forward(&self.norm.forward(&self.body.forward(&h)?)?)
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

#[test]
fn a_pytorch_state_dict_loads_and_predicts_like_pytorch() {
    let dev = Cpu::new();
    let net = Net::new(&dev).unwrap();
    net.load(fixture("torch_net.safetensors")).unwrap();
    net.eval();
    let io = checkpoint::load(fixture("torch_net_io.safetensors"), &dev).unwrap();
    let (x, y) = (&io.tensors["x"], &io.tensors["y"]);
    let got = no_grad(|| net.forward(&Var::constant(x.clone())))
        .unwrap()
        .value();
    assert_eq!(got.dims(), y.dims());
    let (got, want) = (got.to_vec::<f32>().unwrap(), y.to_vec::<f32>().unwrap());
    for (g, w) in got.iter().zip(&want) {
        assert!(
            (g - w).abs() <= 1e-5 + 1e-5 * w.abs(),
            "{got:?}\nvs PyTorch\n{want:?}"
        );
    }
    // The batch-norm statistics came from PyTorch's training steps, not the initial values.
    assert_eq!(
        net.bn
            .num_batches_tracked()
            .value()
            .to_vec::<i64>()
            .unwrap(),
        vec![3]
    );
}

#[test]
fn a_pytorch_state_dict_for_another_architecture_is_refused_by_name() {
    #[derive(Module)]
    struct Smaller<B: Backend> {
        conv: Conv2d<B>,
        head: Linear<B>,
    }
    let dev = Cpu::new();
    let g = &mut Generator::new(0);
    let small = Smaller {
        conv: Conv2dConfig::new(1, 4, (3, 3)).init(&dev, g).unwrap(),
        head: LinearConfig::new(8, 2).init(&dev, g).unwrap(),
    };
    let msg = small
        .load(fixture("torch_net.safetensors"))
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("'head.weight'") && msg.contains("[3, 8]"),
        "{msg}"
    );
    assert!(
        msg.contains("unexpected tensors") && msg.contains("'bn.running_mean'"),
        "{msg}"
    );
}
