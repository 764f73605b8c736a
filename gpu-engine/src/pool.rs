//! The caching buffer pool shared by every driver: device memory is requested in size classes,
//! and a buffer no longer used goes back to a per-class free list instead of to the device, so
//! that steady-state work (a training step repeating the same shapes) allocates nothing.
//!
//! Reuse needs no synchronisation because all work of a device goes through its one in-order
//! queue: a kernel writing a recycled buffer runs after every kernel queued earlier that used
//! it. Giving memory back to the device is different (queued work may still use it), so the
//! pool only hands buffers to [`crate::Driver::free`] once the device has drained: cached
//! buffers when the cache is emptied (after a wait), buffers beyond the cache limit after the
//! next synchronisation. The runtime drives the allocation policy (`Runtime::alloc`: cache, then
//! the device, then free the cache and retry once, then [`tessera_core::Error::OutOfMemory`]);
//! this file is the bookkeeping.

use std::collections::HashMap;

/// Smallest size class, in bytes.
const MIN_CLASS: usize = 512;

/// The size class of a request: a power of two up to 4 KiB (at least 512 B), above that a
/// multiple of one eighth of the enclosing power of two (so at most 12.5% is wasted). None when
/// the class does not fit in a `usize`.
pub(crate) fn size_class(bytes: usize) -> Option<usize> {
    let bytes = bytes.max(1);
    if bytes <= 4096 {
        return Some(bytes.next_power_of_two().max(MIN_CLASS));
    }
    let step = bytes.checked_next_power_of_two()? / 8;
    bytes.div_ceil(step).checked_mul(step)
}

/// What a device's pool holds, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Free buffers kept for reuse (or waiting for the device to drain before they are freed).
    pub cached_bytes: usize,
    /// Obtained from the device and not given back: in use, cached or waiting to be freed.
    pub allocated_bytes: usize,
}

/// Free buffers by size class, with their totals.
#[derive(Debug)]
pub(crate) struct BufferPool<B> {
    free: HashMap<usize, Vec<B>>,
    /// Buffers released while the cache was full: freed once the device has drained.
    retired: Vec<(B, usize)>,
    cached_bytes: usize,
    retired_bytes: usize,
    allocated_bytes: usize,
    limit_bytes: usize,
}

impl<B> BufferPool<B> {
    /// An empty pool caching at most `limit_bytes` of free buffers.
    pub(crate) fn new(limit_bytes: usize) -> Self {
        BufferPool {
            free: HashMap::new(),
            retired: Vec::new(),
            cached_bytes: 0,
            retired_bytes: 0,
            allocated_bytes: 0,
            limit_bytes,
        }
    }

    /// A cached buffer of exactly `class` bytes, if there is one.
    pub(crate) fn take(&mut self, class: usize) -> Option<B> {
        let buffer = self.free.get_mut(&class)?.pop()?;
        self.cached_bytes -= class;
        Some(buffer)
    }

    /// Records a buffer of `class` bytes newly obtained from the device.
    pub(crate) fn created(&mut self, class: usize) {
        self.allocated_bytes += class;
    }

    /// Takes back a buffer of `class` bytes the host no longer uses: cached for reuse, or, when
    /// the cache is full, kept until the device has drained ([`BufferPool::take_retired`]).
    pub(crate) fn give_back(&mut self, buffer: B, class: usize) {
        if self.cached_bytes.saturating_add(class) <= self.limit_bytes {
            self.cached_bytes += class;
            self.free.entry(class).or_default().push(buffer);
        } else {
            self.retired_bytes += class;
            self.retired.push((buffer, class));
        }
    }

    /// The buffers released beyond the cache limit, to free now that the device has drained.
    pub(crate) fn take_retired(&mut self) -> Vec<B> {
        self.allocated_bytes -= self.retired_bytes;
        self.retired_bytes = 0;
        self.retired.drain(..).map(|(b, _)| b).collect()
    }

    /// Every buffer the pool holds (cached and retired), to free once the device has drained.
    pub(crate) fn take_all(&mut self) -> Vec<(B, usize)> {
        let mut all: Vec<(B, usize)> = self.retired.drain(..).collect();
        for (class, buffers) in self.free.drain() {
            all.extend(buffers.into_iter().map(|b| (b, class)));
        }
        self.allocated_bytes -= self.cached_bytes + self.retired_bytes;
        self.cached_bytes = 0;
        self.retired_bytes = 0;
        all
    }

    /// Whether the pool holds any buffer.
    pub(crate) fn is_empty(&self) -> bool {
        self.cached_bytes == 0 && self.retired.is_empty()
    }

    /// The totals.
    pub(crate) fn usage(&self) -> MemoryUsage {
        MemoryUsage {
            cached_bytes: self.cached_bytes + self.retired_bytes,
            allocated_bytes: self.allocated_bytes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(0), Some(512));
        assert_eq!(size_class(1), Some(512));
        assert_eq!(size_class(513), Some(1024));
        assert_eq!(size_class(4096), Some(4096));
        assert_eq!(size_class(4097), Some(5120));
        for bytes in [5000, 100_000, 3_000_001, 1 << 30, (1 << 30) + 1, 1 << 62] {
            let c = size_class(bytes).unwrap();
            assert!(
                c >= bytes && c as f64 <= bytes as f64 * 1.25,
                "{bytes} -> {c}"
            );
            assert_eq!(size_class(c), Some(c), "classes are fixed points");
        }
    }

    #[test]
    fn classes_that_overflow_are_none_not_a_panic() {
        assert_eq!(size_class(usize::MAX), None);
        assert_eq!(size_class((1 << 63) + 1), None);
        assert_eq!(size_class(usize::MAX - 4096), None);
        assert_eq!(size_class(1 << 63), Some(1 << 63));
    }

    #[test]
    fn buffers_beyond_the_limit_are_retired_until_taken() {
        let mut pool = BufferPool::new(1024);
        pool.created(1024);
        pool.created(512);
        pool.give_back("a", 1024);
        pool.give_back("b", 512);
        assert_eq!(
            pool.usage(),
            MemoryUsage {
                cached_bytes: 1536,
                allocated_bytes: 1536
            }
        );
        assert_eq!(pool.take(512), None, "the 512-byte buffer was retired");
        assert_eq!(pool.take_retired(), vec!["b"]);
        assert_eq!(pool.usage().allocated_bytes, 1024);
        assert_eq!(pool.take(1024), Some("a"));
        assert!(pool.is_empty());
        pool.give_back("a", 1024);
        assert_eq!(pool.take_all(), vec![("a", 1024)]);
        assert_eq!(pool.usage(), MemoryUsage::default());
    }
}
