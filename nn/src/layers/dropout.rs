//! [`Dropout`]: random zeroing with inverted scaling during training.

use crate::module::{Forward, RandomStream, TrainingMode};
use crate::{Config, Module};
use tessera_autograd::Var;
use tessera_core::{Backend, Distribution, Error, Generator, Result, Tensor};

/// Zeroes each element with probability `p` in training mode and scales the survivors by
/// `1 / (1 - p)`, so the expected value is unchanged (PyTorch's `nn.Dropout`); the identity in
/// evaluation mode. No parameters.
///
/// The mask comes from a counter-based [`Generator`]: element `i` of a forward pass is kept
/// when uniform sample `offset + i` of the seed's stream is `>= p`, and every forward pass moves
/// the offset past the samples it used. The same seed thus gives the same masks, on every
/// backend.
///
/// A clone shares the parameters (the same `Var`s); its random streams and training mode
/// are copies that continue from the same point.
#[derive(Module, Clone, Debug)]
pub struct Dropout {
    #[module(skip)]
    p: f64,
    generator: RandomStream,
    mode: TrainingMode,
}

/// The hyper-parameters of a [`Dropout`] layer (PyTorch's `nn.Dropout(p=0.5)`).
#[derive(Config, Clone, Copy, Debug, PartialEq)]
pub struct DropoutConfig {
    /// The probability of zeroing an element.
    #[config(default = 0.5)]
    pub p: f64,
}

impl DropoutConfig {
    /// A layer drawing its masks from a stream forked from `generator` (see
    /// [`Generator::fork`]), so the layers of a model built from one seed draw independent,
    /// reproducible masks.
    pub fn init(&self, generator: &mut Generator) -> Result<Dropout> {
        Dropout::with_generator(self.p, generator.fork())
    }
}

impl Dropout {
    /// Dropout with probability `p` (in `[0, 1]`) and masks drawn from the stream `seed`.
    pub fn new(p: f64, seed: u64) -> Result<Self> {
        Self::with_generator(p, Generator::new(seed))
    }

    /// Dropout with probability `p` (in `[0, 1]`) and masks drawn from `generator`.
    pub fn with_generator(p: f64, generator: Generator) -> Result<Self> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::InvalidArgument {
                op: "Dropout",
                msg: format!("probability must be in [0, 1], got {p}"),
            });
        }
        Ok(Dropout {
            p,
            generator: RandomStream::new(generator),
            mode: TrainingMode::new(),
        })
    }

    /// The drop probability.
    pub fn p(&self) -> f64 {
        self.p
    }

    /// The scaled keep mask for `like`: `1 / (1 - p)` where kept, 0 where dropped.
    fn mask<B: Backend>(&self, like: &Tensor<B>) -> Result<Tensor<B>> {
        let uniform = {
            let mut generator = self.generator.lock();
            Tensor::random_from(
                like.shape(),
                Distribution::Uniform {
                    low: 0.0,
                    high: 1.0,
                },
                like.dtype(),
                &mut generator,
                like.backend(),
            )?
        };
        if self.p >= 1.0 {
            return like.zeros_like();
        }
        uniform
            .ge_scalar(self.p)?
            .to_dtype(like.dtype())?
            .mul_scalar(1.0 / (1.0 - self.p))
    }
}

impl<B: Backend> Forward<B> for Dropout {
    fn forward(&self, x: &Var<B>) -> Result<Var<B>> {
        if !self.mode.get() || self.p == 0.0 {
            return Ok(x.clone());
        }
        let mask = self.mask(&x.value())?;
        x.mul(&Var::constant(mask))
    }
}
