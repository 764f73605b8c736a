//! An application's model and training loop written against `tessera::prelude` only: a derived
//! model, a few Adam steps, save, load, and a move to another backend.

use tessera::prelude::*;
use tessera::Result;

/// A small convolutional classifier for 1 x 8 x 8 images.
#[derive(Module)]
pub struct TinyNet<B: Backend> {
    conv: Conv2d<B>,
    norm: BatchNorm2d<B>,
    head: Linear<B>,
}

impl<B: Backend> TinyNet<B> {
    /// The model, initialised from `seed`.
    pub fn new(dev: &B, seed: u64) -> Result<Self> {
        let g = &mut Generator::new(seed);
        Ok(TinyNet {
            conv: Conv2dConfig::new(1, 4, (3, 3))
                .padding((1, 1))
                .init(dev, g)?,
            norm: BatchNormConfig::new(4).init_2d(dev)?,
            head: LinearConfig::new(4 * 4 * 4, 3).init(dev, g)?,
        })
    }

    /// Class scores `[n, 3]` for images `[n, 1, 8, 8]`.
    pub fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        let h = self.norm.forward(&self.conv.forward(x)?)?.relu()?;
        let h = h.max_pool2d(Pool2dConfig::new((2, 2)).params())?;
        self.head.forward(&h.flatten(1, -1)?)
    }
}

/// A fixed toy batch: the class is which third of the image is brightest.
pub fn toy_batch<B: Backend>(dev: &B) -> Result<(Tensor<B>, Tensor<B>)> {
    let x = Tensor::<B>::randn([32, 1, 8, 8], DType::F32, 7, dev)?;
    let thirds = x
        .narrow(3, 0, 6)?
        .reshape([32, 8, 3, 2])?
        .sum(&[1, 3], false)?;
    Ok((x, thirds.argmax(1, false)?))
}

/// What [`run`] observed.
#[derive(Debug)]
pub struct Report {
    /// The loss before and after training.
    pub loss: (f64, f64),
    /// The backend the model was moved to.
    pub moved_to: String,
    /// The largest difference between the predictions on the CPU and on that backend.
    pub max_difference: f64,
    /// Whether moving the model back to the CPU gave back exactly the trained parameters.
    pub round_trip_exact: bool,
}

fn loss_of<B: Backend>(model: &TinyNet<B>, x: &Tensor<B>, y: &Tensor<B>) -> Result<Var<B>> {
    cross_entropy(&model.forward(&Var::constant(x.clone()))?, y)
}

fn predictions<B: Backend>(model: &TinyNet<B>, x: &Tensor<B>) -> Result<Vec<f32>> {
    no_grad(|| model.forward(&Var::constant(x.clone())))?
        .value()
        .to_vec::<f32>()
}

/// Trains on the CPU, saves to `path`, loads into a fresh model, moves it to OpenCL (or to a
/// second CPU backend when no OpenCL device is present), compares predictions, and moves it
/// back.
pub fn run(path: &std::path::Path) -> Result<Report> {
    let cpu = Cpu::new();
    let model = TinyNet::new(&cpu, 0)?;
    let (x, y) = toy_batch(&cpu)?;
    let mut opt = Adam::new(model.parameters(), AdamConfig::new(1e-2))?;
    let first = loss_of(&model, &x, &y)?.value().to_scalar_f64()?;
    for _ in 0..30 {
        let loss = loss_of(&model, &x, &y)?;
        opt.zero_grad();
        loss.backward()?;
        opt.step()?;
    }
    let last = loss_of(&model, &x, &y)?.value().to_scalar_f64()?;
    model.eval();
    model.save(path)?;

    let restored = TinyNet::new(&cpu, 1)?;
    restored.load(path)?;
    restored.eval();
    let on_cpu = predictions(&restored, &x)?;

    let (moved_to, on_other, back) = match OpenCl::new() {
        Ok(gpu) => {
            let moved = restored.to_backend(&gpu)?;
            let on_gpu = predictions(&moved, &x.to_backend(&gpu)?)?;
            ("opencl".to_string(), on_gpu, moved.to_backend(&cpu)?)
        }
        Err(e) => {
            eprintln!("no OpenCL device ({e}); moving to a second CPU backend instead");
            let moved = restored.to_backend(&Cpu::new())?;
            let on_other = predictions(&moved, &x)?;
            ("cpu".to_string(), on_other, moved.to_backend(&cpu)?)
        }
    };
    let round_trip_exact = back
        .state_dict()
        .iter()
        .zip(model.state_dict().iter())
        .all(|((na, a), (nb, b))| na == nb && a.to_vec_f64().ok() == b.to_vec_f64().ok());
    let max_difference = on_cpu
        .iter()
        .zip(&on_other)
        .map(|(a, b)| f64::from((a - b).abs()))
        .fold(0.0, f64::max);
    Ok(Report {
        loss: (first, last),
        moved_to,
        max_difference,
        round_trip_exact,
    })
}
