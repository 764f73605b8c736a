//! [`Runtime`]: what every handle and storage on one device shares, over a [`Driver`]: memory,
//! launches, the asynchronous error flag, the log of queued kernels and the counters.
//!
//! Nothing waits for the device except [`Runtime::read`] and [`Runtime::finish`], which count as
//! host synchronisations, report an index error recorded by a kernel and attribute a driver error
//! raised by queued work to the kernels queued since the last synchronisation.
//!
//! Locking: `flow` is held while a command is queued and while the host waits, so that the error
//! flag is read after every kernel that may have written it; storages are given back to the
//! driver without taking it.

use crate::counters::{Counters, RuntimeStats};
use crate::driver::{BlasGemm, Driver, DriverArg, DriverInfo, Launch, ModuleKey};
use crate::error_flag::{self, FLAG_WORDS};
use crate::launch_log::{LaunchLog, LAUNCH_BLOCKING_ENV_VAR};
use crate::storage::GpuStorage;
use crate::view::View;
use std::sync::{Arc, Mutex, MutexGuard};
use tessera_core::{BackendStorage, DType, Error, HostData, Result};

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

/// What every handle and storage on one device shares: the driver, the error flag, the log of
/// queued kernels and the counters. Nothing waits for the device except reading back and
/// [`Runtime::finish`].
pub struct Runtime<D: Driver> {
    driver: D,
    counters: Counters,
    flow: Mutex<Flow>,
    error_flag: D::Buffer,
    launch_blocking: bool,
}

impl<D: Driver> Runtime<D> {
    /// The runtime over `driver`, with a cleared error flag.
    pub fn new(driver: D) -> Result<Arc<Self>> {
        let (error_flag, _) = driver.alloc(FLAG_WORDS * 4)?;
        driver.fill(&error_flag, &[0; 4], FLAG_WORDS * 4)?;
        let launch_blocking = std::env::var(LAUNCH_BLOCKING_ENV_VAR).is_ok_and(|v| v == "1");
        Ok(Arc::new(Runtime {
            driver,
            counters: Counters::default(),
            flow: Mutex::new(Flow::default()),
            error_flag,
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
    pub fn stats(&self, modules_built: u64) -> RuntimeStats {
        self.counters.snapshot(modules_built)
    }

    fn flow(&self, op: &'static str) -> Result<MutexGuard<'_, Flow>> {
        self.flow.lock().map_err(|_| Error::Backend {
            backend: self.backend(),
            op,
            msg: "the device state was poisoned by a panic".into(),
        })
    }

    // ----- memory -----

    /// A storage of `len` elements of `dtype` with undefined contents.
    pub fn alloc(self: &Arc<Self>, dtype: DType, len: usize) -> Result<GpuStorage<D>> {
        if len == 0 {
            return Ok(GpuStorage::new(self.clone(), None, dtype, 0));
        }
        let bytes = len
            .checked_mul(dtype.size_in_bytes())
            .ok_or_else(|| Error::OutOfMemory {
                device: self.info().to_string(),
                requested_bytes: usize::MAX,
            })?;
        let (buffer, reused) = self.driver.alloc(bytes)?;
        self.counters.buffer(reused);
        Ok(GpuStorage::new(self.clone(), Some(buffer), dtype, len))
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
            DType::Bool => HostData::Bool(vec![0; len]),
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
        self.check_flag(&mut flow)
    }

    /// After the device has drained: reads the error flag if a kernel may have written it,
    /// clears it and reports what it recorded.
    fn check_flag(&self, flow: &mut Flow) -> Result<()> {
        if !flow.flag_dirty {
            return Ok(());
        }
        let mut bytes = [0u8; FLAG_WORDS * 4];
        self.driver.read(&self.error_flag, 0, &mut bytes)?;
        flow.flag_dirty = false;
        let words = error_flag::words_from_bytes(&bytes);
        match error_flag::decode(&words) {
            None => Ok(()),
            Some(error) => {
                self.driver
                    .fill(&self.error_flag, &[0; 4], FLAG_WORDS * 4)?;
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
                    DriverArg::Buffer(Some(&self.error_flag))
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

/// The bytes of host data's elements.
fn host_bytes(data: &HostData) -> &[u8] {
    match data {
        HostData::F32(v) => as_bytes(v),
        HostData::F64(v) => as_bytes(v),
        HostData::I64(v) => as_bytes(v),
        HostData::Bool(v) => v,
    }
}

/// The bytes of host data's elements, writable.
fn host_bytes_mut(data: &mut HostData) -> &mut [u8] {
    match data {
        HostData::F32(v) => as_bytes_mut(v),
        HostData::F64(v) => as_bytes_mut(v),
        HostData::I64(v) => as_bytes_mut(v),
        HostData::Bool(v) => v,
    }
}

/// Plain numbers whose every bit pattern is a valid value and which have no padding.
trait Plain: Copy {}
impl Plain for f32 {}
impl Plain for f64 {}
impl Plain for i64 {}

fn as_bytes<T: Plain>(values: &[T]) -> &[u8] {
    // SAFETY: `T` is f32, f64 or i64: no padding, so every byte of the slice is initialised;
    // the byte slice covers exactly the same memory and borrows `values` for its lifetime.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

fn as_bytes_mut<T: Plain>(values: &mut [T]) -> &mut [u8] {
    // SAFETY: as in `as_bytes`; in addition every bit pattern is a valid f32, f64 or i64, so any
    // bytes written through the returned slice leave valid values; it borrows `values` mutably.
    unsafe {
        std::slice::from_raw_parts_mut(
            values.as_mut_ptr().cast::<u8>(),
            std::mem::size_of_val(values),
        )
    }
}
