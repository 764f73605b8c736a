//! [`OpenClDriver`]: the [`tessera_gpu::Driver`] of one OpenCL device. The engine writes every op
//! once; this file is what is OpenCL about them: the context, the single in-order queue
//! (flushed every few commands so the device starts while the host keeps enqueueing), the
//! program cache, the buffer pool, non-blocking uploads, and launch geometry as OpenCL sizes.
//!
//! Locking: `state` guards the queue's users (kernel objects are not thread-safe while their
//! arguments are set), the program cache and pending uploads; `pool` guards the free buffers
//! and is never held while `state` is taken, so dropping a storage anywhere is safe.

use crate::autotune::{self, GemmConfig};
use crate::buffer::DeviceBuffer;
use crate::device::{DeviceInfo, DeviceKind};
use crate::error::{backend_error, cl, cl_error, BACKEND};
use crate::pool::{size_class, BufferPool};
use opencl3::command_queue::{
    enqueue_fill_buffer, enqueue_read_buffer, enqueue_write_buffer, CommandQueue,
};
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::event::{Event, CL_COMPLETE};
use opencl3::kernel::Kernel;
use opencl3::program::Program as ClProgram;
use opencl3::types::{cl_event, CL_BLOCKING, CL_NON_BLOCKING};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tessera_core::kernels::{program_source, Dialect};
use tessera_core::{DType, Error, Result};
use tessera_gpu::{BlasGemm, Driver, DriverArg, DriverInfo, Launch, ModuleKey, Runtime};

/// Commands enqueued between two `clFlush` calls.
const FLUSH_EVERY: usize = 16;

/// A built program and the kernels created from it so far.
struct BuiltProgram {
    program: ClProgram,
    kernels: HashMap<&'static str, Kernel>,
}

/// Everything that is used while commands are enqueued.
struct QueueState {
    programs: HashMap<ModuleKey, BuiltProgram>,
    /// Host copies of non-blocking uploads, kept alive until their transfer has completed.
    pending_uploads: Vec<(Event, Vec<u8>)>,
    /// Commands enqueued since the last flush or wait.
    unflushed: usize,
}

/// One OpenCL device driven by the engine. See the module documentation.
pub struct OpenClDriver {
    info: DriverInfo,
    device: DeviceInfo,
    context: Context,
    queue: CommandQueue,
    state: Mutex<QueueState>,
    pool: Mutex<BufferPool>,
    /// Passed for the buffer of an empty storage (kernels never read it).
    dummy: DeviceBuffer,
    program_builds: AtomicU64,
    /// The GEMM configuration chosen per dtype (see `crate::autotune`).
    gemm_configs: Mutex<HashMap<DType, GemmConfig>>,
}

/// Locks `mutex`, turning poisoning (a panic in another thread) into an error.
pub(crate) fn lock<'a, T>(mutex: &'a Mutex<T>, op: &'static str) -> Result<MutexGuard<'a, T>> {
    mutex
        .lock()
        .map_err(|_| backend_error(op, "the device state was poisoned by a panic"))
}

/// Largest power of two not above `n` (n >= 1).
fn floor_pow2(n: usize) -> u32 {
    1 << (usize::BITS - 1 - n.max(1).leading_zeros())
}

impl OpenClDriver {
    /// A context and queue on `device`; errors name `backend` (`"opencl"`, or another backend
    /// whose engine path runs on this device in tests).
    pub(crate) fn create(
        device_info: DeviceInfo,
        device: Device,
        backend: &'static str,
    ) -> Result<OpenClDriver> {
        let context = Context::from_device(&device).map_err(cl("create context"))?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, 0).map_err(cl("create queue"))?;
        let dummy = DeviceBuffer::new(context.get(), 16)?;
        let max_group = device_info.max_work_group_size.max(1);
        let group = match device_info.kind {
            DeviceKind::Gpu => 256,
            _ => 64,
        };
        let pool_limit = (device_info.global_mem_bytes / 4).min(usize::MAX as u64) as usize;
        let info = DriverInfo {
            backend,
            ordinal: device_info.ordinal,
            name: device_info.name.clone(),
            compute_units: device_info.compute_units.max(1) as usize,
            memory_bytes: device_info.global_mem_bytes,
            supports_f64: device_info.has_fp64,
            launch_group: floor_pow2(group.min(max_group)),
            reduce_group: floor_pow2(group.min(max_group)),
            max_grid_z: usize::MAX,
        };
        Ok(OpenClDriver {
            info,
            device: device_info,
            context,
            queue,
            state: Mutex::new(QueueState {
                programs: HashMap::new(),
                pending_uploads: Vec::new(),
                unflushed: 0,
            }),
            pool: Mutex::new(BufferPool::new(pool_limit)),
            dummy,
            program_builds: AtomicU64::new(0),
            gemm_configs: Mutex::new(HashMap::new()),
        })
    }

    /// What the device is.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.device
    }

    /// The description the engine sees, to adjust before the driver is used.
    #[cfg(feature = "testing")]
    pub(crate) fn info_mut(&mut self) -> &mut DriverInfo {
        &mut self.info
    }

    /// Programs compiled so far.
    pub(crate) fn program_builds(&self) -> u64 {
        self.program_builds.load(Ordering::Relaxed)
    }

    /// Bytes of free buffers held by the pool.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.pool.lock().map_or(0, |p| p.cached_bytes())
    }

    /// The GEMM configurations chosen so far, by dtype.
    pub(crate) fn gemm_configs(&self) -> &Mutex<HashMap<DType, GemmConfig>> {
        &self.gemm_configs
    }

    /// The kernel `name` of `key`, building the program on first use.
    fn kernel<'s>(
        &self,
        state: &'s mut QueueState,
        key: &ModuleKey,
        name: &'static str,
    ) -> Result<&'s Kernel> {
        if !state.programs.contains_key(key) {
            let program = self.build(key)?;
            state.programs.insert(
                key.clone(),
                BuiltProgram {
                    program,
                    kernels: HashMap::new(),
                },
            );
        }
        let built = state
            .programs
            .get_mut(key)
            .ok_or_else(|| backend_error(name, "program cache lost an entry"))?;
        if !built.kernels.contains_key(name) {
            let kernel = Kernel::create(&built.program, name).map_err(|e| {
                backend_error(name, format!("no kernel `{name}` in {}: {e}", key.label()))
            })?;
            built.kernels.insert(name, kernel);
        }
        built
            .kernels
            .get(name)
            .ok_or_else(|| backend_error(name, "kernel cache lost an entry"))
    }

    /// Compiles the program of `key` for this device.
    fn build(&self, key: &ModuleKey) -> Result<ClProgram> {
        if key.dtype == DType::F64 && !self.device.has_fp64 {
            return Err(Error::UnsupportedDType {
                op: key.program.name(),
                dtype: key.dtype,
            });
        }
        let mut options = String::from("-cl-std=CL1.2");
        let fp64 = self.device.has_fp64.then(|| "TS_HAS_FP64=1".to_string());
        for d in key.defines(self.info.reduce_group).iter().chain(&fp64) {
            options.push_str(" -D ");
            options.push_str(d);
        }
        if self.device.correctly_rounded_div_sqrt {
            options.push_str(" -cl-fp32-correctly-rounded-divide-sqrt");
        }
        let source = program_source(Dialect::OpenCl, key.program);
        self.program_builds.fetch_add(1, Ordering::Relaxed);
        ClProgram::create_and_build_from_source(&self.context, &source, &options).map_err(|log| {
            backend_error(
                "build program",
                format!("{} on {} failed: {log}", key.label(), self.device.name),
            )
        })
    }

    /// Counts an enqueued command and flushes the queue every [`FLUSH_EVERY`] commands, so
    /// that the device starts working while the host keeps enqueueing.
    fn after_enqueue(&self, state: &mut QueueState) -> Result<()> {
        state.unflushed += 1;
        if state.unflushed >= FLUSH_EVERY {
            state.unflushed = 0;
            self.queue.flush().map_err(cl("flush"))?;
        }
        Ok(())
    }

    /// After the queue has drained: forgets the host copies of uploads.
    fn drained(state: &mut QueueState) {
        state.pending_uploads.clear();
        state.unflushed = 0;
    }

    /// A buffer error names this driver's backend.
    fn rename(&self, error: Error) -> Error {
        match error {
            Error::Backend { op, msg, .. } => Error::Backend {
                backend: self.info.backend,
                op,
                msg,
            },
            Error::NoDevice { reason, .. } => Error::NoDevice {
                backend: self.info.backend,
                reason,
            },
            other => other,
        }
    }
}

impl Driver for OpenClDriver {
    type Buffer = DeviceBuffer;

    fn info(&self) -> &DriverInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<(DeviceBuffer, bool)> {
        let class = size_class(bytes);
        if let Some(buffer) = lock(&self.pool, "allocate")?.take(class) {
            return Ok((buffer, true));
        }
        let out_of_memory = || Error::OutOfMemory {
            device: self.info.to_string(),
            requested_bytes: bytes,
        };
        if class as u64 > self.device.max_alloc_bytes {
            return Err(out_of_memory());
        }
        match DeviceBuffer::new(self.context.get(), class) {
            Ok(buffer) => Ok((buffer, false)),
            Err(_) => {
                // Free the cached buffers and try once more.
                lock(&self.pool, "allocate")?.clear();
                let buffer =
                    DeviceBuffer::new(self.context.get(), class).map_err(|_| out_of_memory())?;
                Ok((buffer, false))
            }
        }
    }

    fn release(&self, buffer: DeviceBuffer) {
        if let Ok(mut pool) = self.pool.lock() {
            pool.give_back(buffer);
        }
    }

    fn write(&self, dst: &DeviceBuffer, src: &[u8]) -> Result<()> {
        // The transfer is not waited for: it reads a host copy kept until it has completed.
        let data = src.to_vec();
        let mut state = lock(&self.state, "upload")?;
        // Drop the host copies of transfers that have completed (a status query, not a wait).
        // An event whose status cannot be read is kept (its memory is freed at the next wait).
        state.pending_uploads.retain(|(event, _)| {
            !event
                .command_execution_status()
                .is_ok_and(|s| s.0 <= CL_COMPLETE)
        });
        // SAFETY: `dst` is a live buffer of at least `data.len()` bytes (the engine allocated it
        // for this data); `data` is moved into `pending_uploads` below and kept there until the
        // event reports completion or the queue has drained (its heap block does not move).
        let event = unsafe {
            enqueue_write_buffer(
                self.queue.get(),
                dst.mem(),
                CL_NON_BLOCKING,
                0,
                data.len(),
                data.as_ptr() as *mut c_void,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| self.rename(cl_error("upload", code, None)))?;
        state.pending_uploads.push((Event::new(event), data));
        self.after_enqueue(&mut state)
    }

    fn read(&self, src: &DeviceBuffer, byte_offset: usize, dst: &mut [u8]) -> Result<()> {
        let mut state = lock(&self.state, "download")?;
        // SAFETY: the read covers `dst.len()` bytes inside `src` (checked by the engine) into
        // writable memory; it is blocking, so the device is done with `dst` when it returns.
        let result = unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                src.mem(),
                CL_BLOCKING,
                byte_offset,
                dst.len(),
                dst.as_mut_ptr() as *mut c_void,
                0,
                std::ptr::null(),
            )
        };
        match result {
            Ok(event) => drop(Event::new(event)),
            Err(code) => {
                let _ = self.queue.finish();
                Self::drained(&mut state);
                return Err(self.rename(cl_error("download", code, None)));
            }
        }
        // The in-order queue has now executed every earlier command.
        Self::drained(&mut state);
        Ok(())
    }

    fn fill(&self, dst: &DeviceBuffer, pattern: &[u8], bytes: usize) -> Result<()> {
        let mut state = lock(&self.state, "fill")?;
        // SAFETY: `dst` holds at least `bytes` bytes, a multiple of the pattern's size; OpenCL
        // copies the pattern before returning.
        let event = unsafe {
            enqueue_fill_buffer(
                self.queue.get(),
                dst.mem(),
                pattern.as_ptr() as *const c_void,
                pattern.len(),
                0,
                bytes,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| self.rename(cl_error("fill", code, None)))?;
        drop(Event::new(event));
        self.after_enqueue(&mut state)
    }

    fn launch(&self, launch: &Launch<'_>, args: &[DriverArg<'_, DeviceBuffer>]) -> Result<()> {
        let kernel = launch.kernel;
        let mut state = lock(&self.state, kernel)?;
        let k = self.kernel(&mut state, launch.module, kernel)?;
        for (index, arg) in args.iter().enumerate() {
            let index = index as u32;
            let set = match *arg {
                DriverArg::Buffer(buffer) => {
                    let mem = buffer.unwrap_or(&self.dummy).mem();
                    // SAFETY: a cl_mem argument is passed as a pointer to the handle.
                    unsafe { k.set_arg(index, &mem) }
                }
                // SAFETY (all scalars): the kernel declares this argument with the same C type
                // and size (i64/u64/u32/i32/f32/f64, or the repr(C) View struct).
                DriverArg::I64(v) => unsafe { k.set_arg(index, &v) },
                DriverArg::U64(v) => unsafe { k.set_arg(index, &v) },
                DriverArg::U32(v) => unsafe { k.set_arg(index, &v) },
                DriverArg::I32(v) => unsafe { k.set_arg(index, &v) },
                DriverArg::F32(v) => unsafe { k.set_arg(index, &v) },
                DriverArg::F64(v) => unsafe { k.set_arg(index, &v) },
                DriverArg::View(v) => unsafe { k.set_arg(index, &v) },
            };
            set.map_err(|e| self.rename(cl_error(kernel, e.0, None)))?;
        }
        // CUDA's grid of blocks as OpenCL sizes, with as many dimensions as are used.
        let global: [usize; 3] =
            std::array::from_fn(|d| launch.grid[d] as usize * launch.block[d] as usize);
        let local: [usize; 3] = std::array::from_fn(|d| launch.block[d] as usize);
        let dims = (1..=3)
            .rev()
            .find(|&d| global[d - 1] * local[d - 1] != 1)
            .unwrap_or(1);
        let no_events: &[cl_event] = &[];
        // SAFETY: every argument of the kernel was set above with its declared type; `global`
        // and `local` have at least `dims` entries; the buffers are live (kept alive by the
        // engine until the call returns, and by OpenCL's reference counting until the kernel
        // has run) and of the sizes the kernel's bounds checks assume.
        let event = unsafe {
            self.queue.enqueue_nd_range_kernel(
                k.get(),
                dims as u32,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                no_events,
            )
        }
        .map_err(|e| self.rename(cl_error(kernel, e.0, None)))?;
        drop(event);
        self.after_enqueue(&mut state)
    }

    fn synchronize(&self) -> Result<()> {
        let mut state = lock(&self.state, "synchronize")?;
        let finished = self.queue.finish().map_err(cl("synchronize"));
        Self::drained(&mut state);
        finished.map_err(|e| self.rename(e))
    }

    fn blas_gemm(&self, _call: &BlasGemm<'_, DeviceBuffer>) -> Option<Result<()>> {
        None
    }

    fn blas_unavailable(&self) -> Option<String> {
        Some(format!("the {BACKEND} backend has no BLAS library"))
    }

    fn gemm_config(
        rt: &Arc<Runtime<Self>>,
        dtype: DType,
        _requested: tessera_gpu::GemmConfig,
    ) -> Result<tessera_gpu::GemmConfig> {
        autotune::gemm_config(rt, dtype)
    }
}

impl Drop for OpenClDriver {
    fn drop(&mut self) {
        // Pending transfers read host memory owned by the state: let them finish first.
        let _ = self.queue.finish();
    }
}
