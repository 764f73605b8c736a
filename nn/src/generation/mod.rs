//! Autoregressive text generation for any causal language model ([`CausalLm`]: the
//! [`crate::gpt::Gpt`], [`crate::llama::Llama`], a [`crate::pretrained::PretrainedModel`]):
//! [`generate`] with a key/value cache, its cache-free reference [`generate_without_cache`],
//! and [`Sampler`]s (greedy, temperature, top-k, top-p).

mod causal_lm;
mod generate;
mod sampling;

pub use causal_lm::CausalLm;
pub use generate::{generate, generate_until, generate_without_cache, GenerationReport};
pub use sampling::{Sampler, SamplingConfig};
