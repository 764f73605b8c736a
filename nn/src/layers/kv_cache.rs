//! [`KvCache`]: the keys and values one attention layer has seen, kept for incremental decoding.

use tessera_core::{Backend, DType, Error, Result, Tensor};

/// `[batch, heads, allocated, head_dim]` keys and values of one attention layer and how many
/// positions are filled. New positions are written in place
/// ([`Tensor::narrow_assign_in_place`]), and attention reads the filled part as a view, so a
/// decoding step costs O(length) rather than a copy of the cache. The buffers start at
/// [`KvCache::INITIAL_POSITIONS`] (or the capacity, if smaller) and double when full, up to the
/// capacity: a model that knows 128k positions does not reserve them all for a short prompt.
#[derive(Debug)]
pub struct KvCache<B: Backend> {
    keys: Tensor<B>,
    values: Tensor<B>,
    len: usize,
    capacity: usize,
    /// Whether some of the `len` positions were counted without being written
    /// ([`KvCache::skip`]).
    skipped: bool,
}

impl<B: Backend> KvCache<B> {
    /// Positions allocated at first (fewer when the capacity is smaller).
    pub const INITIAL_POSITIONS: usize = 256;

    /// An empty cache for up to `capacity` positions.
    pub fn new(
        batch: usize,
        heads: usize,
        capacity: usize,
        head_dim: usize,
        dtype: DType,
        backend: &B,
    ) -> Result<Self> {
        let dims = [
            batch,
            heads,
            capacity.min(Self::INITIAL_POSITIONS),
            head_dim,
        ];
        Ok(KvCache {
            keys: Tensor::zeros(dims, dtype, backend)?,
            values: Tensor::zeros(dims, dtype, backend)?,
            len: 0,
            capacity,
            skipped: false,
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
        self.capacity
    }

    /// Positions the buffers hold now (at most the capacity).
    pub fn allocated(&self) -> usize {
        self.keys.dims()[2]
    }

    /// Reallocates both buffers for at least `needed` positions (doubling, up to the
    /// capacity), keeping the filled ones.
    fn grow(&mut self, needed: usize) -> Result<()> {
        let positions = needed.max(2 * self.allocated()).min(self.capacity);
        let mut dims = self.keys.dims().to_vec();
        dims[2] = positions;
        let (dtype, backend) = (self.keys.dtype(), self.keys.backend().clone());
        let mut keys = Tensor::zeros(dims.clone(), dtype, &backend)?;
        let mut values = Tensor::zeros(dims, dtype, &backend)?;
        if self.len > 0 {
            keys.narrow_assign_in_place(2, 0, &self.keys.narrow(2, 0, self.len)?)?;
            values.narrow_assign_in_place(2, 0, &self.values.narrow(2, 0, self.len)?)?;
        }
        (self.keys, self.values) = (keys, values);
        Ok(())
    }

    /// Forgets every position (the memory is kept).
    pub fn clear(&mut self) {
        self.len = 0;
        self.skipped = false;
    }

    /// Keeps the first `len` positions and forgets the rest (no-op when `len` is not below
    /// [`KvCache::len`]): rewinding to a shared prefix, e.g. to decode again after the same
    /// prompt.
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
        self.skipped &= self.len > 0;
    }

    /// Counts `n` more positions without writing them: what a rank does for a layer another
    /// rank computes (pipelined decoding of a sharded model,
    /// [`crate::distributed::ShardedUnits::hold_by_owners`]), so that the model's position
    /// count stays right. Appending to the cache after is refused (its positions hold no keys)
    /// until it is cleared, or truncated to no position.
    pub fn skip(&mut self, n: usize) -> Result<()> {
        if self.len + n > self.capacity() {
            return Err(Error::InvalidArgument {
                op: "KvCache::skip",
                msg: format!(
                    "{} cached positions plus {n} new ones exceed the capacity {}",
                    self.len,
                    self.capacity()
                ),
            });
        }
        self.len += n;
        self.skipped |= n > 0;
        Ok(())
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
        if self.skipped {
            return Err(Error::InvalidArgument {
                op: "KvCache::append",
                msg: format!(
                    "the cache's {} positions were counted on this rank but computed on \
                     another (KvCache::skip: its layer's pass ran on its owner); clear the \
                     cache and decode again",
                    self.len
                ),
            });
        }
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
        if self.len + n > self.allocated() {
            self.grow(self.len + n)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_cpu::Cpu;

    #[test]
    fn the_buffers_grow_to_the_capacity_keeping_what_was_cached() {
        let dev = Cpu::new();
        let mut cache = KvCache::new(1, 2, 700, 3, DType::F32, &dev).unwrap();
        assert_eq!((cache.allocated(), cache.capacity()), (256, 700));
        let mut expected = Vec::new();
        for chunk in [100, 200, 1, 299, 100] {
            let start = cache.len();
            // Position p of head h holds p + 1000 h in every element.
            let data: Vec<f32> = (0..2)
                .flat_map(|h| (start..start + chunk).flat_map(move |p| [(p + 1000 * h) as f32; 3]))
                .collect();
            let t = Tensor::from_vec(data, [1, 2, chunk, 3], &dev).unwrap();
            let (k, v) = cache.append(&t, &t).unwrap();
            assert_eq!(k.dims(), [1, 2, start + chunk, 3]);
            expected = (0..2)
                .flat_map(|h| (0..start + chunk).flat_map(move |p| [(p + 1000 * h) as f64; 3]))
                .collect();
            assert_eq!(k.to_vec_f64().unwrap(), expected);
            assert_eq!(v.to_vec_f64().unwrap(), expected);
        }
        assert_eq!((cache.len(), cache.allocated()), (700, 700));
        let one = Tensor::zeros([1, 2, 1, 3], DType::F32, &dev).unwrap();
        assert!(cache.append(&one, &one).is_err(), "past the capacity");
        assert_eq!(cache.len(), 700);
        assert!(!expected.is_empty());
    }

    #[test]
    fn skipped_positions_count_but_refuse_appends_until_cleared() {
        let dev = Cpu::new();
        let mut cache = KvCache::new(1, 1, 4, 2, DType::F32, &dev).unwrap();
        let one = Tensor::ones([1, 1, 1, 2], DType::F32, &dev).unwrap();
        cache.skip(3).unwrap();
        assert_eq!(cache.len(), 3);
        assert!(cache.skip(2).is_err(), "past the capacity");
        let refused = cache.append(&one, &one).unwrap_err();
        assert!(refused.to_string().contains("another"), "{refused}");
        // Truncated to some positions, they are still unwritten; to none, the cache is whole.
        cache.truncate(1);
        assert!(cache.append(&one, &one).is_err());
        cache.truncate(0);
        assert_eq!(cache.append(&one, &one).unwrap().0.dims(), &[1, 1, 1, 2]);
        cache.skip(1).unwrap();
        cache.clear();
        assert!(cache.append(&one, &one).is_ok());
    }
}
