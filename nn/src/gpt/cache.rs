//! [`GptCache`]: the key/value caches of every block of a [`super::Gpt`].

use super::GptConfig;
use crate::layers::KvCache;
use tessera_core::{Backend, Result};

/// One [`KvCache`] per block, each holding up to `block_size` positions of a batch.
#[derive(Debug)]
pub struct GptCache<B: Backend> {
    layers: Vec<KvCache<B>>,
}

impl<B: Backend> GptCache<B> {
    /// Empty caches for `batch` sequences of a model of `config`, in the dtype its attention
    /// computes in (the 16-bit dtype of [`GptConfig::precision`], else [`GptConfig::dtype`]).
    pub fn new(config: &GptConfig, batch: usize, backend: &B) -> Result<Self> {
        let head_dim = config.n_embd / config.n_head;
        let dtype = config.precision.compute_dtype().unwrap_or(config.dtype);
        let layers = (0..config.n_layer)
            .map(|_| {
                KvCache::new(
                    batch,
                    config.n_head,
                    config.block_size,
                    head_dim,
                    dtype,
                    backend,
                )
            })
            .collect::<Result<_>>()?;
        Ok(GptCache { layers })
    }

    /// Positions cached (the same in every layer).
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, KvCache::len)
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions each layer can hold (the block size).
    pub fn capacity(&self) -> usize {
        self.layers.first().map_or(0, KvCache::capacity)
    }

    /// Forgets every position.
    pub fn clear(&mut self) {
        self.layers.iter_mut().for_each(KvCache::clear);
    }

    /// Keeps the first `len` positions of every layer (see [`KvCache::truncate`]).
    pub fn truncate(&mut self, len: usize) {
        self.layers.iter_mut().for_each(|c| c.truncate(len));
    }

    /// The per-block caches.
    pub fn layers(&self) -> &[KvCache<B>] {
        &self.layers
    }

    /// The per-block caches, mutably.
    pub fn layers_mut(&mut self) -> &mut [KvCache<B>] {
        &mut self.layers
    }
}
