//! A decoder-only transformer, end to end: [`GptConfig`] and the [`Gpt`] model (nanoGPT's
//! architecture, names and initialisation, with PyTorch's `nn.MultiheadAttention` layout),
//! incremental decoding with a [`GptCache`] ([`Sampler`]s and [`generate`] are
//! [`crate::generation`]'s, re-exported), and checkpoint folders
//! ([`save_checkpoint`] / [`load_checkpoint`]: weights, vocabulary and configuration).
//!
//! ```
//! # fn main() -> tessera_core::Result<()> {
//! use tessera_nn::gpt::{generate, GptConfig, SamplingConfig};
//! use tessera_nn::Module;
//! let (dev, mut g) = (tessera_cpu::Cpu::new(), tessera_core::Generator::new(0));
//! let model = GptConfig::new(2, 2, 16, 8, 10).init(&dev, &mut g)?;
//! let state = model.state_dict();
//! // The output head is the token embedding, listed under both names like PyTorch does.
//! assert_eq!(state["lm_head.weight"].dims(), state["transformer.wte.weight"].dims());
//! assert_eq!(model.parameters().len() + 1, state.len());
//! let mut sampler = SamplingConfig::new().top_k(Some(3)).seed(1).sampler()?;
//! let report = generate(&model, &[1, 2, 3], 5, &mut sampler, &mut |_| {})?;
//! assert_eq!(report.tokens.len(), 5);
//! # Ok(()) }
//! ```

mod cache;
mod checkpoint;
mod config;
mod model;

pub use crate::generation::{
    generate, generate_without_cache, GenerationReport, Sampler, SamplingConfig,
};
pub use cache::GptCache;
pub use checkpoint::{
    load_checkpoint, save_checkpoint, save_checkpoint_gathered, GptCheckpoint, CONFIG_FILE,
    MODEL_FILE, VOCAB_FILE,
};
pub use config::GptConfig;
pub use model::{Gpt, GptTransformer};
