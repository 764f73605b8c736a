//! [`CudaDriver`]: the [`Driver`] of an NVIDIA GPU, through `cust` (initialisation, device,
//! primary context, stream, modules) and its raw bindings `cust::sys` (memory, copies, launches).
//!
//! Every call first makes the device's context current on the calling thread (tensors may be
//! used from any thread). Memory is `cuMemAlloc`ed for the engine's caching buffer pool; kernels
//! come from [`crate::kernels`] (a precompiled folder or NVRTC), loaded once per module and
//! context.

use crate::cuda::cublas::{gemm_route, Cublas, GemmCall, GemmOperand};
use crate::cuda::driver_error::{backend_error, check, BACKEND};
use crate::cuda::memset::{self, Memset};
use crate::kernels::{self, Arch, KernelModule, KERNELS_DIR_ENV_VAR};
use crate::options::check_tiles;
use cust::context::Context;
use cust::device::{Device as CuDevice, DeviceAttribute};
use cust::module::Module;
use cust::stream::{Stream, StreamFlags};
use cust::sys as cu;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, OnceLock};
use tessera_core::{Error, Result};
use tessera_gpu::View;
use tessera_gpu::{
    BlasGemm, BlasOperand, Driver, DriverArg, DriverInfo, GemmOptions, Launch, ModuleKey,
};

/// Threads per block of one-dimensional launches, tree reductions and fused softmax
/// (`TS_REDUCE_WG`): a power of two every CUDA GPU accepts.
pub(crate) const BLOCK: u32 = 256;

/// Largest grid z (batches per GEMM launch) every CUDA device accepts.
const MAX_GRID_Z: usize = 65_535;

/// One device allocation of `bytes` at `address`: the buffer type of [`CudaDriver`].
#[derive(Debug, PartialEq, Eq)]
pub struct Block {
    pub(crate) address: u64,
    bytes: usize,
}

/// What the engine plans with on every CUDA device beyond what the device reports: errors named
/// `cuda`, blocks of [`BLOCK`] threads for one-dimensional launches and reductions, at most
/// [`MAX_GRID_Z`] batches per launch, a pool that caches every freed block (like PyTorch's
/// caching allocator; it frees its cache when an allocation fails). The emulated tests apply it
/// to an OpenCL device.
pub(crate) fn apply_cuda_profile(info: &mut DriverInfo) {
    info.backend = BACKEND;
    info.launch_group = BLOCK;
    info.reduce_group = BLOCK;
    info.max_grid_z = MAX_GRID_Z;
    info.pool_limit_bytes = usize::MAX;
}

/// A raw kernel handle, valid while its module is loaded.
#[derive(Clone, Copy, Debug)]
struct FunctionHandle(cu::CUfunction);

// SAFETY: a CUfunction is an opaque driver handle that any thread may pass to cuLaunchKernel
// (with the owning context current); it is only used while its module is held in the cache.
unsafe impl Send for FunctionHandle {}
// SAFETY: as above; the handle is never dereferenced by Rust code.
unsafe impl Sync for FunctionHandle {}

/// A loaded module and the kernels looked up in it so far.
struct LoadedModule {
    module: Module,
    functions: HashMap<&'static str, FunctionHandle>,
}

/// One kernel argument's value, stored so that cuLaunchKernel can take its address.
enum ArgValue {
    U64(u64),
    I64(i64),
    U32(u32),
    I32(i32),
    F32(f32),
    F64(f64),
    View(View),
}

impl ArgValue {
    /// The address cuLaunchKernel reads the argument from.
    fn as_mut_ptr(&mut self) -> *mut c_void {
        match self {
            ArgValue::U64(v) => (v as *mut u64).cast(),
            ArgValue::I64(v) => (v as *mut i64).cast(),
            ArgValue::U32(v) => (v as *mut u32).cast(),
            ArgValue::I32(v) => (v as *mut i32).cast(),
            ArgValue::F32(v) => (v as *mut f32).cast(),
            ArgValue::F64(v) => (v as *mut f64).cast(),
            ArgValue::View(v) => (v as *mut View).cast(),
        }
    }
}

/// One NVIDIA GPU: its primary context, one stream, the module cache and (when present)
/// cuBLAS: the driver of [`crate::Cuda`], reached from a handle with `dev.driver()` for what
/// only CUDA knows ([`CudaDriver::compute_capability`], [`CudaDriver::cublas_library`]).
/// Fields are declared so that everything using the context drops before it.
pub struct CudaDriver {
    info: DriverInfo,
    /// Compute capability as `major * 10 + minor`.
    compute_capability: u32,
    modules: Mutex<HashMap<ModuleKey, LoadedModule>>,
    modules_built: AtomicU64,
    blas: OnceLock<std::result::Result<Cublas, String>>,
    stream: Stream,
    context: Context,
}

impl std::fmt::Debug for CudaDriver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CudaDriver")
            .field("info", &self.info)
            .field("compute_capability", &self.compute_capability)
            .finish()
    }
}

/// Locks `mutex`, turning poisoning (a panic in another thread) into an error.
fn lock<'a, T>(mutex: &'a Mutex<T>, op: &'static str) -> Result<MutexGuard<'a, T>> {
    mutex
        .lock()
        .map_err(|_| backend_error(op, "the device state was poisoned by a panic"))
}

/// Maps a `cust` error of `op`: a missing driver or device is [`Error::NoDevice`], anything
/// else [`Error::Backend`] with the driver's description.
fn cust_error(op: &'static str, e: cust::error::CudaError) -> Error {
    use cust::error::CudaError as E;
    let text = format!("{e:?}: {}", e.to_string().trim_matches('"'));
    match e {
        E::NoDevice | E::InvalidDevice | E::NotInitialized | E::Deinitialized => {
            crate::cuda::driver_error::no_device(text)
        }
        _ => backend_error(op, text),
    }
}

impl CudaDriver {
    /// Opens device `ordinal` (the driver must be initialised): retains its primary context,
    /// creates the stream and reads the device's properties.
    pub(crate) fn open(ordinal: usize) -> Result<CudaDriver> {
        let ordinal_u32 = u32::try_from(ordinal)
            .map_err(|_| backend_error("open device", format!("ordinal {ordinal} is too large")))?;
        let device = CuDevice::get_device(ordinal_u32).map_err(|e| cust_error("open device", e))?;
        let attribute = |a: DeviceAttribute| {
            device
                .get_attribute(a)
                .map_err(|e| cust_error("query device", e))
        };
        let major = attribute(DeviceAttribute::ComputeCapabilityMajor)?;
        let minor = attribute(DeviceAttribute::ComputeCapabilityMinor)?;
        let compute_units = attribute(DeviceAttribute::MultiprocessorCount)?;
        let name = device.name().map_err(|e| cust_error("query device", e))?;
        let memory_bytes = device
            .total_memory()
            .map_err(|e| cust_error("query device", e))? as u64;
        let context = Context::new(device).map_err(|e| cust_error("create context", e))?;
        let stream =
            Stream::new(StreamFlags::DEFAULT, None).map_err(|e| cust_error("create stream", e))?;
        let mut info = DriverInfo {
            backend: BACKEND,
            ordinal,
            name,
            compute_units: compute_units.max(1) as usize,
            memory_bytes,
            max_buffer_bytes: memory_bytes,
            supports_f64: true,
            // Set by the profile:
            pool_limit_bytes: 0,
            launch_group: 0,
            reduce_group: 0,
            max_grid_z: 0,
        };
        apply_cuda_profile(&mut info);
        Ok(CudaDriver {
            info,
            compute_capability: (major * 10 + minor) as u32,
            modules: Mutex::new(HashMap::new()),
            modules_built: AtomicU64::new(0),
            blas: OnceLock::new(),
            stream,
            context,
        })
    }

    /// The device's compute capability `(major, minor)`: `(9, 0)` for an H100/H200.
    pub fn compute_capability(&self) -> (u32, u32) {
        (self.compute_capability / 10, self.compute_capability % 10)
    }

    /// The cuBLAS library in use, or why there is none (loaded on first call).
    pub fn cublas_library(&self) -> std::result::Result<PathBuf, String> {
        match self.blas() {
            Ok(blas) => Ok(blas.path().to_path_buf()),
            Err(reason) => Err(reason.clone()),
        }
    }

    /// Makes the device's context current on this thread.
    pub(crate) fn activate(&self) -> Result<()> {
        // SAFETY: the context is a live primary context retained by `self.context`.
        check("set context", unsafe {
            cu::cuCtxSetCurrent(self.context.as_raw())
        })
    }

    fn blas(&self) -> &std::result::Result<Cublas, String> {
        self.blas.get_or_init(|| {
            self.activate().map_err(|e| e.to_string())?;
            // SAFETY: the context is current and the stream belongs to it; both live as long as
            // `self`, which owns the handle (declared before them, so dropped first).
            unsafe { Cublas::new(self.stream.as_inner().cast()) }
        })
    }

    /// The image of `key` for this device: precompiled when a folder names one, else compiled
    /// by NVRTC (a cubin for this architecture, or PTX when NVRTC does not know it).
    fn module_image(&self, key: &ModuleKey) -> Result<(Vec<u8>, bool)> {
        let module = KernelModule::new(key.clone());
        let folder = std::env::var_os(KERNELS_DIR_ENV_VAR).map(PathBuf::from);
        if let Some(dir) = &folder {
            if let Some(image) = kernels::find_precompiled(dir, &module, self.compute_capability) {
                return Ok(image);
            }
        }
        let cubin = kernels::compile(&module, Arch::Real(self.compute_capability));
        match cubin {
            Ok(bytes) => Ok((bytes, false)),
            Err(first) => match kernels::compile(&module, Arch::Virtual(80)) {
                Ok(ptx) if self.compute_capability >= 80 => Ok((ptx, true)),
                _ => Err(match folder {
                    Some(dir) => backend_error(
                        "load kernels",
                        format!(
                            "{first}; and {} holds no kernel {} for sm_{}",
                            dir.display(),
                            module.label(),
                            self.compute_capability
                        ),
                    ),
                    None => first,
                }),
            },
        }
    }

    /// The kernel `name` of `key`, loading the module on first use.
    fn function(&self, key: &ModuleKey, name: &'static str) -> Result<FunctionHandle> {
        let mut modules = lock(&self.modules, name)?;
        if !modules.contains_key(key) {
            let (image, is_ptx) = self.module_image(key)?;
            let module = if is_ptx {
                let text = CString::new(image)
                    .map_err(|e| backend_error("load kernels", format!("PTX: {e}")))?;
                Module::from_ptx_cstr(&text, &[])
            } else {
                Module::from_cubin(image, &[])
            }
            .map_err(|e| {
                backend_error(
                    "load kernels",
                    format!("{}: {}", key.label(), cust_error("load kernels", e)),
                )
            })?;
            self.modules_built.fetch_add(1, Ordering::Relaxed);
            modules.insert(
                key.clone(),
                LoadedModule {
                    module,
                    functions: HashMap::new(),
                },
            );
        }
        let loaded = modules
            .get_mut(key)
            .ok_or_else(|| backend_error(name, "module cache lost an entry"))?;
        if let Some(&f) = loaded.functions.get(name) {
            return Ok(f);
        }
        let function = loaded
            .module
            .get_function(name)
            .map_err(|e| {
                backend_error(
                    name,
                    format!("no kernel `{name}` in module {}: {e}", key.label()),
                )
            })?
            .to_raw();
        let handle = FunctionHandle(function);
        loaded.functions.insert(name, handle);
        Ok(handle)
    }

    pub(crate) fn stream(&self) -> cu::CUstream {
        self.stream.as_inner()
    }
}

impl Driver for CudaDriver {
    type Buffer = Block;

    fn info(&self) -> &DriverInfo {
        &self.info
    }

    fn allocate(&self, bytes: usize) -> Result<Block> {
        self.activate()?;
        let mut address: cu::CUdeviceptr = 0;
        // SAFETY: `address` is a valid out-pointer; the context is current.
        let code = unsafe { cu::cuMemAlloc_v2(&mut address, bytes) };
        if code == cu::cudaError_enum::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(Error::OutOfMemory {
                device: self.info.to_string(),
                requested_bytes: bytes,
            });
        }
        check("allocate", code)?;
        Ok(Block { address, bytes })
    }

    fn free(&self, buffer: Block) {
        // A context that cannot be made current is gone, and its memory with it.
        if self.activate().is_ok() {
            // SAFETY: `address` came from cuMemAlloc_v2 and is freed once; the engine waited
            // for the stream, so no queued work still uses it. A failure leaks the block.
            let _ = unsafe { cu::cuMemFree_v2(buffer.address) };
        }
    }

    fn write(&self, dst: &Block, src: &[u8]) -> Result<()> {
        if src.len() > dst.bytes {
            return Err(backend_error("upload", "more bytes than the buffer holds"));
        }
        self.activate()?;
        // SAFETY: `dst` holds at least `src.len()` bytes (checked); `src` is readable for its
        // length. From pageable memory the driver stages the bytes before returning, so the
        // host slice may be freed as soon as the call returns.
        check("upload", unsafe {
            cu::cuMemcpyHtoDAsync_v2(dst.address, src.as_ptr().cast(), src.len(), self.stream())
        })
    }

    fn read(&self, src: &Block, byte_offset: usize, dst: &mut [u8]) -> Result<()> {
        if byte_offset + dst.len() > src.bytes {
            return Err(backend_error("download", "read past the end of the buffer"));
        }
        self.activate()?;
        // SAFETY: the range is inside `src` (checked); `dst` is writable for its length and the
        // stream is synchronised below before `dst` is used or freed.
        let copy = unsafe {
            cu::cuMemcpyDtoHAsync_v2(
                dst.as_mut_ptr().cast(),
                src.address + byte_offset as u64,
                dst.len(),
                self.stream(),
            )
        };
        // SAFETY: the stream is live.
        let wait = unsafe { cu::cuStreamSynchronize(self.stream()) };
        check("download", copy)?;
        check("download", wait)
    }

    fn fill(&self, dst: &Block, pattern: &[u8], bytes: usize) -> Result<()> {
        if bytes > dst.bytes {
            return Err(backend_error("fill", "fill outside the buffer"));
        }
        let memsets = memset::plan(pattern, bytes).map_err(|e| backend_error("fill", e))?;
        self.activate()?;
        let stream = self.stream();
        for step in memsets {
            // SAFETY (every arm): the plan writes only inside the first `bytes` bytes, which lie
            // inside `dst` (checked above); the memsets are queued on the device's stream and
            // read no host memory after returning.
            let code = match step {
                Memset::D8 {
                    offset,
                    value,
                    count,
                } => unsafe {
                    cu::cuMemsetD8Async(dst.address + offset as u64, value, count, stream)
                },
                Memset::D16 {
                    offset,
                    value,
                    count,
                } => unsafe {
                    cu::cuMemsetD16Async(dst.address + offset as u64, value, count, stream)
                },
                Memset::D32 {
                    offset,
                    value,
                    count,
                } => unsafe {
                    cu::cuMemsetD32Async(dst.address + offset as u64, value, count, stream)
                },
                Memset::Strided32 {
                    offset,
                    pitch,
                    value,
                    rows,
                } => unsafe {
                    cu::cuMemsetD2D32Async(
                        dst.address + offset as u64,
                        pitch,
                        value,
                        1,
                        rows,
                        stream,
                    )
                },
            };
            check("fill", code)?;
        }
        Ok(())
    }

    fn launch(&self, launch: &Launch<'_>, args: &[DriverArg<'_, Block>]) -> Result<()> {
        self.activate()?;
        let function = self.function(launch.module, launch.kernel)?;
        let mut values: Vec<ArgValue> = args
            .iter()
            .map(|arg| match *arg {
                DriverArg::Buffer(buffer) => ArgValue::U64(buffer.map_or(0, |b| b.address)),
                DriverArg::I64(v) => ArgValue::I64(v),
                DriverArg::U64(v) => ArgValue::U64(v),
                DriverArg::U32(v) => ArgValue::U32(v),
                DriverArg::I32(v) => ArgValue::I32(v),
                DriverArg::F32(v) => ArgValue::F32(v),
                DriverArg::F64(v) => ArgValue::F64(v),
                DriverArg::View(v) => ArgValue::View(v),
            })
            .collect();
        let mut pointers: Vec<*mut c_void> = values.iter_mut().map(ArgValue::as_mut_ptr).collect();
        let [gx, gy, gz] = launch.grid;
        let [bx, by, bz] = launch.block;
        // SAFETY: `function` belongs to a module held by the cache; `pointers` has one entry
        // per kernel parameter, each pointing to a value of the parameter's C type (device
        // pointers as u64, i64/u64/u32/i32/f32/f64 scalars, the repr(C) View struct), alive
        // until the call returns (the driver copies them). The buffers are live allocations of
        // the sizes the kernel's bounds assume, kept until the stream has executed the kernel
        // (the allocator only reuses them for later work on this stream).
        let code = unsafe {
            cu::cuLaunchKernel(
                function.0,
                gx,
                gy,
                gz,
                bx,
                by,
                bz,
                0,
                self.stream(),
                pointers.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        };
        check(launch.kernel, code)
    }

    fn synchronize(&self) -> Result<()> {
        self.activate()?;
        // SAFETY: the stream is live.
        check("synchronize", unsafe {
            cu::cuStreamSynchronize(self.stream())
        })
    }

    /// cuBLAS when it loaded and has an entry point for the dtype (`gemm_route`); None
    /// otherwise, and the engine runs the kernel.
    fn blas_gemm(&self, call: &BlasGemm<'_, Block>) -> Option<Result<()>> {
        // f32/f64 through {S,D}gemmStridedBatched, f16/bf16 (and TF32) through GemmEx.
        let cublas = self.blas().as_ref().ok()?;
        let route = gemm_route(call.dtype, call.allow_tf32, cublas.has_gemm_ex())?;
        if let Err(e) = self.activate() {
            return Some(Err(e));
        }
        let size = call.dtype.size_in_bytes() as u64;
        let operand = |o: &BlasOperand<'_, Block>| GemmOperand {
            address: o.buffer.address + o.offset as u64 * size,
            transpose: o.transpose,
            ld: o.ld,
            batch_stride: o.batch_stride,
        };
        let raw = GemmCall {
            route,
            m: call.m,
            n: call.n,
            k: call.k,
            a: operand(&call.a),
            b: operand(&call.b),
            c_address: call.c.address + call.c_offset as u64 * size,
            ldc: call.ldc,
            c_batch_stride: call.c_batch_stride,
            batch: call.batch,
        };
        // SAFETY: the context is current; the operands come from the matmul op, which derived
        // the offsets, leading dimensions and batch strides from layouts checked to lie inside
        // their storages, and C is a fresh storage of batch * m * n elements; all stay allocated
        // until the stream has executed the call (see `launch`).
        Some(unsafe { cublas.gemm(&raw) }.map_err(|msg| backend_error("matmul", msg)))
    }

    fn blas_unavailable(&self) -> Option<String> {
        self.blas().as_ref().err().cloned()
    }

    /// Modules compiled by NVRTC or loaded from a precompiled folder.
    fn modules_built(&self) -> u64 {
        self.modules_built.load(Ordering::Relaxed)
    }

    /// Valid tiles using at most 1024 threads and 48 KiB of shared memory per block (in f64).
    fn check_gemm_options(&self, options: &GemmOptions) -> Result<()> {
        check_tiles(&options.config.tiles)
    }
}

impl Drop for CudaDriver {
    fn drop(&mut self) {
        // Unload modules while the context is alive and current (the engine's runtime has
        // already given every buffer back).
        if self.activate().is_ok() {
            if let Ok(mut modules) = self.modules.lock() {
                modules.clear();
            }
        }
    }
}
