//! [`OpenClDriver`]: the [`tessera_gpu::Driver`] of one OpenCL device. The engine writes every op
//! once; this file is what is OpenCL about them: the context, the single in-order queue
//! (flushed every few commands so the device starts while the host keeps enqueueing), the
//! program cache, non-blocking uploads, and launch geometry as OpenCL sizes. Buffers are pooled
//! by the engine.
//!
//! The same driver, under another driver's description and with a host-computed BLAS, is the
//! emulator of `crate::testing` (feature `testing`): the fields `emulated` and `host_blas` say
//! what differs.
//!
//! Locking: `state` guards the queue's users (kernel objects are not thread-safe while their
//! arguments are set), the program cache and pending uploads.

use crate::autotune::{self, GemmConfig};
use crate::buffer::DeviceBuffer;
use crate::clblast::{self, ClBlast};
use crate::device::{DeviceInfo, DeviceKind};
use crate::error::{backend_error, backend_error_as, cl_error_as, BACKEND};
use opencl3::command_queue::{
    enqueue_fill_buffer, enqueue_read_buffer, enqueue_write_buffer, CommandQueue,
};
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::error_codes::ClError;
use opencl3::event::{Event, CL_COMPLETE};
use opencl3::kernel::Kernel;
use opencl3::program::Program as ClProgram;
use opencl3::types::{cl_event, CL_BLOCKING, CL_NON_BLOCKING};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tessera_core::{DType, Error, Result};
use tessera_gpu::kernels::{program_source, Dialect};
use tessera_gpu::{
    BlasGemm, BlasOperand, Driver, DriverArg, DriverInfo, GemmEngine, Launch, ModuleKey, Runtime,
};

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

/// A vendor BLAS computed on the host (`tessera_gpu::testing::host_gemm`), for an emulated
/// device.
pub(crate) type HostBlas = fn(&OpenClDriver, &BlasGemm<'_, DeviceBuffer>) -> Result<()>;

/// One OpenCL device driven by the engine (see the module documentation): the driver of
/// [`crate::OpenCl`], reached from a handle with `dev.driver()` for what only OpenCL knows
/// ([`OpenClDriver::device_info`]).
pub struct OpenClDriver {
    /// What the engine plans with and errors name: the device's own description
    /// ([`OpenClDriver::default_info`]), or the one an emulated device was given.
    info: DriverInfo,
    device: DeviceInfo,
    context: Context,
    queue: CommandQueue,
    state: Mutex<QueueState>,
    /// Passed for the buffer of an empty storage (kernels never read it).
    dummy: DeviceBuffer,
    program_builds: AtomicU64,
    /// The GEMM configuration chosen per dtype (see `crate::autotune`).
    gemm_configs: Mutex<HashMap<DType, GemmConfig>>,
    /// An emulated device (`crate::testing`): the requested GEMM tiles are used as they are
    /// (no autotuning), as the driver it stands for would.
    pub(crate) emulated: bool,
    /// The vendor BLAS of an emulated device, if it has one.
    pub(crate) host_blas: Option<HostBlas>,
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
    /// A context and queue on `device`, described as itself.
    pub(crate) fn create(device_info: DeviceInfo, device: Device) -> Result<OpenClDriver> {
        let info = Self::default_info(&device_info);
        Self::create_as(device_info, device, info)
    }

    /// What the engine is told about `device`: backend `opencl`, blocks of 256 work-items on a
    /// GPU and 64 elsewhere (within the device's work-group limit), no grid limit, a pool
    /// keeping at most a quarter of the memory (host memory, on PoCL), f64 where it has it.
    pub(crate) fn default_info(device_info: &DeviceInfo) -> DriverInfo {
        let max_group = device_info.max_work_group_size.max(1);
        let group = match device_info.kind {
            DeviceKind::Gpu => 256,
            _ => 64,
        };
        DriverInfo {
            backend: BACKEND,
            ordinal: device_info.ordinal,
            name: device_info.name.clone(),
            compute_units: device_info.compute_units.max(1) as usize,
            memory_bytes: device_info.global_mem_bytes,
            max_buffer_bytes: device_info.max_alloc_bytes,
            pool_limit_bytes: (device_info.global_mem_bytes / 4).min(usize::MAX as u64) as usize,
            supports_f64: device_info.has_fp64,
            launch_group: floor_pow2(group.min(max_group)),
            reduce_group: floor_pow2(group.min(max_group)),
            max_grid_z: usize::MAX,
        }
    }

    /// A context and queue on `device`, described to the engine as `info` (which the caller
    /// has checked against the device: blocks within its work-group limit, f64 only where it
    /// has it).
    pub(crate) fn create_as(
        device_info: DeviceInfo,
        device: Device,
        info: DriverInfo,
    ) -> Result<OpenClDriver> {
        let backend = info.backend;
        let cl = move |op: &'static str| move |e: ClError| cl_error_as(backend, op, e.0, None);
        let context = Context::from_device(&device).map_err(cl("create context"))?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, 0).map_err(cl("create queue"))?;
        let dummy = DeviceBuffer::new(context.get(), 16, info.backend)?;
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
            dummy,
            program_builds: AtomicU64::new(0),
            gemm_configs: Mutex::new(HashMap::new()),
            emulated: false,
            host_blas: None,
        })
    }

    /// An error of OpenCL call `op` that failed with `code`, named as this driver describes
    /// itself.
    pub(crate) fn cl_error(&self, op: &'static str, code: i32) -> Error {
        cl_error_as(self.info.backend, op, code, None)
    }

    /// An error of `op` with a free-form message, named as this driver describes itself.
    fn error(&self, op: &'static str, msg: impl Into<String>) -> Error {
        backend_error_as(self.info.backend, op, msg)
    }

    /// Locks the queue state for `op`.
    fn state(&self, op: &'static str) -> Result<MutexGuard<'_, QueueState>> {
        self.state
            .lock()
            .map_err(|_| self.error(op, "the device state was poisoned by a panic"))
    }

    /// What the device is: platform, name, version, kind, f64 support, limits.
    pub fn device_info(&self) -> &DeviceInfo {
        &self.device
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
            .ok_or_else(|| self.error(name, "program cache lost an entry"))?;
        if !built.kernels.contains_key(name) {
            let kernel = Kernel::create(&built.program, name).map_err(|e| {
                self.error(name, format!("no kernel `{name}` in {}: {e}", key.label()))
            })?;
            built.kernels.insert(name, kernel);
        }
        built
            .kernels
            .get(name)
            .ok_or_else(|| self.error(name, "kernel cache lost an entry"))
    }

    /// Compiles the program of `key` for this device.
    fn build(&self, key: &ModuleKey) -> Result<ClProgram> {
        if key.dtype == DType::F64 && !self.info.supports_f64 {
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
            self.error(
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
            self.queue
                .flush()
                .map_err(|e| self.cl_error("flush", e.0))?;
        }
        Ok(())
    }

    /// Enqueues `call` through CLBlast's `routine` on the device's queue (no wait).
    fn clblast_gemm(
        &self,
        library: &ClBlast,
        routine: clblast::Routine,
        call: &BlasGemm<'_, DeviceBuffer>,
    ) -> Result<()> {
        let operand = |o: &BlasOperand<'_, DeviceBuffer>| clblast::Operand {
            buffer: o.buffer.mem(),
            offset: o.offset,
            transpose: o.transpose,
            ld: o.ld,
            batch_stride: o.batch_stride,
        };
        let raw = clblast::GemmCall {
            routine,
            m: call.m,
            n: call.n,
            k: call.k,
            a: operand(&call.a),
            b: operand(&call.b),
            c: call.c.mem(),
            c_offset: call.c_offset,
            ldc: call.ldc,
            c_batch_stride: call.c_batch_stride,
            batch: call.batch,
        };
        // CLBlast enqueues on our queue: it is one of the queue's users.
        let mut state = self.state("matmul")?;
        // SAFETY: the queue is live and its context holds the buffers (all allocated by this
        // driver); the matmul op derived offsets, leading dimensions and batch strides from
        // layouts checked to lie inside their storages, and C is a fresh storage of
        // batch * m * n elements; the engine keeps the buffers allocated until the queue has
        // executed the call (OpenCL's reference counting covers CLBlast's own temporaries);
        // `routine` is Dgemm only on a device with cl_khr_fp64; the state lock serialises the
        // queue's users.
        unsafe { library.gemm(&raw, self.queue.get()) }.map_err(|msg| self.error("matmul", msg))?;
        self.after_enqueue(&mut state)
    }

    /// The raw queue and context, for tests that hold the queue back.
    #[cfg(test)]
    pub(crate) fn raw_queue_and_context(
        &self,
    ) -> (opencl3::types::cl_command_queue, opencl3::types::cl_context) {
        (self.queue.get(), self.context.get())
    }

    /// The CLBlast library products of f32 and f64 use on this device (when a handle's engine
    /// allows it, see [`crate::clblast`]), or why there is none. Loaded on first call.
    pub fn clblast_library(&self) -> std::result::Result<std::path::PathBuf, String> {
        if self.emulated {
            return Err("an emulated device never uses CLBlast".into());
        }
        clblast::library().map(|l| l.path().to_path_buf())
    }

    /// One line saying how matrix products of a handle with `engine` run on this device: CLBlast
    /// (with its file) or the tiled kernel, and why.
    pub fn gemm_route(&self, engine: GemmEngine) -> String {
        match (engine, self.clblast_library()) {
            (GemmEngine::Tiled, _) => "tiled GEMM kernel (the handle's engine is Tiled)".into(),
            (GemmEngine::Auto, Ok(_)) if !self.blas_by_default() => {
                "tiled GEMM kernel (auto on a CPU device; TESSERA_OPENCL_GEMM=clblast for CLBlast)"
                    .into()
            }
            (_, Ok(path)) => format!(
                "CLBlast ({}) for f32{}, tiled GEMM kernel otherwise",
                path.display(),
                if self.device.has_fp64 { "/f64" } else { "" }
            ),
            (GemmEngine::Auto, Err(reason)) => format!("tiled GEMM kernel ({reason})"),
            (GemmEngine::Blas, Err(reason)) => {
                format!("CLBlast was requested but is unavailable: {reason}")
            }
        }
    }

    /// After the queue has drained: forgets the host copies of uploads.
    fn drained(state: &mut QueueState) {
        state.pending_uploads.clear();
        state.unflushed = 0;
    }
}

impl Driver for OpenClDriver {
    type Buffer = DeviceBuffer;

    fn info(&self) -> &DriverInfo {
        &self.info
    }

    fn allocate(&self, bytes: usize) -> Result<DeviceBuffer> {
        DeviceBuffer::new(self.context.get(), bytes, self.info.backend)
    }

    fn free(&self, buffer: DeviceBuffer) {
        drop(buffer);
    }

    fn write(&self, dst: &DeviceBuffer, src: &[u8]) -> Result<()> {
        // The transfer is not waited for: it reads a host copy kept until it has completed.
        let data = src.to_vec();
        let mut state = self.state("upload")?;
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
        .map_err(|code| self.cl_error("upload", code))?;
        state.pending_uploads.push((Event::new(event), data));
        self.after_enqueue(&mut state)
    }

    fn read(&self, src: &DeviceBuffer, byte_offset: usize, dst: &mut [u8]) -> Result<()> {
        let mut state = self.state("download")?;
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
                return Err(self.cl_error("download", code));
            }
        }
        // The in-order queue has now executed every earlier command.
        Self::drained(&mut state);
        Ok(())
    }

    fn fill(&self, dst: &DeviceBuffer, pattern: &[u8], bytes: usize) -> Result<()> {
        let mut state = self.state("fill")?;
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
        .map_err(|code| self.cl_error("fill", code))?;
        drop(Event::new(event));
        self.after_enqueue(&mut state)
    }

    fn launch(&self, launch: &Launch<'_>, args: &[DriverArg<'_, DeviceBuffer>]) -> Result<()> {
        let kernel = launch.kernel;
        let mut state = self.state(kernel)?;
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
            set.map_err(|e| self.cl_error(kernel, e.0))?;
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
        .map_err(|e| self.cl_error(kernel, e.0))?;
        drop(event);
        self.after_enqueue(&mut state)
    }

    fn synchronize(&self) -> Result<()> {
        let mut state = self.state("synchronize")?;
        let finished = self
            .queue
            .finish()
            .map_err(|e| self.cl_error("synchronize", e.0));
        Self::drained(&mut state);
        finished
    }

    /// CLBlast (`crate::clblast`) for f32 and f64 when it loads, enqueued on the device's
    /// queue without waiting; None otherwise (16-bit dtypes, no library), and the engine runs
    /// the tiled kernel. An emulated device never uses CLBlast: with a host BLAS it computes the
    /// float products there, like the CUDA driver's cuBLAS (`{S,D}gemmStridedBatched` for f32
    /// and f64, `GemmStridedBatchedEx` for f16 and bf16); without one it has no BLAS.
    fn blas_gemm(&self, call: &BlasGemm<'_, DeviceBuffer>) -> Option<Result<()>> {
        if let Some(host_blas) = self.host_blas {
            return call.dtype.is_float().then(|| host_blas(self, call));
        }
        if self.emulated {
            return None;
        }
        let library = clblast::library().ok()?;
        let routine = clblast::routine(call.dtype, self.device.has_fp64)?;
        Some(self.clblast_gemm(library, routine, call))
    }

    /// CLBlast first under `auto` on GPUs and accelerators only: on CPU devices (PoCL) the
    /// tiled kernel measured about twice as fast at n = 256 and 512 (docs/BENCHMARKS.md),
    /// CLBlast having no tuned parameters for them. An emulated device with a host BLAS
    /// stands for a GPU.
    fn blas_by_default(&self) -> bool {
        self.host_blas.is_some() || self.device.kind != DeviceKind::Cpu
    }

    fn blas_unavailable(&self) -> Option<String> {
        match (self.host_blas, self.emulated) {
            (Some(_), _) => None,
            (None, true) => Some("the emulated device has no BLAS (see with_host_blas)".into()),
            (None, false) => clblast::library().err(),
        }
    }

    /// Programs compiled (`clBuildProgram`).
    fn modules_built(&self) -> u64 {
        self.program_builds.load(Ordering::Relaxed)
    }

    /// The autotuned configuration (see `crate::autotune`); on an emulated device, the
    /// requested one.
    fn gemm_config(
        rt: &Arc<Runtime<Self>>,
        dtype: DType,
        requested: tessera_gpu::GemmConfig,
    ) -> Result<tessera_gpu::GemmConfig> {
        if rt.driver().emulated {
            return Ok(requested);
        }
        autotune::gemm_config(rt, dtype)
    }
}

impl Drop for OpenClDriver {
    fn drop(&mut self) {
        // Pending transfers read host memory owned by the state: let them finish first.
        let _ = self.queue.finish();
    }
}
