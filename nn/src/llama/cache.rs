//! [`LlamaCache`]: the key/value caches of every layer of a [`super::Llama`].

use super::LlamaConfig;
use crate::layers::KvCache;
use tessera_core::{Backend, Result};

/// One [`KvCache`] per layer, each `[batch, kv_heads, max_position_embeddings, head_dim]` (the
/// key/value heads only: grouped-query attention shares them, nothing is repeated per query
/// head).
#[derive(Debug)]
pub struct LlamaCache<B: Backend> {
    layers: Vec<KvCache<B>>,
}

impl<B: Backend> LlamaCache<B> {
    /// Empty caches for `batch` sequences of a model of `config`, in the dtype its attention
    /// computes in.
    pub fn new(config: &LlamaConfig, batch: usize, backend: &B) -> Result<Self> {
        config.validate()?;
        let dtype = config.precision.compute_dtype().unwrap_or(config.dtype);
        let mut layers = Vec::new();
        layers
            .try_reserve_exact(config.num_hidden_layers)
            .map_err(|_| tessera_core::Error::OutOfMemory {
                device: "host".into(),
                requested_bytes: config
                    .num_hidden_layers
                    .saturating_mul(std::mem::size_of::<KvCache<B>>()),
            })?;
        for _ in 0..config.num_hidden_layers {
            layers.push(KvCache::new(
                batch,
                config.num_key_value_heads,
                config.max_position_embeddings,
                config.head_dim(),
                dtype,
                backend,
            )?);
        }
        Ok(LlamaCache { layers })
    }

    /// Positions cached.
    pub fn len(&self) -> usize {
        self.layers.first().map_or(0, KvCache::len)
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Positions each layer can hold.
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

    /// The per-layer caches.
    pub fn layers(&self) -> &[KvCache<B>] {
        &self.layers
    }

    /// The per-layer caches, mutably.
    pub fn layers_mut(&mut self) -> &mut [KvCache<B>] {
        &mut self.layers
    }
}
