//! [`KvCache`]: the keys and values one attention layer has seen, kept for incremental decoding.

use tessera_core::{Backend, DType, Error, Result, Tensor};

/// Preallocated `[batch, heads, capacity, head_dim]` keys and values of one attention layer and
/// how many positions are filled. New positions are written in place
/// ([`Tensor::narrow_assign_in_place`]), and attention reads the filled part as a view, so a
/// decoding step costs O(length) rather than a copy of the cache.
#[derive(Debug)]
pub struct KvCache<B: Backend> {
    keys: Tensor<B>,
    values: Tensor<B>,
    len: usize,
}

impl<B: Backend> KvCache<B> {
    /// An empty cache for `capacity` positions.
    pub fn new(
        batch: usize,
        heads: usize,
        capacity: usize,
        head_dim: usize,
        dtype: DType,
        backend: &B,
    ) -> Result<Self> {
        let dims = [batch, heads, capacity, head_dim];
        Ok(KvCache {
            keys: Tensor::zeros(dims, dtype, backend)?,
            values: Tensor::zeros(dims, dtype, backend)?,
            len: 0,
        })
    }

    /// Filled positions.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True before the first position is appended.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The dtype of the cached keys and values.
    pub fn dtype(&self) -> DType {
        self.keys.dtype()
    }

    /// Positions the cache can hold.
    pub fn capacity(&self) -> usize {
        self.keys.dims()[2]
    }

    /// Forgets every position (the memory is kept).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Keeps the first `len` positions and forgets the rest (no-op when `len` is not below
    /// [`KvCache::len`]): rewinding to a shared prefix, e.g. to decode again after the same
    /// prompt.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Appends `keys`, `values: [batch, heads, n, head_dim]` and returns views of every filled
    /// position, `[batch, heads, len, head_dim]`. The views must be dropped before the next
    /// append (which writes in place and fails, changing nothing, while one is alive).
    pub fn append(
        &mut self,
        keys: &Tensor<B>,
        values: &Tensor<B>,
    ) -> Result<(Tensor<B>, Tensor<B>)> {
        let n = keys.dims().get(2).copied().unwrap_or(0);
        if self.len + n > self.capacity() {
            return Err(Error::InvalidArgument {
                op: "KvCache::append",
                msg: format!(
                    "{} cached positions plus {n} new ones exceed the capacity {}",
                    self.len,
                    self.capacity()
                ),
            });
        }
        self.keys.narrow_assign_in_place(2, self.len, keys)?;
        self.values.narrow_assign_in_place(2, self.len, values)?;
        self.len += n;
        Ok((
            self.keys.narrow(2, 0, self.len)?,
            self.values.narrow(2, 0, self.len)?,
        ))
    }
}
