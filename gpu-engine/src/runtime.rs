//! [`Runtime`]: what every handle and storage on one device shares, over a [`Driver`]: memory,
//! launches, the asynchronous error flag, the log of queued kernels and the counters.
//!
//! Nothing waits for the device except [`Runtime::read`] and [`Runtime::finish`], which count as
//! host synchronisations, report an index error recorded by a kernel and attribute a driver error
//! raised by queued work to the kernels queued since the last synchronisation.
//!
//! Memory comes from the caching [`BufferPool`]: a request is served from the cache, else by
//! the driver, else (out of memory) the cache is freed after a wait and the driver asked once
//! more; a request that still fails, or whose size does not even fit in a `usize`, is
//! [`Error::OutOfMemory`] naming the device and the bytes requested.
//!
//! Locking: `flow` is held while a command is queued and while the host waits, so that the error
//! flag is read after every kernel that may have written it; `pool` is held only for its
//! bookkeeping, never while the driver allocates or waits, and may be taken while `flow` is
//! held (never the other way round), so storages are given back from any thread at any time.

use crate::counters::{Counters, RuntimeStats};
use crate::driver::{BlasGemm, Driver, DriverArg, DriverInfo, Launch, ModuleKey};
use crate::error_flag::{self, FLAG_WORDS};
use crate::launch_log::{LaunchLog, LAUNCH_BLOCKING_ENV_VAR};
use crate::pool::{size_class, BufferPool, MemoryUsage};
use crate::storage::GpuStorage;
use crate::view::View;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tessera_core::{bf16, f16, BackendStorage, DType, Error, HostData, Result};

/// A kernel argument as the ops write it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a, D: Driver> {
    /// A storage's buffer (an empty storage passes a null pointer that is never read).
    Buffer(&'a GpuStorage<D>),
    /// The device's error flag.
    ErrorFlag,
    I64(i64),
    U64(u64),
    U32(u32),
    I32(i32),
    F32(f32),
    F64(f64),
    View(View),
}

/// State changed by queueing commands and by waiting.
#[derive(Debug, Default)]
struct Flow {
    log: LaunchLog,
    /// Whether a kernel that may write the error flag ran since it was last read.
    flag_dirty: bool,
}

/// What every handle and storage on one device shares: the driver, the buffer pool, the error
/// flag, the log of queued kernels and the counters. Nothing waits for the device except reading
/// back and [`Runtime::finish`].
pub struct Runtime<D: Driver> {
    driver: D,
    counters: Counters,
    flow: Mutex<Flow>,
    pool: Mutex<BufferPool<D::Buffer>>,
    /// Always `Some` until the runtime is dropped (then given back to the driver).
    error_flag: Option<D::Buffer>,
    launch_blocking: bool,
}

impl<D: Driver> Runtime<D> {
    /// The runtime over `driver`, with a cleared error flag.
    pub fn new(driver: D) -> Result<Arc<Self>> {
        let error_flag = driver.allocate(FLAG_WORDS * 4)?;
        if let Err(e) = driver.fill(&error_flag, &[0; 4], FLAG_WORDS * 4) {
            driver.free(error_flag);
            return Err(e);
        }
        let launch_blocking = std::env::var(LAUNCH_BLOCKING_ENV_VAR).is_ok_and(|v| v == "1");
        let pool = BufferPool::new(driver.info().pool_limit_bytes);
        Ok(Arc::new(Runtime {
            driver,
            counters: Counters::default(),
            flow: Mutex::new(Flow::default()),
            pool: Mutex::new(pool),
            error_flag: Some(error_flag),
            launch_blocking,
        }))
    }

    /// The driver.
    pub fn driver(&self) -> &D {
        &self.driver
    }

    /// The device's description.
    pub fn info(&self) -> &DriverInfo {
        self.driver.info()
    }

    /// The backend name for errors ([`DriverInfo::backend`]).
    pub fn backend(&self) -> &'static str {
        self.driver.info().backend
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> RuntimeStats {
        self.counters.snapshot(self.driver.modules_built())
    }

    fn flow(&self, op: &'static str) -> Result<MutexGuard<'_, Flow>> {
        self.flow.lock().map_err(|_| Error::Backend {
            backend: self.backend(),
            op,
            msg: "the device state was poisoned by a panic".into(),
        })
    }

    // ----- memory -----

    fn pool(&self, op: &'static str) -> Result<MutexGuard<'_, BufferPool<D::Buffer>>> {
        self.pool.lock().map_err(|_| Error::Backend {
            backend: self.backend(),
            op,
            msg: "the buffer pool was poisoned by a panic".into(),
        })
    }

    /// A storage of `len` elements of `dtype` with undefined contents.
    ///
    /// # Errors
    /// [`Error::OutOfMemory`] naming the bytes requested (`usize::MAX` when `len` elements do
    /// not even fit in a `usize` of bytes) when the device cannot provide them, after freeing
    /// the cache; a driver error otherwise.
    pub fn alloc(self: &Arc<Self>, dtype: DType, len: usize) -> Result<GpuStorage<D>> {
        if !has_kernels(dtype) {
            return Err(Error::UnsupportedDType { op: "alloc", dtype });
        }
        if len == 0 {
            return Ok(GpuStorage::new(self.clone(), None, 0, dtype, 0));
        }
        let bytes = len.saturating_mul(dtype.size_in_bytes());
        let (buffer, capacity) = self.alloc_bytes(bytes)?;
        Ok(GpuStorage::new(
            self.clone(),
            Some(buffer),
            capacity,
            dtype,
            len,
        ))
    }

    /// A buffer of at least `bytes` bytes and its size (the size class): cached, else from the
    /// driver, else from the driver again after freeing the cache.
    fn alloc_bytes(&self, bytes: usize) -> Result<(D::Buffer, usize)> {
        let out_of_memory = || Error::OutOfMemory {
            device: self.info().to_string(),
            requested_bytes: bytes,
        };
        // Larger than the device's largest buffer (or than any `usize`): freeing the cache
        // cannot help.
        let class = size_class(bytes)
            .filter(|&class| class as u64 <= self.info().max_buffer_bytes)
            .ok_or_else(out_of_memory)?;
        if let Some(buffer) = self.pool("allocate")?.take(class) {
            self.counters.buffer(true);
            return Ok((buffer, class));
        }
        let buffer = match self.driver.allocate(class) {
            Err(Error::OutOfMemory { .. }) => {
                self.empty_cache()?;
                match self.driver.allocate(class) {
                    Err(Error::OutOfMemory { .. }) => return Err(out_of_memory()),
                    other => other?,
                }
            }
            other => other?,
        };
        self.pool("allocate")?.created(class);
        self.counters.buffer(false);
        Ok((buffer, class))
    }

    /// Takes back the buffer of a dropped storage (`capacity` is its size class).
    pub(crate) fn release(&self, buffer: D::Buffer, capacity: usize) {
        // The pool's bookkeeping stays consistent even if a panic interrupted another thread.
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .give_back(buffer, capacity);
    }

    /// What the pool holds.
    pub fn memory_usage(&self) -> MemoryUsage {
        self.pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .usage()
    }

    /// Waits for the device, then gives every buffer the pool holds back to the driver.
    ///
    /// # Errors
    /// An error raised by queued work; the buffers then stay in the pool.
    pub fn empty_cache(&self) -> Result<()> {
        let buffers = {
            let mut pool = self.pool("empty cache")?;
            if pool.is_empty() {
                return Ok(());
            }
            pool.take_all()
        };
        // Queued work may still use the buffers.
        if let Err(e) = self.wait("empty cache") {
            let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
            for (buffer, class) in buffers {
                pool.created(class);
                pool.give_back(buffer, class);
            }
            return Err(e);
        }
        for (buffer, _) in buffers {
            self.driver.free(buffer);
        }
        Ok(())
    }

    /// Frees the buffers released beyond the cache limit (the device has just drained).
    fn free_retired(&self) {
        let retired = self
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take_retired();
        for buffer in retired {
            self.driver.free(buffer);
        }
    }

    /// Waits for queued work without reading the error flag (it stays for the next read-back or
    /// [`Runtime::finish`]); a driver error names the kernels queued since the last wait.
    fn wait(&self, op: &'static str) -> Result<()> {
        let mut flow = self.flow(op)?;
        self.counters.host_sync();
        if let Err(e) = self.driver.synchronize() {
            return Err(flow.log.attribute(e));
        }
        flow.log.clear();
        Ok(())
    }

    /// Copies `data` into a new storage without waiting for the device.
    pub(crate) fn upload(self: &Arc<Self>, data: &HostData) -> Result<GpuStorage<D>> {
        let storage = self.alloc(data.dtype(), data.len())?;
        if let Some(buffer) = storage.buffer() {
            let _flow = self.flow("upload")?;
            self.driver.write(buffer, host_bytes(data))?;
        }
        Ok(storage)
    }

    /// Fills `storage` with copies of `pattern` (its element's bytes), without waiting.
    pub(crate) fn fill(&self, storage: &GpuStorage<D>, pattern: &[u8]) -> Result<()> {
        if let Some(buffer) = storage.buffer() {
            let _flow = self.flow("fill")?;
            self.driver.fill(buffer, pattern, storage.bytes())?;
        }
        Ok(())
    }

    /// Reads `len` elements from element `offset` of `storage` back to the host: waits for the
    /// device, then reports an error raised by queued work or recorded in the error flag.
    pub(crate) fn read(
        &self,
        storage: &GpuStorage<D>,
        offset: usize,
        len: usize,
    ) -> Result<HostData> {
        let dtype = storage.dtype();
        let mut out = match dtype {
            DType::F32 => HostData::F32(vec![0.0; len]),
            DType::F64 => HostData::F64(vec![0.0; len]),
            DType::I64 => HostData::I64(vec![0; len]),
            DType::F16 => HostData::F16(vec![f16::ZERO; len]),
            DType::BF16 => HostData::BF16(vec![bf16::ZERO; len]),
            DType::Bool => HostData::Bool(vec![0; len]),
            other => {
                return Err(Error::UnsupportedDType {
                    op: "download",
                    dtype: other,
                })
            }
        };
        let Some(buffer) = storage.buffer().filter(|_| len > 0) else {
            self.finish()?;
            return Ok(out);
        };
        let mut flow = self.flow("download")?;
        self.counters.host_sync();
        let byte_offset = offset * dtype.size_in_bytes();
        if let Err(e) = self
            .driver
            .read(buffer, byte_offset, host_bytes_mut(&mut out))
        {
            return Err(flow.log.attribute(e));
        }
        flow.log.clear();
        self.free_retired();
        self.check_flag(&mut flow)?;
        Ok(out)
    }

    /// Waits for every queued command; reports an error raised by queued work or recorded in
    /// the error flag.
    pub fn finish(&self) -> Result<()> {
        let mut flow = self.flow("synchronize")?;
        self.counters.host_sync();
        if let Err(e) = self.driver.synchronize() {
            return Err(flow.log.attribute(e));
        }
        flow.log.clear();
        self.free_retired();
        self.check_flag(&mut flow)
    }

    /// After the device has drained: reads the error flag if a kernel may have written it,
    /// clears it and reports what it recorded.
    fn check_flag(&self, flow: &mut Flow) -> Result<()> {
        if !flow.flag_dirty {
            return Ok(());
        }
        let Some(error_flag) = &self.error_flag else {
            return Ok(());
        };
        let mut bytes = [0u8; FLAG_WORDS * 4];
        self.driver.read(error_flag, 0, &mut bytes)?;
        flow.flag_dirty = false;
        let words = error_flag::words_from_bytes(&bytes);
        match error_flag::decode(&words) {
            None => Ok(()),
            Some(error) => {
                self.driver.fill(error_flag, &[0; 4], FLAG_WORDS * 4)?;
                Err(error)
            }
        }
    }

    // ----- kernels -----

    /// Queues `kernel` of `module` over `grid` blocks of `block` work-items.
    pub(crate) fn launch(
        &self,
        module: &ModuleKey,
        kernel: &'static str,
        args: &[Arg<'_, D>],
        grid: [usize; 3],
        block: [usize; 3],
    ) -> Result<()> {
        let to_u32 = |v: usize| {
            u32::try_from(v).map_err(|_| Error::Backend {
                backend: self.backend(),
                op: kernel,
                msg: format!("launch of {grid:?} blocks of {block:?} is too large"),
            })
        };
        let launch = Launch {
            module,
            kernel,
            grid: [to_u32(grid[0])?, to_u32(grid[1])?, to_u32(grid[2])?],
            block: [to_u32(block[0])?, to_u32(block[1])?, to_u32(block[2])?],
        };
        let mut uses_flag = false;
        let driver_args: Vec<DriverArg<'_, D::Buffer>> = args
            .iter()
            .map(|arg| match *arg {
                Arg::Buffer(storage) => DriverArg::Buffer(storage.buffer()),
                Arg::ErrorFlag => {
                    uses_flag = true;
                    DriverArg::Buffer(self.error_flag.as_ref())
                }
                Arg::I64(v) => DriverArg::I64(v),
                Arg::U64(v) => DriverArg::U64(v),
                Arg::U32(v) => DriverArg::U32(v),
                Arg::I32(v) => DriverArg::I32(v),
                Arg::F32(v) => DriverArg::F32(v),
                Arg::F64(v) => DriverArg::F64(v),
                Arg::View(v) => DriverArg::View(v),
            })
            .collect();
        let mut flow = self.flow(kernel)?;
        if let Err(e) = self.driver.launch(&launch, &driver_args) {
            return Err(flow.log.attribute_launch(kernel, e));
        }
        self.counters.kernel_launched();
        flow.log.record(kernel, module.dtype);
        flow.flag_dirty |= uses_flag;
        if self.launch_blocking {
            self.counters.host_sync();
            if let Err(e) = self.driver.synchronize() {
                return Err(flow.log.attribute(e));
            }
            flow.log.clear();
        }
        Ok(())
    }

    /// Launches a one-dimensional `kernel` with at least `n` work-items in blocks of
    /// [`DriverInfo::launch_group`]; kernels ignore work-items past `n`.
    pub(crate) fn launch_1d(
        &self,
        module: &ModuleKey,
        kernel: &'static str,
        args: &[Arg<'_, D>],
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let group = self.info().launch_group as usize;
        self.launch(
            module,
            kernel,
            args,
            [n.div_ceil(group), 1, 1],
            [group, 1, 1],
        )
    }

    /// Queues a vendor BLAS GEMM; `None` when the driver has none.
    pub(crate) fn blas_gemm(&self, call: &BlasGemm<'_, D::Buffer>) -> Option<Result<()>> {
        let mut flow = match self.flow("matmul") {
            Ok(flow) => flow,
            Err(e) => return Some(Err(e)),
        };
        let outcome = self.driver.blas_gemm(call)?;
        if outcome.is_ok() {
            self.counters.blas_called();
            flow.log.record("blas_gemm", call.dtype);
        }
        Some(outcome)
    }
}

impl<D: Driver> Drop for Runtime<D> {
    /// Waits for queued work, then gives every buffer back to the driver (no storage is left:
    /// each holds the runtime alive).
    fn drop(&mut self) {
        let _ = self.driver.synchronize();
        let pool = self.pool.get_mut().unwrap_or_else(PoisonError::into_inner);
        for (buffer, _) in pool.take_all() {
            self.driver.free(buffer);
        }
        if let Some(flag) = self.error_flag.take() {
            self.driver.free(flag);
        }
    }
}

/// Whether the shared kernels are instantiated for `dtype`: every dtype Tessera has (the
/// 16-bit floats as u16 storage computed in f32, see `kernels/half.cl.c`).
pub fn has_kernels(dtype: DType) -> bool {
    matches!(
        dtype,
        DType::F32 | DType::F64 | DType::F16 | DType::BF16 | DType::I64 | DType::Bool
    )
}

/// The bytes of host data's elements (empty for a dtype without kernels, which
/// [`Runtime::alloc`] refuses before any transfer).
fn host_bytes(data: &HostData) -> &[u8] {
    match data {
        HostData::F32(v) => as_bytes(v),
        HostData::F64(v) => as_bytes(v),
        HostData::I64(v) => as_bytes(v),
        HostData::F16(v) => as_bytes(v),
        HostData::BF16(v) => as_bytes(v),
        HostData::Bool(v) => v,
        _ => &[],
    }
}

/// The bytes of host data's elements, writable (empty as in [`host_bytes`]).
fn host_bytes_mut(data: &mut HostData) -> &mut [u8] {
    match data {
        HostData::F32(v) => as_bytes_mut(v),
        HostData::F64(v) => as_bytes_mut(v),
        HostData::I64(v) => as_bytes_mut(v),
        HostData::F16(v) => as_bytes_mut(v),
        HostData::BF16(v) => as_bytes_mut(v),
        HostData::Bool(v) => v,
        _ => &mut [],
    }
}

/// Plain numbers whose every bit pattern is a valid value and which have no padding.
trait Plain: Copy {}
impl Plain for f32 {}
impl Plain for f64 {}
impl Plain for i64 {}
impl Plain for f16 {}
impl Plain for bf16 {}

fn as_bytes<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: `T` is f32, f64, i64, f16 or bf16 (the last two `repr(transparent)` over u16):
    // no padding, so every byte of the slice is initialised;
    // the byte slice covers exactly the same memory and borrows `values` for its lifetime.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

fn as_bytes_mut<T: Plain>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; in addition every bit pattern is a valid value of each, so any
    // bytes written through the returned slice leave valid values; it borrows `values` mutably.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_driver::FakeDriver;

    /// Bytes of the error flag, allocated by `Runtime::new` outside the pool.
    const FLAG: usize = FLAG_WORDS * 4;

    fn runtime(capacity: usize, max_buffer: u64, pool_limit: usize) -> Arc<Runtime<FakeDriver>> {
        Runtime::new(FakeDriver::new(FLAG + capacity, max_buffer, pool_limit)).unwrap()
    }

    #[test]
    fn every_dtype_has_kernels_and_16_bit_storages_take_two_bytes() {
        let rt = runtime(1 << 20, u64::MAX, usize::MAX);
        assert!(DType::ALL.iter().all(|&d| has_kernels(d)));
        for dtype in [DType::F16, DType::BF16] {
            let s = rt.alloc(dtype, 4).unwrap();
            assert_eq!((s.dtype(), s.bytes()), (dtype, 8));
        }
        let up = rt.upload(&HostData::F16(vec![f16::ONE; 3])).unwrap();
        assert_eq!(up.bytes(), 6);
    }

    #[test]
    fn released_buffers_are_reused_within_their_size_class() {
        let rt = runtime(1 << 20, u64::MAX, usize::MAX);
        let a = rt.alloc(DType::F32, 250).unwrap(); // 1000 bytes: class 1024
        let first = a.buffer().unwrap().id;
        drop(a);
        assert_eq!(
            rt.memory_usage(),
            MemoryUsage {
                cached_bytes: 1024,
                allocated_bytes: 1024
            }
        );
        let b = rt.alloc(DType::I64, 100).unwrap(); // 800 bytes: same class
        assert_eq!(b.buffer().unwrap().id, first);
        let c = rt.alloc(DType::F64, 400).unwrap(); // 3200 bytes: another class
        assert_ne!(c.buffer().unwrap().id, first);
        let stats = rt.stats();
        assert_eq!((stats.buffers_created, stats.buffers_reused), (2, 1));
        assert_eq!(rt.memory_usage().allocated_bytes, 1024 + 4096);
        assert_eq!(rt.driver().record().requests, [FLAG, 1024, 4096]);
    }

    #[test]
    fn out_of_memory_frees_the_cache_after_a_wait_and_retries_once() {
        let rt = runtime(8192, u64::MAX, usize::MAX);
        let a = rt.alloc(DType::F32, 1024).unwrap(); // 4 KiB
        let b = rt.alloc(DType::F32, 512).unwrap(); // 2 KiB
        rt.fill(&a, &[0; 4]).unwrap(); // queued work uses `a`
        drop((a, b));
        let syncs = rt.driver().record().syncs;
        // 8 KiB does not fit beside the cached 6 KiB: the cache is freed, after a wait.
        let c = rt.alloc(DType::F32, 2048).unwrap();
        {
            let record = rt.driver().record();
            assert_eq!(record.syncs, syncs + 1);
            assert_eq!(record.freed.len(), 2);
            assert_eq!(record.freed_while_busy, 0);
            assert_eq!(record.requests[3..], [8192, 8192], "one retry");
        }
        assert_eq!(
            rt.memory_usage(),
            MemoryUsage {
                cached_bytes: 0,
                allocated_bytes: 8192
            }
        );
        // Nothing is left to free: a typed error naming the device and the bytes requested.
        let err = rt.alloc(DType::Bool, 600).unwrap_err();
        assert_eq!(
            err,
            Error::OutOfMemory {
                device: "fake:0 (fake device)".into(),
                requested_bytes: 600
            }
        );
        assert_eq!(rt.driver().record().requests[5..], [1024, 1024]);
        // The device still works.
        drop(c);
        assert!(rt.alloc(DType::F32, 10).is_ok());
    }

    #[test]
    fn impossible_sizes_are_out_of_memory_without_asking_the_device() {
        let rt = runtime(1 << 20, 1 << 16, usize::MAX);
        let cached = rt.alloc(DType::F32, 16).unwrap();
        drop(cached);
        let requests = rt.driver().record().requests.len();
        for (dtype, len, bytes) in [
            (DType::F32, 1usize << 40, 1usize << 42), // larger than the largest buffer
            (DType::F64, usize::MAX / 4, usize::MAX), // len * 8 overflows
            (DType::Bool, usize::MAX - 100, usize::MAX - 100), // the size class overflows
        ] {
            let err = rt.alloc(dtype, len).unwrap_err();
            assert_eq!(
                err,
                Error::OutOfMemory {
                    device: "fake:0 (fake device)".into(),
                    requested_bytes: bytes
                }
            );
        }
        let record = rt.driver().record();
        assert_eq!(record.requests.len(), requests, "the device was not asked");
        assert!(record.freed.is_empty(), "the cache was kept");
    }

    #[test]
    fn buffers_beyond_the_pool_limit_are_freed_at_the_next_synchronisation() {
        let rt = runtime(1 << 20, u64::MAX, 1024);
        let a = rt.alloc(DType::F32, 256).unwrap();
        let b = rt.alloc(DType::F32, 256).unwrap();
        rt.fill(&b, &[0; 4]).unwrap();
        drop((a, b));
        assert_eq!(rt.memory_usage().cached_bytes, 2048);
        assert!(
            rt.driver().record().freed.is_empty(),
            "queued work may use b"
        );
        rt.finish().unwrap();
        let record = rt.driver().record();
        assert_eq!(record.freed.len(), 1);
        assert_eq!(record.freed_while_busy, 0);
        drop(record);
        assert_eq!(
            rt.memory_usage(),
            MemoryUsage {
                cached_bytes: 1024,
                allocated_bytes: 1024
            }
        );
    }

    #[test]
    fn empty_cache_and_drop_give_everything_back() {
        let rt = runtime(1 << 20, u64::MAX, usize::MAX);
        let a = rt.alloc(DType::F32, 1000).unwrap();
        let b = rt.alloc(DType::F32, 10).unwrap();
        rt.fill(&a, &[0; 4]).unwrap();
        drop(a);
        rt.empty_cache().unwrap();
        assert_eq!(rt.driver().record().freed.len(), 1);
        assert_eq!(rt.driver().record().freed_while_busy, 0);
        assert_eq!(rt.memory_usage().allocated_bytes, 512);
        drop(b);
        let record = rt.driver().shared_record();
        drop(rt);
        let record = record.lock().unwrap();
        assert_eq!(
            record.used, 0,
            "the cached buffer and the error flag were freed"
        );
        assert_eq!(record.freed_while_busy, 0);
    }
}
