//! Llama (`transformers`' `LlamaForCausalLM`): [`LlamaConfig`], the [`Llama`] model with
//! [`crate::layers::RmsNorm`], [`crate::layers::RotaryEmbedding`], grouped-query
//! [`LlamaAttention`] and [`crate::layers::SwiGlu`] MLPs, and its [`LlamaCache`] for incremental
//! decoding. Checkpoints in the Hugging Face layout load through [`crate::pretrained`].

mod attention;
mod cache;
mod config;
mod model;

pub use attention::LlamaAttention;
pub use cache::LlamaCache;
pub use config::LlamaConfig;
pub use model::{Llama, LlamaDecoderLayer, LlamaModel};
