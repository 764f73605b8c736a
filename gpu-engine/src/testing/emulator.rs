//! [`Emulator`]: the simplest correct OpenCL driver (one context and in-order queue on the first
//! OpenCL device, blocking transfers, programs built on first use), describing itself as the
//! test says. See the module documentation of [`crate::testing`].

use super::host_blas::host_gemm;
use crate::driver::{BlasGemm, Driver, DriverArg, DriverInfo, Launch, ModuleKey};
use crate::kernels::{program_source, Dialect};
use opencl3::command_queue::{
    enqueue_fill_buffer, enqueue_read_buffer, enqueue_write_buffer, CommandQueue,
};
use opencl3::context::Context;
use opencl3::device::{
    Device, CL_DEVICE_TYPE_ALL, CL_DEVICE_TYPE_GPU, CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT,
};
use opencl3::error_codes::{
    ClError, CL_INVALID_BUFFER_SIZE, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY,
    CL_OUT_OF_RESOURCES,
};
use opencl3::event::Event;
use opencl3::kernel::Kernel;
use opencl3::memory::{Buffer, ClMem, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program;
use opencl3::types::{cl_event, CL_BLOCKING};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use tessera_core::{DType, Error, Result};

/// A buffer of the [`Emulator`]: an OpenCL buffer, released when dropped.
#[derive(Debug)]
pub struct EmulatorBuffer(Buffer<u8>);

/// A built program and the kernels created from it so far.
struct Built {
    program: Program,
    kernels: HashMap<&'static str, Kernel>,
}

/// The engine's [`Driver`] on the first OpenCL device (the first GPU, else the first device),
/// under the description [`Emulator::open`] is given. No pool of its own (the engine's), no
/// autotuning (the requested GEMM tiles are used), no vendor BLAS unless
/// [`Emulator::with_host_blas`].
pub struct Emulator {
    info: DriverInfo,
    device_has_fp64: bool,
    correctly_rounded_div_sqrt: bool,
    host_blas: bool,
    programs: Mutex<HashMap<ModuleKey, Built>>,
    builds: AtomicU64,
    /// Passed for the buffer of an empty storage (kernels never read it).
    dummy: EmulatorBuffer,
    queue: CommandQueue,
    context: Context,
}

/// What [`Emulator::open`] reads from the device.
#[derive(Clone, Debug)]
struct Found {
    device: Device,
    name: String,
    is_gpu: bool,
    max_group: usize,
    compute_units: usize,
    memory_bytes: u64,
    max_alloc_bytes: u64,
    has_fp64: bool,
    correctly_rounded_div_sqrt: bool,
}

/// The first GPU of any platform, else the first device, found and described once per process:
/// PoCL crashes when one thread queries a device while another initialises the platform, so
/// discovery is serialised and never repeated. A context on it is kept for the life of the
/// process (PoCL may free its devices' state when the last context is released).
fn found() -> Result<Found> {
    static FOUND: OnceLock<Result<Found>> = OnceLock::new();
    static ANCHOR: OnceLock<Option<Context>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let found = discover()?;
            ANCHOR.get_or_init(|| Context::from_device(&found.device).ok());
            Ok(found)
        })
        .clone()
}

fn discover() -> Result<Found> {
    let no_device = |reason: String| Error::NoDevice {
        backend: "opencl",
        reason: format!("{reason}; install an OpenCL driver (e.g. pocl-opencl-icd)"),
    };
    let platforms = get_platforms().map_err(|e| no_device(format!("no OpenCL platform ({e})")))?;
    let devices: Vec<Device> = platforms
        .iter()
        // A platform without devices reports CL_DEVICE_NOT_FOUND: treat it as empty.
        .flat_map(|p| p.get_devices(CL_DEVICE_TYPE_ALL).unwrap_or_default())
        .map(Device::new)
        .collect();
    let is_gpu = |d: &Device| d.dev_type().is_ok_and(|t| t & CL_DEVICE_TYPE_GPU != 0);
    let device = devices
        .iter()
        .find(|d| is_gpu(d))
        .or(devices.first())
        .copied()
        .ok_or_else(|| no_device("the OpenCL platforms list no device".into()))?;
    let query = |e: ClError| Error::Backend {
        backend: "opencl",
        op: "query device",
        msg: e.to_string(),
    };
    let extensions = device.extensions().unwrap_or_default();
    Ok(Found {
        device,
        name: device.name().map_err(query)?.trim().to_string(),
        is_gpu: is_gpu(&device),
        max_group: device.max_work_group_size().map_err(query)?.max(1),
        compute_units: device.max_compute_units().map_err(query)?.max(1) as usize,
        memory_bytes: device.global_mem_size().map_err(query)?,
        max_alloc_bytes: device.max_mem_alloc_size().map_err(query)?,
        has_fp64: extensions.split_whitespace().any(|e| e == "cl_khr_fp64")
            && device.double_fp_config().unwrap_or(0) != 0,
        correctly_rounded_div_sqrt: device.single_fp_config().unwrap_or(0)
            & CL_FP_CORRECTLY_ROUNDED_DIVIDE_SQRT
            != 0,
    })
}

/// Largest power of two not above `n` (n >= 1).
fn floor_pow2(n: usize) -> u32 {
    1 << (usize::BITS - 1 - n.max(1).leading_zeros())
}

impl Emulator {
    /// The driver on the first OpenCL device, whose description (read from the device:
    /// backend `"opencl"`, blocks of 256 work-items on a GPU and 64 elsewhere, no grid limit, a
    /// pool limit of a quarter of the memory) `adjust` may change first: the backend name
    /// errors carry, the device name, the block sizes (programs are built with the adjusted
    /// `reduce_group`), the largest grid z, the pool limit, and f64 support (off only).
    ///
    /// # Errors
    /// [`Error::NoDevice`] without an OpenCL runtime or device; [`Error::InvalidArgument`] when
    /// the adjusted description asks for more than the device has (blocks larger than its
    /// work-groups, f64 on a device without it); a driver error otherwise.
    pub fn open(adjust: impl FnOnce(&mut DriverInfo)) -> Result<Emulator> {
        let found = found()?;
        let max_group = found.max_group;
        let group = floor_pow2(max_group.min(if found.is_gpu { 256 } else { 64 }));
        let mut info = DriverInfo {
            backend: "opencl",
            ordinal: 0,
            name: found.name.clone(),
            compute_units: found.compute_units,
            memory_bytes: found.memory_bytes,
            max_buffer_bytes: found.max_alloc_bytes,
            pool_limit_bytes: (found.memory_bytes / 4).min(usize::MAX as u64) as usize,
            supports_f64: found.has_fp64,
            launch_group: group,
            reduce_group: group,
            max_grid_z: usize::MAX,
        };
        adjust(&mut info);
        let too_much = |msg: String| Error::InvalidArgument {
            op: "emulator",
            msg: format!("{msg} on {}", info.name),
        };
        for block in [info.launch_group, info.reduce_group] {
            if block == 0 || block as usize > max_group || !block.is_power_of_two() {
                return Err(too_much(format!(
                    "blocks of {block} work-items (at most {max_group}, a power of two)"
                )));
            }
        }
        if info.supports_f64 && !found.has_fp64 {
            return Err(too_much("f64 without cl_khr_fp64".into()));
        }
        let context = Context::from_device(&found.device).map_err(|e| Error::Backend {
            backend: info.backend,
            op: "create context",
            msg: e.to_string(),
        })?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, 0).map_err(|e| Error::Backend {
            backend: info.backend,
            op: "create queue",
            msg: e.to_string(),
        })?;
        let dummy = create_buffer(&context, info.backend, 16)?;
        Ok(Emulator {
            info,
            device_has_fp64: found.has_fp64,
            correctly_rounded_div_sqrt: found.correctly_rounded_div_sqrt,
            host_blas: false,
            programs: Mutex::new(HashMap::new()),
            builds: AtomicU64::new(0),
            dummy,
            queue,
            context,
        })
    }

    /// The same driver with a vendor BLAS computed on the host ([`host_gemm`]).
    pub fn with_host_blas(mut self) -> Self {
        self.host_blas = true;
        self
    }

    fn error(&self, op: &'static str, e: impl std::fmt::Display) -> Error {
        Error::Backend {
            backend: self.info.backend,
            op,
            msg: format!("OpenCL call failed: {e}"),
        }
    }

    fn programs(&self, op: &'static str) -> Result<MutexGuard<'_, HashMap<ModuleKey, Built>>> {
        self.programs
            .lock()
            .map_err(|_| self.error(op, "the program cache was poisoned by a panic"))
    }

    /// Compiles the program of `key` for this device.
    fn build(&self, key: &ModuleKey) -> Result<Program> {
        if key.dtype == DType::F64 && !self.info.supports_f64 {
            return Err(Error::UnsupportedDType {
                op: key.program.name(),
                dtype: key.dtype,
            });
        }
        let mut options = String::from("-cl-std=CL1.2");
        let fp64 = self.device_has_fp64.then(|| "TS_HAS_FP64=1".to_string());
        for d in key.defines(self.info.reduce_group).iter().chain(&fp64) {
            options.push_str(" -D ");
            options.push_str(d);
        }
        if self.correctly_rounded_div_sqrt {
            options.push_str(" -cl-fp32-correctly-rounded-divide-sqrt");
        }
        let source = program_source(Dialect::OpenCl, key.program);
        self.builds.fetch_add(1, Ordering::Relaxed);
        Program::create_and_build_from_source(&self.context, &source, &options)
            .map_err(|log| self.error("build program", format!("{}: {log}", key.label())))
    }
}

/// A read-write buffer of `bytes` bytes in `context`.
fn create_buffer(context: &Context, backend: &'static str, bytes: usize) -> Result<EmulatorBuffer> {
    // SAFETY: no host pointer is passed, so OpenCL allocates and owns the memory; the context
    // is live (it outlives every buffer of the emulator: OpenCL reference-counts it).
    unsafe { Buffer::<u8>::create(context, CL_MEM_READ_WRITE, bytes, std::ptr::null_mut()) }
        .map(EmulatorBuffer)
        .map_err(|e| match e.0 {
            CL_MEM_OBJECT_ALLOCATION_FAILURE
            | CL_OUT_OF_RESOURCES
            | CL_OUT_OF_HOST_MEMORY
            | CL_INVALID_BUFFER_SIZE => Error::OutOfMemory {
                device: backend.into(),
                requested_bytes: bytes,
            },
            _ => Error::Backend {
                backend,
                op: "allocate",
                msg: e.to_string(),
            },
        })
}

impl Driver for Emulator {
    type Buffer = EmulatorBuffer;

    fn info(&self) -> &DriverInfo {
        &self.info
    }

    fn allocate(&self, bytes: usize) -> Result<EmulatorBuffer> {
        create_buffer(&self.context, self.info.backend, bytes)
    }

    fn free(&self, buffer: EmulatorBuffer) {
        drop(buffer);
    }

    fn write(&self, dst: &EmulatorBuffer, src: &[u8]) -> Result<()> {
        // SAFETY: `dst` holds at least `src.len()` bytes (the engine allocated it for this
        // data) and `src` is readable for its length; the write is blocking, so OpenCL is done
        // with `src` when it returns.
        let event = unsafe {
            enqueue_write_buffer(
                self.queue.get(),
                dst.0.get(),
                CL_BLOCKING,
                0,
                src.len(),
                src.as_ptr() as *mut c_void,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| self.error("upload", ClError(code)))?;
        drop(Event::new(event));
        Ok(())
    }

    fn read(&self, src: &EmulatorBuffer, byte_offset: usize, dst: &mut [u8]) -> Result<()> {
        // SAFETY: the engine reads inside `src` into writable memory of `dst.len()` bytes; the
        // read is blocking, so the device is done with `dst` when it returns.
        let event = unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                src.0.get(),
                CL_BLOCKING,
                byte_offset,
                dst.len(),
                dst.as_mut_ptr() as *mut c_void,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| self.error("download", ClError(code)))?;
        drop(Event::new(event));
        Ok(())
    }

    fn fill(&self, dst: &EmulatorBuffer, pattern: &[u8], bytes: usize) -> Result<()> {
        // SAFETY: `dst` holds at least `bytes` bytes, a multiple of the pattern's size; OpenCL
        // copies the pattern before returning.
        let event = unsafe {
            enqueue_fill_buffer(
                self.queue.get(),
                dst.0.get(),
                pattern.as_ptr() as *const c_void,
                pattern.len(),
                0,
                bytes,
                0,
                std::ptr::null(),
            )
        }
        .map_err(|code| self.error("fill", ClError(code)))?;
        drop(Event::new(event));
        Ok(())
    }

    fn launch(&self, launch: &Launch<'_>, args: &[DriverArg<'_, EmulatorBuffer>]) -> Result<()> {
        let name = launch.kernel;
        let mut programs = self.programs(name)?;
        if !programs.contains_key(launch.module) {
            let program = self.build(launch.module)?;
            let built = Built {
                program,
                kernels: HashMap::new(),
            };
            programs.insert(launch.module.clone(), built);
        }
        let built = programs
            .get_mut(launch.module)
            .ok_or_else(|| self.error(name, "the program cache lost an entry"))?;
        if !built.kernels.contains_key(name) {
            let kernel = Kernel::create(&built.program, name).map_err(|e| self.error(name, e))?;
            built.kernels.insert(name, kernel);
        }
        let kernel = built
            .kernels
            .get(name)
            .ok_or_else(|| self.error(name, "the kernel cache lost an entry"))?;
        for (index, arg) in args.iter().enumerate() {
            let index = index as u32;
            let set = match *arg {
                DriverArg::Buffer(buffer) => {
                    let mem = buffer.unwrap_or(&self.dummy).0.get();
                    // SAFETY: a cl_mem argument is passed as a pointer to the handle.
                    unsafe { kernel.set_arg(index, &mem) }
                }
                // SAFETY (all scalars): the kernel declares this argument with the same C type
                // and size (i64/u64/u32/i32/f32/f64, or the repr(C) View struct).
                DriverArg::I64(v) => unsafe { kernel.set_arg(index, &v) },
                DriverArg::U64(v) => unsafe { kernel.set_arg(index, &v) },
                DriverArg::U32(v) => unsafe { kernel.set_arg(index, &v) },
                DriverArg::I32(v) => unsafe { kernel.set_arg(index, &v) },
                DriverArg::F32(v) => unsafe { kernel.set_arg(index, &v) },
                DriverArg::F64(v) => unsafe { kernel.set_arg(index, &v) },
                DriverArg::View(v) => unsafe { kernel.set_arg(index, &v) },
            };
            set.map_err(|e| self.error(name, e))?;
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
        // and `local` have at least `dims` entries; the buffers are live (the engine keeps
        // them until the queue has run the kernel) and of the sizes its bounds checks assume.
        let event = unsafe {
            self.queue.enqueue_nd_range_kernel(
                kernel.get(),
                dims as u32,
                std::ptr::null(),
                global.as_ptr(),
                local.as_ptr(),
                no_events,
            )
        }
        .map_err(|e| self.error(name, e))?;
        drop(event);
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        self.queue
            .finish()
            .map_err(|e| self.error("synchronize", e))
    }

    fn blas_gemm(&self, call: &BlasGemm<'_, EmulatorBuffer>) -> Option<Result<()>> {
        // Like the CUDA driver's {S,D}gemmStridedBatched: f32 and f64 only.
        let blas_dtype = matches!(call.dtype, DType::F32 | DType::F64);
        (self.host_blas && blas_dtype).then(|| host_gemm(self, call))
    }

    fn blas_unavailable(&self) -> Option<String> {
        (!self.host_blas).then(|| "the emulator has no BLAS (see with_host_blas)".to_string())
    }

    fn modules_built(&self) -> u64 {
        self.builds.load(Ordering::Relaxed)
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.queue.finish();
    }
}
