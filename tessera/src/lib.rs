//! # Tessera
//!
//! A deep-learning framework in Rust: n-dimensional tensors with zero-copy views, reverse-mode
//! autograd, layers, losses, optimizers, data loading and checkpoints, all generic over a small
//! backend contract. Write a model once; train it on any backend by changing one type.
//!
//! ```
//! use tessera::prelude::*;
//!
//! #[derive(Module)]
//! struct Mlp<B: Backend> {
//!     fc1: Linear<B>,
//!     fc2: Linear<B>,
//!     fc3: Linear<B>,
//! }
//!
//! impl<B: Backend> Mlp<B> {
//!     fn forward(&self, x: &Var<B>) -> tessera::Result<Var<B>> {
//!         let h = self.fc1.forward(x)?.relu()?;
//!         let h = self.fc2.forward(&h)?.relu()?;
//!         self.fc3.forward(&h)
//!     }
//! }
//!
//! fn main() -> tessera::Result<()> {
//!     type B = Cpu; // change this one type to change the backend
//!     let (dev, mut g) = (B::new(), Generator::new(0));
//!     let model = Mlp {
//!         fc1: LinearConfig::new(4, 16).init(&dev, &mut g)?,
//!         fc2: LinearConfig::new(16, 16).init(&dev, &mut g)?,
//!         fc3: LinearConfig::new(16, 3).init(&dev, &mut g)?,
//!     };
//!     let mut opt = Adam::new(model.parameters(), AdamConfig::new(1e-2))?;
//!     let x = Tensor::<B>::randn([64, 4], DType::F32, 1, &dev)?;
//!     let y = x.narrow(1, 0, 3)?.argmax(1, false)?;
//!     for _ in 0..50 {
//!         let loss = cross_entropy(&model.forward(&Var::constant(x.clone()))?, &y)?;
//!         opt.zero_grad();
//!         loss.backward()?;
//!         opt.step()?;
//!     }
//!     let path = std::env::temp_dir().join("tessera-facade-doc.safetensors");
//!     model.save(&path)?;                         // PyTorch-compatible names
//!     model.load(&path)?;                         // strict: names what does not match
//!     let on_other = model.to_backend(&Cpu::new())?; // any other backend type too
//!     assert_eq!(on_other.parameters().len(), 6);
//!     Ok(())
//! }
//! ```
//!
//! ## Crates
//! The facade re-exports the crates it is made of: [`tensor`] (`tessera-core`: shapes,
//! layouts, dtypes, errors, the `Backend` contract, `Tensor<B>`), [`autograd`], [`nn`] (layers,
//! losses, optimizers, data, checkpoints) and [`backends`] (enabled by features: `cpu`, the
//! default; `opencl`; `cuda`; `checked`). [`prelude`] brings what a training program uses.
//! [`registry`] names those backends: a program that lets its user choose one at run time
//! (`train --backend opencl`) finds it by name there and runs its generic code on it with one
//! call.

pub use tessera_autograd as autograd;
pub use tessera_core as tensor;
pub use tessera_nn as nn;

pub use tessera_core::{Error, Result};

pub mod registry;

/// Subword tokenizers from Hugging Face `tokenizer.json` files (feature `tokenizer`).
#[cfg(feature = "tokenizer")]
pub use tessera_tokenizer as tokenizer;

/// The backends enabled by this crate's features.
pub mod backends {
    #[cfg(feature = "checked")]
    pub use tessera_checked as checked;
    #[cfg(feature = "cpu")]
    pub use tessera_cpu as cpu;
    #[cfg(feature = "cuda")]
    pub use tessera_cuda as cuda;
    #[cfg(feature = "opencl")]
    pub use tessera_opencl as opencl;
}

/// Everything a model definition and a training loop need: `use tessera::prelude::*;`.
/// ([`crate::Result`] and [`crate::Error`] stay outside, so that the prelude does not shadow
/// `std`'s `Result`.)
pub mod prelude {
    pub use tessera_autograd::{no_grad, Var};
    pub use tessera_core::{
        AttentionDropout, AttentionOptions, Backend, Conv2dParams, DType, Device, Distribution,
        Generator, Pool2dParams, Shape, Tensor,
    };
    pub use tessera_nn::clip::clip_grad_norm;
    pub use tessera_nn::data::{
        CharTokenizer, DataLoader, Dataset, LoaderConfig, TextCorpus, TokenWindows,
    };
    pub use tessera_nn::gpt::{Gpt, GptConfig, SamplingConfig};
    pub use tessera_nn::layers::*;
    pub use tessera_nn::loss::{
        bce_with_logits, cross_entropy, cross_entropy_with_label_smoothing, mse_loss, nll_loss,
    };
    pub use tessera_nn::module::LoadOptions;
    pub use tessera_nn::optim::{Adam, AdamConfig, AdamW, AdamWConfig, Optimizer, Sgd, SgdConfig};
    pub use tessera_nn::schedule::{CosineAnnealing, LinearWarmup, LrSchedule, StepLr};
    pub use tessera_nn::{Config, Forward, Module, ToBackend};

    #[cfg(feature = "checked")]
    pub use tessera_checked::Checked;
    #[cfg(feature = "cpu")]
    pub use tessera_cpu::Cpu;
    #[cfg(feature = "cuda")]
    pub use tessera_cuda::Cuda;
    #[cfg(feature = "opencl")]
    pub use tessera_opencl::OpenCl;
}

/// The README's Rust examples, compiled and run as doc tests so they cannot go stale.
#[doc = include_str!("../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
