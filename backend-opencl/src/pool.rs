//! The buffer pool: freed device buffers are kept by size class and handed out again, so that
//! steady-state work (a training step repeating the same shapes) creates no buffers at all.
//!
//! Reuse is safe without waiting for the device because every command goes through one
//! in-order queue: a command writing a recycled buffer runs after every command that used it.

use crate::buffer::DeviceBuffer;
use std::collections::HashMap;

/// Smallest size class, in bytes.
const MIN_CLASS: usize = 256;

/// The size class of a request: a power of two up to 4 KiB, above that a multiple of one eighth
/// of the enclosing power of two (so at most 12.5% is wasted).
pub(crate) fn size_class(bytes: usize) -> usize {
    let bytes = bytes.max(1);
    if bytes <= 4096 {
        return bytes.next_power_of_two().max(MIN_CLASS);
    }
    let step = bytes.next_power_of_two() / 8;
    bytes.div_ceil(step) * step
}

/// Free buffers by size class, with a cap on the bytes kept.
#[derive(Debug)]
pub(crate) struct BufferPool {
    free: HashMap<usize, Vec<DeviceBuffer>>,
    cached_bytes: usize,
    limit_bytes: usize,
}

impl BufferPool {
    /// An empty pool keeping at most `limit_bytes` of free buffers.
    pub(crate) fn new(limit_bytes: usize) -> Self {
        BufferPool {
            free: HashMap::new(),
            cached_bytes: 0,
            limit_bytes,
        }
    }

    /// A free buffer of exactly `class` bytes, if one is cached.
    pub(crate) fn take(&mut self, class: usize) -> Option<DeviceBuffer> {
        let buffer = self.free.get_mut(&class)?.pop()?;
        self.cached_bytes -= buffer.bytes();
        Some(buffer)
    }

    /// Keeps `buffer` for reuse, or drops (releases) it when the cache is full.
    pub(crate) fn give_back(&mut self, buffer: DeviceBuffer) {
        if self.cached_bytes + buffer.bytes() > self.limit_bytes {
            return;
        }
        self.cached_bytes += buffer.bytes();
        self.free.entry(buffer.bytes()).or_default().push(buffer);
    }

    /// Releases every cached buffer (before retrying a failed allocation).
    pub(crate) fn clear(&mut self) {
        self.free.clear();
        self.cached_bytes = 0;
    }

    /// Bytes currently cached.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(1), 256);
        assert_eq!(size_class(257), 512);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 5120);
        for bytes in [5000, 100_000, 3_000_001, 1 << 30] {
            let c = size_class(bytes);
            assert!(
                c >= bytes && c as f64 <= bytes as f64 * 1.25,
                "{bytes} -> {c}"
            );
            assert_eq!(size_class(c), c, "classes are fixed points");
        }
    }
}
