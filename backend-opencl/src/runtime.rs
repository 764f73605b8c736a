//! The per-device runtime: context, the one in-order queue, the program cache, the buffer pool,
//! the asynchronous error flag and the counters.
//!
//! One runtime exists per device and process ([`Runtime::open`]); every [`crate::OpenCl`] handle
//! and every storage on that device shares it, so tensors made through different handles can
//! meet in one op. All commands go through the single in-order queue and nothing waits for the
//! device except [`Runtime::read`] and [`Runtime::finish`], which count as host synchronisations.
//!
//! Locking: `state` guards the queue's users (kernel objects are not thread-safe while their
//! arguments are set), the program cache, pending uploads and the error flag; `pool` guards the
//! free buffers and is never held while `state` is taken, so dropping a storage anywhere is safe.

use crate::autotune::GemmConfig;
use crate::buffer::DeviceBuffer;
use crate::counters::{Counters, RuntimeStats};
use crate::device::{find_devices, DeviceInfo, DeviceKind, DeviceSelector};
use crate::error::{backend_error, cl, cl_error};
use crate::pool::{size_class, BufferPool};
use crate::storage::OpenClStorage;
use crate::view::View;
use opencl3::command_queue::{
    enqueue_fill_buffer, enqueue_read_buffer, enqueue_write_buffer, CommandQueue,
};
use opencl3::context::Context;
use opencl3::device::Device;
use opencl3::event::Event;
use opencl3::event::CL_COMPLETE;
use opencl3::kernel::Kernel;
use opencl3::program::Program as ClProgram;
use opencl3::types::{cl_event, cl_mem, CL_BLOCKING, CL_NON_BLOCKING};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use tensor_core::kernels::{program_source, Dialect, Program};
use tensor_core::{BackendStorage, DType, Error, HostData, Result};

/// Commands enqueued between two `clFlush` calls.
const FLUSH_EVERY: usize = 16;
/// Number of i32 words of the error flag (see `report_index_error` in `common.cl.c`).
const FLAG_WORDS: usize = 8;

/// A program built for one dtype and set of extra defines.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ProgramKey {
    pub(crate) program: Program,
    pub(crate) dtype: DType,
    pub(crate) extra_defines: Vec<String>,
}

impl ProgramKey {
    /// [`Program::Tensor`] for `dtype`.
    pub(crate) fn tensor(dtype: DType) -> Self {
        ProgramKey {
            program: Program::Tensor,
            dtype,
            extra_defines: Vec::new(),
        }
    }
}

/// A kernel argument.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Arg<'a> {
    /// A storage's buffer (an empty storage passes a dummy buffer that is never read).
    Buffer(&'a OpenClStorage),
    /// The device's error-flag buffer.
    ErrorFlag,
    I64(i64),
    U64(u64),
    U32(u32),
    I32(i32),
    F32(f32),
    F64(f64),
    View(View),
}

/// A built program and the kernels created from it so far.
struct BuiltProgram {
    program: ClProgram,
    kernels: HashMap<&'static str, Kernel>,
}

/// Everything that is used while commands are enqueued.
struct QueueState {
    programs: HashMap<ProgramKey, BuiltProgram>,
    /// Host data of non-blocking uploads, kept alive until their transfer has completed.
    pending_uploads: Vec<(Event, HostData)>,
    /// Whether an indexing kernel ran since the error flag was last read.
    flag_dirty: bool,
    /// Host copy of the error flag (heap-allocated: the device writes it asynchronously).
    flag_host: Box<[i32; FLAG_WORDS]>,
    unflushed: usize,
}

/// The device runtime. See the module documentation.
pub(crate) struct Runtime {
    pub(crate) info: DeviceInfo,
    context: Context,
    queue: CommandQueue,
    state: Mutex<QueueState>,
    pool: Mutex<BufferPool>,
    counters: Counters,
    error_flag: DeviceBuffer,
    /// The GEMM configuration chosen per dtype (see `crate::autotune`).
    pub(crate) gemm_configs: Mutex<HashMap<DType, GemmConfig>>,
    /// Work-group size of one-dimensional launches.
    pub(crate) launch_group: usize,
    /// Work-group size of tree reductions (a power of two, `TS_REDUCE_WG`).
    pub(crate) reduce_group: usize,
}

/// The process-wide runtimes, by device ordinal.
fn registry() -> &'static Mutex<HashMap<usize, Arc<Runtime>>> {
    static RUNTIMES: OnceLock<Mutex<HashMap<usize, Arc<Runtime>>>> = OnceLock::new();
    RUNTIMES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Locks `mutex`, turning poisoning (a panic in another thread) into an error.
fn lock<'a, T>(mutex: &'a Mutex<T>, op: &'static str) -> Result<MutexGuard<'a, T>> {
    mutex
        .lock()
        .map_err(|_| backend_error(op, "the device state was poisoned by a panic"))
}

/// Largest power of two not above `n` (n >= 1).
fn floor_pow2(n: usize) -> usize {
    1 << (usize::BITS - 1 - n.max(1).leading_zeros())
}

impl Runtime {
    /// The runtime of the device `selector` designates, created on first use.
    pub(crate) fn open(selector: DeviceSelector) -> Result<Arc<Runtime>> {
        let found = selector.choose(&find_devices()?)?;
        let mut runtimes = lock(registry(), "open device")?;
        if let Some(rt) = runtimes.get(&found.info.ordinal) {
            return Ok(rt.clone());
        }
        let rt = Arc::new(Runtime::create(found.info, found.device)?);
        runtimes.insert(rt.info.ordinal, rt.clone());
        Ok(rt)
    }

    fn create(info: DeviceInfo, device: Device) -> Result<Runtime> {
        let context = Context::from_device(&device).map_err(cl("create context"))?;
        let queue = CommandQueue::create_default(&context, 0).map_err(cl("create queue"))?;
        let error_flag = DeviceBuffer::new(context.get(), FLAG_WORDS * 4)?;
        let max_group = info.max_work_group_size.max(1);
        let (launch_group, reduce_group) = match info.kind {
            DeviceKind::Gpu => (256, 256),
            _ => (64, 64),
        };
        let pool_limit = (info.global_mem_bytes / 4).min(usize::MAX as u64) as usize;
        let rt = Runtime {
            context,
            queue,
            state: Mutex::new(QueueState {
                programs: HashMap::new(),
                pending_uploads: Vec::new(),
                flag_dirty: false,
                flag_host: Box::new([0; FLAG_WORDS]),
                unflushed: 0,
            }),
            pool: Mutex::new(BufferPool::new(pool_limit)),
            counters: Counters::default(),
            error_flag,
            gemm_configs: Mutex::new(HashMap::new()),
            launch_group: floor_pow2(launch_group.min(max_group)),
            reduce_group: floor_pow2(reduce_group.min(max_group)),
            info,
        };
        let mut state = lock(&rt.state, "create device")?;
        rt.enqueue_fill(&mut state, rt.error_flag.mem(), &[0u8; 4], FLAG_WORDS * 4)?;
        drop(state);
        Ok(rt)
    }

    /// A snapshot of the counters.
    pub(crate) fn stats(&self) -> RuntimeStats {
        self.counters.snapshot()
    }

    // ----- memory -----

    /// A storage of `len` elements of `dtype` with undefined contents.
    pub(crate) fn alloc(self: &Arc<Self>, dtype: DType, len: usize) -> Result<OpenClStorage> {
        if len == 0 {
            return Ok(OpenClStorage::new(self.clone(), None, dtype, 0));
        }
        let requested = len
            .checked_mul(dtype.size_in_bytes())
            .ok_or(Error::OutOfMemory {
                device: self.info.to_string(),
                requested_bytes: usize::MAX,
            })?;
        let class = size_class(requested);
        if let Some(buffer) = lock(&self.pool, "allocate")?.take(class) {
            self.counters.buffer_reused();
            return Ok(OpenClStorage::new(self.clone(), Some(buffer), dtype, len));
        }
        if class as u64 > self.info.max_alloc_bytes {
            return Err(Error::OutOfMemory {
                device: self.info.to_string(),
                requested_bytes: requested,
            });
        }
        let buffer = match DeviceBuffer::new(self.context.get(), class) {
            Ok(buffer) => buffer,
            Err(_) => {
                // Free the cached buffers and try once more.
                lock(&self.pool, "allocate")?.clear();
                DeviceBuffer::new(self.context.get(), class).map_err(|_| Error::OutOfMemory {
                    device: self.info.to_string(),
                    requested_bytes: requested,
                })?
            }
        };
        self.counters.buffer_created();
        Ok(OpenClStorage::new(self.clone(), Some(buffer), dtype, len))
    }

    /// Returns a dropped storage's buffer to the pool.
    pub(crate) fn recycle(&self, buffer: DeviceBuffer) {
        if let Ok(mut pool) = self.pool.lock() {
            pool.give_back(buffer);
        }
    }

    /// Bytes of free buffers held by the pool.
    pub(crate) fn cached_bytes(&self) -> usize {
        self.pool.lock().map_or(0, |p| p.cached_bytes())
    }

    /// Copies `data` into a new storage without waiting: the host data is kept until the
    /// transfer has completed.
    pub(crate) fn upload(self: &Arc<Self>, data: HostData) -> Result<OpenClStorage> {
        let storage = self.alloc(data.dtype(), data.len())?;
        let Some(mem) = storage.mem() else {
            return Ok(storage);
        };
        let (ptr, bytes) = host_bytes(&data);
        let mut state = lock(&self.state, "upload")?;
        // Drop the host copies of transfers that have completed (a status query, not a wait).
        // An event whose status cannot be read is kept (its memory is freed at the next wait).
        state.pending_uploads.retain(|(event, _)| {
            !event
                .command_execution_status()
                .is_ok_and(|s| s.0 <= CL_COMPLETE)
        });
        // SAFETY: `mem` is a live buffer of at least `bytes` bytes (its storage was allocated
        // for `data.len()` elements of this dtype); `ptr` points to `bytes` readable bytes owned
        // by `data`, which is moved into `pending_uploads` below and kept there until the event
        // reports completion or the queue has been drained (a heap buffer does not move when
        // its Vec is moved).
        let event = unsafe {
            enqueue_write_buffer(
                self.queue.get(),
                mem,
                CL_NON_BLOCKING,
                0,
                bytes,
                ptr as *mut c_void,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| cl_error("upload", code, None))?;
        state.pending_uploads.push((Event::new(event), data));
        self.after_enqueue(&mut state)?;
        Ok(storage)
    }

    /// Fills `storage` with copies of `pattern` (1, 4 or 8 bytes), without waiting.
    pub(crate) fn fill(&self, storage: &OpenClStorage, pattern: &[u8]) -> Result<()> {
        let Some(mem) = storage.mem() else {
            return Ok(());
        };
        let bytes = storage_bytes(storage);
        let mut state = lock(&self.state, "fill")?;
        self.enqueue_fill(&mut state, mem, pattern, bytes)
    }

    fn enqueue_fill(
        &self,
        state: &mut QueueState,
        mem: cl_mem,
        pattern: &[u8],
        bytes: usize,
    ) -> Result<()> {
        // SAFETY: `mem` is a live buffer of at least `bytes` bytes and `bytes` is a multiple of
        // the pattern size (the element size); OpenCL copies the pattern before returning.
        let event = unsafe {
            enqueue_fill_buffer(
                self.queue.get(),
                mem,
                pattern.as_ptr() as *const c_void,
                pattern.len(),
                0,
                bytes,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| cl_error("fill", code, None))?;
        drop(Event::new(event));
        self.after_enqueue(state)
    }

    /// Reads `len` elements starting at element `offset` of `storage` back to the host: the one
    /// place (with [`Runtime::finish`]) where the host waits for the device. Reports an index
    /// error recorded by an earlier kernel.
    pub(crate) fn read(
        &self,
        storage: &OpenClStorage,
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
        let Some(mem) = storage.mem().filter(|_| len > 0) else {
            return Ok(out);
        };
        let size = dtype.size_in_bytes();
        let mut state = lock(&self.state, "download")?;
        let check_flag = state.flag_dirty;
        if check_flag {
            self.enqueue_flag_read(&mut state)?;
        }
        let (ptr, bytes) = host_bytes_mut(&mut out);
        self.counters.host_sync();
        // SAFETY: the read covers elements offset..offset + len of `mem`, inside the storage
        // (checked by the caller); `ptr` points to `bytes` writable bytes of `out`, and the read
        // is blocking, so the device is done with them when the call returns.
        let result = unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                mem,
                CL_BLOCKING,
                offset * size,
                bytes,
                ptr,
                0,
                std::ptr::null(),
            )
        };
        match result {
            Ok(event) => drop(Event::new(event)),
            Err(code) => {
                // Make sure the flag read has landed before reporting.
                let _ = self.queue.finish();
                return Err(cl_error("download", code, None));
            }
        }
        // The in-order queue has now executed every earlier command.
        state.pending_uploads.clear();
        state.unflushed = 0;
        if check_flag {
            self.take_flag_error(&mut state)?;
        }
        Ok(out)
    }

    /// Waits for every queued command, then reports an index error recorded by a kernel.
    pub(crate) fn finish(&self) -> Result<()> {
        let mut state = lock(&self.state, "synchronize")?;
        let check_flag = state.flag_dirty;
        if check_flag {
            self.enqueue_flag_read(&mut state)?;
        }
        self.counters.host_sync();
        self.queue.finish().map_err(cl("synchronize"))?;
        state.pending_uploads.clear();
        state.unflushed = 0;
        if check_flag {
            self.take_flag_error(&mut state)?;
        }
        Ok(())
    }

    /// Enqueues a non-blocking read of the error flag into `state.flag_host`.
    fn enqueue_flag_read(&self, state: &mut QueueState) -> Result<()> {
        let ptr = state.flag_host.as_mut_ptr() as *mut c_void;
        // SAFETY: `flag_host` is a heap array of FLAG_WORDS i32 owned by the runtime and only
        // touched under the state lock; the caller waits for the queue (blocking read or
        // finish) before reading it, and the runtime finishes the queue before it is freed.
        let event = unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                self.error_flag.mem(),
                CL_NON_BLOCKING,
                0,
                FLAG_WORDS * 4,
                ptr,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| cl_error("read error flag", code, None))?;
        drop(Event::new(event));
        Ok(())
    }

    /// After the flag read completed: turns a recorded error into `Err` and clears the flag.
    fn take_flag_error(&self, state: &mut QueueState) -> Result<()> {
        let flag = *state.flag_host;
        state.flag_dirty = false;
        if flag[0] == 0 {
            return Ok(());
        }
        let join = |lo: i32, hi: i32| ((hi as u32 as u64) << 32 | lo as u32 as u64) as i64;
        let op = match flag[0] {
            1 => "index_select",
            2 => "gather",
            _ => "scatter_add",
        };
        self.enqueue_fill(state, self.error_flag.mem(), &[0u8; 4], FLAG_WORDS * 4)?;
        Err(Error::IndexOutOfRange {
            op,
            index: join(flag[2], flag[3]),
            size: join(flag[4], flag[5]).max(0) as usize,
        })
    }

    // ----- kernels -----

    /// Enqueues `kernel` of `key` over `global` work-items in groups of `local`.
    pub(crate) fn launch(
        &self,
        key: &ProgramKey,
        kernel: &'static str,
        args: &[Arg<'_>],
        global: &[usize],
        local: &[usize],
    ) -> Result<()> {
        let mut state = lock(&self.state, kernel)?;
        let k = self.kernel(&mut state, key, kernel)?;
        let mut flags_used = false;
        for (index, arg) in args.iter().enumerate() {
            let index = index as u32;
            let set = match *arg {
                Arg::Buffer(storage) => {
                    let mem = storage.mem().unwrap_or(self.error_flag.mem());
                    // SAFETY: a cl_mem argument is passed as a pointer to the handle.
                    unsafe { k.set_arg(index, &mem) }
                }
                Arg::ErrorFlag => {
                    flags_used = true;
                    let mem = self.error_flag.mem();
                    // SAFETY: as above.
                    unsafe { k.set_arg(index, &mem) }
                }
                // SAFETY (all scalars): the kernel declares this argument with the same C type
                // and size (i64/u64/u32/i32/f32/f64, or the repr(C) View struct).
                Arg::I64(v) => unsafe { k.set_arg(index, &v) },
                Arg::U64(v) => unsafe { k.set_arg(index, &v) },
                Arg::U32(v) => unsafe { k.set_arg(index, &v) },
                Arg::I32(v) => unsafe { k.set_arg(index, &v) },
                Arg::F32(v) => unsafe { k.set_arg(index, &v) },
                Arg::F64(v) => unsafe { k.set_arg(index, &v) },
                Arg::View(v) => unsafe { k.set_arg(index, &v) },
            };
            set.map_err(|e| cl_error(kernel, e.0, None))?;
        }
        let no_events: &[cl_event] = &[];
        // SAFETY: every argument of the kernel was set above with its declared type; `global`
        // and `local` have `global.len()` (1..=3) entries each; the buffers are live storages
        // (kept alive by the caller until the call returns, and by OpenCL's reference counting
        // until the kernel has run) of the sizes the kernel's bounds checks assume.
        let event = unsafe {
            self.queue.enqueue_nd_range_kernel(
                k.get(),
                global.len() as u32,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                no_events,
            )
        }
        .map_err(|e| cl_error(kernel, e.0, None))?;
        drop(event);
        self.counters.kernel_launched();
        if flags_used {
            state.flag_dirty = true;
        }
        self.after_enqueue(&mut state)
    }

    /// Launches a one-dimensional `kernel` with at least `n` work-items (a multiple of the
    /// launch group); kernels ignore work-items past `n`.
    pub(crate) fn launch_1d(
        &self,
        key: &ProgramKey,
        kernel: &'static str,
        args: &[Arg<'_>],
        n: usize,
    ) -> Result<()> {
        if n == 0 {
            return Ok(());
        }
        let group = self.launch_group;
        self.launch(key, kernel, args, &[n.div_ceil(group) * group], &[group])
    }

    /// The kernel `name` of `key`, building the program on first use.
    fn kernel<'s>(
        &self,
        state: &'s mut QueueState,
        key: &ProgramKey,
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
                backend_error(
                    name,
                    format!(
                        "no kernel `{name}` in program {} for {}: {}",
                        key.program.name(),
                        key.dtype,
                        e
                    ),
                )
            })?;
            built.kernels.insert(name, kernel);
        }
        built
            .kernels
            .get(name)
            .ok_or_else(|| backend_error(name, "kernel cache lost an entry"))
    }

    /// Compiles the program of `key` for this device.
    fn build(&self, key: &ProgramKey) -> Result<ClProgram> {
        if key.dtype == DType::F64 && !self.info.has_fp64 {
            return Err(Error::UnsupportedDType {
                op: key.program.name(),
                dtype: key.dtype,
            });
        }
        let mut defines = key.program.defines(key.dtype);
        defines.push(format!("TS_REDUCE_WG={}", self.reduce_group));
        if self.info.has_fp64 {
            defines.push("TS_HAS_FP64=1".into());
        }
        defines.extend(key.extra_defines.iter().cloned());
        let mut options = String::from("-cl-std=CL1.2");
        for d in &defines {
            options.push_str(" -D ");
            options.push_str(d);
        }
        if self.info.correctly_rounded_div_sqrt {
            options.push_str(" -cl-fp32-correctly-rounded-divide-sqrt");
        }
        let source = program_source(Dialect::OpenCl, key.program);
        self.counters.program_built();
        ClProgram::create_and_build_from_source(&self.context, &source, &options).map_err(|log| {
            backend_error(
                "build program",
                format!(
                    "{} for {} on {} failed: {log}",
                    key.program.name(),
                    key.dtype,
                    self.info.name
                ),
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
}

impl Drop for Runtime {
    fn drop(&mut self) {
        // Pending transfers read host memory owned by the state: let them finish first.
        let _ = self.queue.finish();
    }
}

/// Bytes of a storage's elements.
fn storage_bytes(storage: &OpenClStorage) -> usize {
    use tensor_core::BackendStorage;
    storage.len() * storage.dtype().size_in_bytes()
}

/// Pointer to and size of the elements of host data.
fn host_bytes(data: &HostData) -> (*const c_void, usize) {
    match data {
        HostData::F32(v) => (v.as_ptr() as *const c_void, std::mem::size_of_val(&v[..])),
        HostData::F64(v) => (v.as_ptr() as *const c_void, std::mem::size_of_val(&v[..])),
        HostData::I64(v) => (v.as_ptr() as *const c_void, std::mem::size_of_val(&v[..])),
        HostData::Bool(v) => (v.as_ptr() as *const c_void, v.len()),
    }
}

/// Mutable pointer to and size of the elements of host data.
fn host_bytes_mut(data: &mut HostData) -> (*mut c_void, usize) {
    match data {
        HostData::F32(v) => (v.as_mut_ptr() as *mut c_void, std::mem::size_of_val(&v[..])),
        HostData::F64(v) => (v.as_mut_ptr() as *mut c_void, std::mem::size_of_val(&v[..])),
        HostData::I64(v) => (v.as_mut_ptr() as *mut c_void, std::mem::size_of_val(&v[..])),
        HostData::Bool(v) => (v.as_mut_ptr() as *mut c_void, v.len()),
    }
}
