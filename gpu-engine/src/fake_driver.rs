//! [`FakeDriver`] (tests only): a device with a fixed amount of memory and no kernels, which
//! records what the engine asks of it, so that the buffer pool's policy (reuse, freeing the
//! cache and retrying on out-of-memory, typed errors, freeing only after a wait) is tested
//! without a GPU.

use crate::driver::{BlasGemm, Driver, DriverArg, DriverInfo, Launch};
use std::sync::{Arc, Mutex, MutexGuard};
use tessera_core::{Error, Result};

/// One fake allocation.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct FakeBuffer {
    pub(crate) id: u64,
    pub(crate) bytes: usize,
}

/// What the device saw, in order.
#[derive(Debug, Default)]
pub(crate) struct Record {
    pub(crate) used: usize,
    pub(crate) next_id: u64,
    /// Allocations asked for (bytes), including failed ones.
    pub(crate) requests: Vec<usize>,
    /// Ids freed.
    pub(crate) freed: Vec<u64>,
    pub(crate) syncs: usize,
    /// Freed while work could still be queued (no synchronisation since the last launch or
    /// write): must never happen.
    pub(crate) freed_while_busy: usize,
    pub(crate) busy: bool,
}

/// A device with `capacity` bytes.
pub(crate) struct FakeDriver {
    info: DriverInfo,
    capacity: usize,
    record: Arc<Mutex<Record>>,
}

impl FakeDriver {
    /// A device of `capacity` bytes whose single buffers hold at most `max_buffer` bytes and
    /// whose pool caches at most `pool_limit` bytes.
    pub(crate) fn new(capacity: usize, max_buffer: u64, pool_limit: usize) -> Self {
        FakeDriver {
            info: DriverInfo {
                backend: "fake",
                ordinal: 0,
                name: "fake device".into(),
                compute_units: 1,
                memory_bytes: capacity as u64,
                max_buffer_bytes: max_buffer,
                pool_limit_bytes: pool_limit,
                supports_f64: true,
                launch_group: 64,
                reduce_group: 64,
                max_grid_z: usize::MAX,
            },
            capacity,
            record: Arc::default(),
        }
    }

    /// What the device saw so far.
    pub(crate) fn record(&self) -> MutexGuard<'_, Record> {
        self.record.lock().unwrap()
    }

    /// The record, readable after the driver is dropped.
    pub(crate) fn shared_record(&self) -> Arc<Mutex<Record>> {
        self.record.clone()
    }
}

impl Driver for FakeDriver {
    type Buffer = FakeBuffer;

    fn info(&self) -> &DriverInfo {
        &self.info
    }

    fn allocate(&self, bytes: usize) -> Result<FakeBuffer> {
        let mut r = self.record();
        r.requests.push(bytes);
        if r.used + bytes > self.capacity {
            return Err(Error::OutOfMemory {
                device: "driver's own name".into(),
                requested_bytes: bytes,
            });
        }
        r.used += bytes;
        r.next_id += 1;
        Ok(FakeBuffer {
            id: r.next_id,
            bytes,
        })
    }

    fn free(&self, buffer: FakeBuffer) {
        let mut r = self.record();
        r.used -= buffer.bytes;
        r.freed.push(buffer.id);
        if r.busy {
            r.freed_while_busy += 1;
        }
    }

    fn write(&self, _dst: &FakeBuffer, _src: &[u8]) -> Result<()> {
        self.record().busy = true;
        Ok(())
    }

    fn read(&self, _src: &FakeBuffer, _byte_offset: usize, dst: &mut [u8]) -> Result<()> {
        let mut r = self.record();
        r.busy = false;
        r.syncs += 1;
        dst.fill(0);
        Ok(())
    }

    fn fill(&self, _dst: &FakeBuffer, _pattern: &[u8], _bytes: usize) -> Result<()> {
        self.record().busy = true;
        Ok(())
    }

    fn launch(&self, launch: &Launch<'_>, _args: &[DriverArg<'_, FakeBuffer>]) -> Result<()> {
        Err(Error::Backend {
            backend: "fake",
            op: launch.kernel,
            msg: "the fake device runs no kernels".into(),
        })
    }

    fn synchronize(&self) -> Result<()> {
        let mut r = self.record();
        r.busy = false;
        r.syncs += 1;
        Ok(())
    }

    fn blas_gemm(&self, _call: &BlasGemm<'_, FakeBuffer>) -> Option<Result<()>> {
        None
    }

    fn blas_unavailable(&self) -> Option<String> {
        Some("the fake device has no BLAS".into())
    }

    fn modules_built(&self) -> u64 {
        0
    }
}
