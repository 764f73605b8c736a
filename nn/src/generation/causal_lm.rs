//! [`CausalLm`]: what generation needs of a model.

use crate::gpt::{Gpt, GptCache};
use crate::llama::{Llama, LlamaCache};
use crate::pretrained::{PretrainedCache, PretrainedModel};
use crate::Module;
use tessera_autograd::{no_grad, Var};
use tessera_core::{Backend, Result, Tensor};

/// A next-token model with a key/value cache: the interface [`super::generate`] drives.
pub trait CausalLm<B: Backend> {
    /// The model's key/value caches.
    type Cache;

    /// Tokens in the vocabulary.
    fn vocab_size(&self) -> usize;

    /// The longest context.
    fn max_positions(&self) -> usize;

    /// The backend the model lives on.
    fn backend(&self) -> B;

    /// Empty caches for one sequence.
    fn new_cache(&self) -> Result<Self::Cache>;

    /// Forgets every cached position.
    fn clear_cache(&self, cache: &mut Self::Cache);

    /// The logits `[1, n, vocab]` of `idx: [1, n]` after the cached positions, which it
    /// extends (inference).
    fn forward_cached(&self, idx: &Tensor<B>, cache: &mut Self::Cache) -> Result<Tensor<B>>;

    /// The logits `[1, t, vocab]` of the whole context `idx: [1, t]` without a cache
    /// (inference; the reference of the cached path).
    fn forward_uncached(&self, idx: &Tensor<B>) -> Result<Tensor<B>>;
}

/// `forward` in evaluation mode without gradients, the training mode restored.
fn evaluate<B: Backend, M: Module<B>>(
    model: &M,
    forward: impl FnOnce() -> Result<Var<B>>,
) -> Result<Tensor<B>> {
    let training = model.is_training();
    model.set_training(false);
    let out = no_grad(forward).map(|v| v.value());
    model.set_training(training);
    out
}

impl<B: Backend> CausalLm<B> for Gpt<B> {
    type Cache = GptCache<B>;

    fn vocab_size(&self) -> usize {
        self.config().vocab_size
    }

    fn max_positions(&self) -> usize {
        self.config().block_size
    }

    fn backend(&self) -> B {
        self.transformer().wte.weight().value().backend().clone()
    }

    fn new_cache(&self) -> Result<GptCache<B>> {
        GptCache::new(self.config(), 1, &CausalLm::backend(self))
    }

    fn clear_cache(&self, cache: &mut GptCache<B>) {
        cache.clear();
    }

    fn forward_cached(&self, idx: &Tensor<B>, cache: &mut GptCache<B>) -> Result<Tensor<B>> {
        Gpt::forward_cached(self, idx, cache)
    }

    fn forward_uncached(&self, idx: &Tensor<B>) -> Result<Tensor<B>> {
        evaluate(self, || self.forward(idx))
    }
}

impl<B: Backend> CausalLm<B> for Llama<B> {
    type Cache = LlamaCache<B>;

    fn vocab_size(&self) -> usize {
        self.config().vocab_size
    }

    fn max_positions(&self) -> usize {
        self.config().max_position_embeddings
    }

    fn backend(&self) -> B {
        self.model().embed_tokens.weight().value().backend().clone()
    }

    fn new_cache(&self) -> Result<LlamaCache<B>> {
        LlamaCache::new(self.config(), 1, &CausalLm::backend(self))
    }

    fn clear_cache(&self, cache: &mut LlamaCache<B>) {
        cache.clear();
    }

    fn forward_cached(&self, idx: &Tensor<B>, cache: &mut LlamaCache<B>) -> Result<Tensor<B>> {
        Llama::forward_cached(self, idx, cache)
    }

    fn forward_uncached(&self, idx: &Tensor<B>) -> Result<Tensor<B>> {
        evaluate(self, || self.forward(idx))
    }
}

impl<B: Backend> CausalLm<B> for PretrainedModel<B> {
    type Cache = PretrainedCache<B>;

    fn vocab_size(&self) -> usize {
        PretrainedModel::vocab_size(self)
    }

    fn max_positions(&self) -> usize {
        PretrainedModel::max_positions(self)
    }

    fn backend(&self) -> B {
        match self {
            PretrainedModel::Gpt2 { model, .. } => CausalLm::backend(model),
            PretrainedModel::Llama { model, .. } => CausalLm::backend(model),
        }
    }

    fn new_cache(&self) -> Result<PretrainedCache<B>> {
        PretrainedModel::new_cache(self, 1)
    }

    fn clear_cache(&self, cache: &mut PretrainedCache<B>) {
        cache.clear();
    }

    fn forward_cached(&self, idx: &Tensor<B>, cache: &mut PretrainedCache<B>) -> Result<Tensor<B>> {
        PretrainedModel::forward_cached(self, idx, cache)
    }

    fn forward_uncached(&self, idx: &Tensor<B>) -> Result<Tensor<B>> {
        evaluate(self, || self.forward(idx))
    }
}
