//! The caching allocator: device memory is requested from the driver in size classes, and a
//! buffer no longer used goes back to a per-class free list of its device instead of being
//! freed, so steady-state work (a training step repeating the same shapes) allocates nothing.
//!
//! Reuse needs no synchronisation because all work of a device goes through its one stream: a
//! kernel writing a recycled buffer runs after every kernel queued earlier that used it. When
//! the driver reports out-of-memory, the allocator waits for the stream, frees every cached
//! buffer and tries once more; a second failure is [`Error::OutOfMemory`].
//!
//! The logic is written against [`DeviceMemory`] so that it is tested without a GPU.

use std::collections::HashMap;
use tessera_core::{Error, Result};

/// Smallest size class, in bytes.
const MIN_CLASS: usize = 512;

/// The size class of a request: a power of two up to 4 KiB (at least 512 B), above that a
/// multiple of one eighth of the enclosing power of two (so at most 12.5% is wasted).
pub(crate) fn size_class(bytes: usize) -> usize {
    let bytes = bytes.max(1);
    if bytes <= 4096 {
        return bytes.next_power_of_two().max(MIN_CLASS);
    }
    let step = bytes.next_power_of_two() / 8;
    bytes.div_ceil(step) * step
}

/// Why a raw allocation failed.
#[derive(Debug)]
pub(crate) enum AllocFailure {
    /// The device is out of memory (worth retrying after freeing the cache).
    OutOfMemory,
    /// Anything else, already a Tessera error.
    Other(Error),
}

/// Raw device memory: what the allocator asks the driver for.
pub(crate) trait DeviceMemory {
    /// Allocates `bytes` bytes, returning the device address.
    fn allocate(&self, bytes: usize) -> std::result::Result<u64, AllocFailure>;
    /// Frees an address returned by `allocate`.
    fn free(&self, address: u64);
    /// Waits until no queued work can still use a cached buffer.
    fn synchronize(&self) -> Result<()>;
    /// The device's name for errors (`cuda:0`).
    fn device_name(&self) -> String;
}

/// One device allocation of `bytes` (its size class) at `address`.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Block {
    pub(crate) address: u64,
    pub(crate) bytes: usize,
}

/// Free blocks by size class, with their total.
#[derive(Debug, Default)]
pub(crate) struct CachingAllocator {
    free: HashMap<usize, Vec<u64>>,
    cached_bytes: usize,
    allocated_bytes: usize,
}

impl CachingAllocator {
    /// A block of at least `bytes` bytes (> 0) and whether it came from the cache.
    pub(crate) fn allocate<M: DeviceMemory>(
        &mut self,
        memory: &M,
        bytes: usize,
    ) -> Result<(Block, bool)> {
        let class = size_class(bytes);
        if let Some(address) = self.free.get_mut(&class).and_then(Vec::pop) {
            self.cached_bytes -= class;
            return Ok((
                Block {
                    address,
                    bytes: class,
                },
                true,
            ));
        }
        let address = match memory.allocate(class) {
            Ok(address) => address,
            Err(AllocFailure::Other(e)) => return Err(e),
            Err(AllocFailure::OutOfMemory) => {
                self.empty(memory)?;
                match memory.allocate(class) {
                    Ok(address) => address,
                    Err(AllocFailure::Other(e)) => return Err(e),
                    Err(AllocFailure::OutOfMemory) => {
                        return Err(Error::OutOfMemory {
                            device: memory.device_name(),
                            requested_bytes: bytes,
                        })
                    }
                }
            }
        };
        self.allocated_bytes += class;
        Ok((
            Block {
                address,
                bytes: class,
            },
            false,
        ))
    }

    /// Keeps `block` for reuse.
    pub(crate) fn release(&mut self, block: Block) {
        self.cached_bytes += block.bytes;
        self.free
            .entry(block.bytes)
            .or_default()
            .push(block.address);
    }

    /// Waits for the device, then frees every cached block.
    pub(crate) fn empty<M: DeviceMemory>(&mut self, memory: &M) -> Result<()> {
        if self.cached_bytes == 0 {
            return Ok(());
        }
        memory.synchronize()?;
        for (class, addresses) in self.free.drain() {
            for address in addresses {
                memory.free(address);
                self.allocated_bytes -= class;
            }
        }
        self.cached_bytes = 0;
        Ok(())
    }

    /// Bytes of free blocks kept for reuse.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.cached_bytes
    }

    /// Bytes obtained from the device and not freed (in use or cached).
    pub(crate) fn allocated_bytes(&self) -> usize {
        self.allocated_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::{Cell, RefCell};

    /// A device with `capacity` bytes that records frees and synchronisations.
    struct FakeMemory {
        capacity: usize,
        used: Cell<usize>,
        next: Cell<u64>,
        sizes: RefCell<HashMap<u64, usize>>,
        syncs: Cell<usize>,
    }

    impl FakeMemory {
        fn new(capacity: usize) -> Self {
            FakeMemory {
                capacity,
                used: Cell::new(0),
                next: Cell::new(0x1000),
                sizes: RefCell::new(HashMap::new()),
                syncs: Cell::new(0),
            }
        }
    }

    impl DeviceMemory for FakeMemory {
        fn allocate(&self, bytes: usize) -> std::result::Result<u64, AllocFailure> {
            if self.used.get() + bytes > self.capacity {
                return Err(AllocFailure::OutOfMemory);
            }
            self.used.set(self.used.get() + bytes);
            let address = self.next.get();
            self.next.set(address + bytes as u64);
            self.sizes.borrow_mut().insert(address, bytes);
            Ok(address)
        }

        fn free(&self, address: u64) {
            let bytes = self
                .sizes
                .borrow_mut()
                .remove(&address)
                .expect("known address");
            self.used.set(self.used.get() - bytes);
        }

        fn synchronize(&self) -> Result<()> {
            self.syncs.set(self.syncs.get() + 1);
            Ok(())
        }

        fn device_name(&self) -> String {
            "fake:0".into()
        }
    }

    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 5120);
        for bytes in [5000, 100_000, 3_000_001, 1 << 30, (1 << 30) + 1] {
            let c = size_class(bytes);
            assert!(
                c >= bytes && c as f64 <= bytes as f64 * 1.25,
                "{bytes} -> {c}"
            );
            assert_eq!(size_class(c), c, "classes are fixed points");
        }
    }

    #[test]
    fn released_blocks_are_reused_within_their_class() {
        let memory = FakeMemory::new(1 << 20);
        let mut allocator = CachingAllocator::default();
        let (a, reused) = allocator.allocate(&memory, 1000).unwrap();
        assert!(!reused);
        assert_eq!(a.bytes, 1024);
        let address = a.address;
        allocator.release(a);
        assert_eq!(allocator.cached_bytes(), 1024);
        let (b, reused) = allocator.allocate(&memory, 700).unwrap();
        assert!(reused);
        assert_eq!(b.address, address);
        assert_eq!(allocator.cached_bytes(), 0);
        // Another class does not take it.
        allocator.release(b);
        let (c, reused) = allocator.allocate(&memory, 3000).unwrap();
        assert!(!reused);
        assert_ne!(c.address, address);
        assert_eq!(allocator.allocated_bytes(), 1024 + 4096);
    }

    #[test]
    fn out_of_memory_frees_the_cache_and_retries_once() {
        let memory = FakeMemory::new(8192);
        let mut allocator = CachingAllocator::default();
        let (a, _) = allocator.allocate(&memory, 4096).unwrap();
        let (b, _) = allocator.allocate(&memory, 2048).unwrap();
        allocator.release(a);
        allocator.release(b);
        // 8 KiB does not fit beside the cached 6 KiB: the cache is freed after a sync.
        let (c, reused) = allocator.allocate(&memory, 8192).unwrap();
        assert!(!reused);
        assert_eq!(memory.syncs.get(), 1);
        assert_eq!(allocator.cached_bytes(), 0);
        assert_eq!(allocator.allocated_bytes(), 8192);
        // Nothing is left to free: a typed error naming the device and the request.
        let err = allocator.allocate(&memory, 600).unwrap_err();
        assert_eq!(
            err,
            Error::OutOfMemory {
                device: "fake:0".into(),
                requested_bytes: 600
            }
        );
        allocator.release(c);
        allocator.empty(&memory).unwrap();
        assert_eq!(memory.used.get(), 0);
    }
}
