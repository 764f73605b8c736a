//! [`OpenClDriver`]: a [`Driver`] over an OpenCL device, for tests only. It runs the same
//! kernel sources (in their OpenCL dialect) with the launch geometry the engine computes for
//! CUDA (global size = grid x block), so the CUDA backend's host-side logic is exercised on PoCL.
//!
//! Its "BLAS" computes the column-major strided-batched GEMM on the host from the operands the
//! engine describes, which checks the row-major to column-major mapping of the cuBLAS path.

use crate::engine::driver::{
    BlasGemm, BlasOperand, BlasTranspose, Driver, DriverArg, DriverInfo, Launch, ModuleKey,
};
use opencl3::command_queue::{
    enqueue_fill_buffer, enqueue_read_buffer, enqueue_write_buffer, CommandQueue,
};
use opencl3::context::Context;
use opencl3::device::{Device, CL_DEVICE_TYPE_ALL};
use opencl3::kernel::Kernel;
use opencl3::memory::{create_buffer, release_mem_object, CL_MEM_READ_WRITE};
use opencl3::platform::get_platforms;
use opencl3::program::Program as ClProgram;
use opencl3::types::{cl_mem, CL_BLOCKING};
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::Mutex;
use tensor_core::kernels::{program_source, Dialect};
use tensor_core::{DType, Error, Result};

/// An OpenCL buffer released on drop.
#[derive(Debug)]
pub(crate) struct ClBuffer {
    mem: cl_mem,
    bytes: usize,
}

// SAFETY: a cl_mem is a reference-counted handle usable from any thread; it is released once.
unsafe impl Send for ClBuffer {}
// SAFETY: as above; `&ClBuffer` only exposes the handle value.
unsafe impl Sync for ClBuffer {}

impl Drop for ClBuffer {
    fn drop(&mut self) {
        // SAFETY: `mem` was created by `alloc` and is released exactly once; OpenCL defers the
        // free until queued commands using it have completed.
        let _ = unsafe { release_mem_object(self.mem) };
    }
}

/// A built program and its kernels.
struct Built {
    program: ClProgram,
    kernels: HashMap<&'static str, Kernel>,
}

/// The first OpenCL device, driven like a CUDA device.
pub(crate) struct OpenClDriver {
    info: DriverInfo,
    context: Context,
    queue: CommandQueue,
    programs: Mutex<HashMap<ModuleKey, Built>>,
    dummy: ClBuffer,
    with_blas: bool,
}

fn cl_err(op: &'static str) -> impl Fn(i32) -> Error {
    move |code| Error::Backend {
        backend: "cuda",
        op,
        msg: format!("OpenCL error {code}"),
    }
}

impl OpenClDriver {
    /// The first device of the first platform that has one, or why there is none.
    pub(crate) fn open(with_blas: bool) -> std::result::Result<OpenClDriver, String> {
        let platforms = get_platforms().map_err(|e| format!("no OpenCL platform: {e}"))?;
        let id = platforms
            .iter()
            .find_map(|p| p.get_devices(CL_DEVICE_TYPE_ALL).ok()?.first().copied())
            .ok_or("no OpenCL device")?;
        let device = Device::new(id);
        let name = device.name().unwrap_or_default();
        let compute_units = device.max_compute_units().unwrap_or(1) as usize;
        let memory_bytes = device.global_mem_size().unwrap_or(0);
        let extensions = device.extensions().unwrap_or_default();
        if !extensions.split_whitespace().any(|e| e == "cl_khr_fp64") {
            return Err(format!("{name} has no cl_khr_fp64"));
        }
        let context = Context::from_device(&device).map_err(|e| e.to_string())?;
        #[allow(deprecated)]
        let queue = CommandQueue::create_default(&context, 0).map_err(|e| e.to_string())?;
        // SAFETY: a live context; no host pointer, OpenCL owns the memory.
        let dummy =
            unsafe { create_buffer(context.get(), CL_MEM_READ_WRITE, 16, std::ptr::null_mut()) }
                .map_err(|e| format!("OpenCL error {e}"))?;
        Ok(OpenClDriver {
            info: DriverInfo {
                backend: "cuda",
                ordinal: 0,
                name: format!("{} (OpenCL emulation)", name.trim()),
                compute_units,
                memory_bytes,
            },
            context,
            queue,
            programs: Mutex::new(HashMap::new()),
            dummy: ClBuffer {
                mem: dummy,
                bytes: 16,
            },
            with_blas,
        })
    }

    fn read_all(&self, buffer: &ClBuffer) -> Result<Vec<u8>> {
        let mut bytes = vec![0u8; buffer.bytes];
        self.read(buffer, 0, &mut bytes)?;
        Ok(bytes)
    }

    /// The kernel `name` of `key`, building the program on first use, with `f` applied to it.
    fn with_kernel<R>(
        &self,
        key: &ModuleKey,
        name: &'static str,
        f: impl FnOnce(&Kernel) -> Result<R>,
    ) -> Result<R> {
        let mut programs = self.programs.lock().map_err(|_| cl_err("launch")(0))?;
        if !programs.contains_key(key) {
            let mut options = String::from("-cl-std=CL1.2 -cl-fp32-correctly-rounded-divide-sqrt");
            for d in key
                .defines()
                .iter()
                .chain(std::iter::once(&"TS_HAS_FP64=1".to_string()))
            {
                options.push_str(" -D ");
                options.push_str(d);
            }
            let source = program_source(Dialect::OpenCl, key.program);
            let program = ClProgram::create_and_build_from_source(&self.context, &source, &options)
                .map_err(|log| Error::Backend {
                    backend: "cuda",
                    op: "build program",
                    msg: format!("{}: {log}", key.label()),
                })?;
            programs.insert(
                key.clone(),
                Built {
                    program,
                    kernels: HashMap::new(),
                },
            );
        }
        let built = programs.get_mut(key).ok_or_else(|| cl_err("launch")(0))?;
        if !built.kernels.contains_key(name) {
            let kernel = Kernel::create(&built.program, name).map_err(|e| Error::Backend {
                backend: "cuda",
                op: name,
                msg: format!("no kernel {name}: {e}"),
            })?;
            built.kernels.insert(name, kernel);
        }
        let kernel = built.kernels.get(name).ok_or_else(|| cl_err("launch")(0))?;
        f(kernel)
    }
}

/// Reads element `i` of a buffer's bytes as f64.
fn element(bytes: &[u8], dtype: DType, i: usize) -> f64 {
    match dtype {
        DType::F32 => {
            f32::from_ne_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap_or_default()) as f64
        }
        _ => f64::from_ne_bytes(bytes[8 * i..8 * i + 8].try_into().unwrap_or_default()),
    }
}

impl Driver for OpenClDriver {
    type Buffer = ClBuffer;

    fn info(&self) -> &DriverInfo {
        &self.info
    }

    fn alloc(&self, bytes: usize) -> Result<(ClBuffer, bool)> {
        // SAFETY: a live context; no host pointer.
        let mem = unsafe {
            create_buffer(
                self.context.get(),
                CL_MEM_READ_WRITE,
                bytes,
                std::ptr::null_mut(),
            )
        }
        .map_err(cl_err("allocate"))?;
        Ok((ClBuffer { mem, bytes }, false))
    }

    fn release(&self, buffer: ClBuffer) {
        drop(buffer);
    }

    fn write(&self, dst: &ClBuffer, src: &[u8]) -> Result<()> {
        // SAFETY: a blocking write of `src.len()` readable bytes into a buffer at least as large
        // (the runtime allocated it for this data).
        unsafe {
            enqueue_write_buffer(
                self.queue.get(),
                dst.mem,
                CL_BLOCKING,
                0,
                src.len(),
                src.as_ptr() as *const c_void,
                0,
                std::ptr::null(),
            )
        }
        .map(|e| drop(opencl3::event::Event::new(e)))
        .map_err(cl_err("upload"))
    }

    fn read(&self, src: &ClBuffer, byte_offset: usize, dst: &mut [u8]) -> Result<()> {
        // SAFETY: a blocking read of `dst.len()` bytes from inside `src` into writable memory.
        unsafe {
            enqueue_read_buffer(
                self.queue.get(),
                src.mem,
                CL_BLOCKING,
                byte_offset,
                dst.len(),
                dst.as_mut_ptr() as *mut c_void,
                0,
                std::ptr::null(),
            )
        }
        .map(|e| drop(opencl3::event::Event::new(e)))
        .map_err(cl_err("download"))
    }

    fn fill(&self, dst: &ClBuffer, pattern: &[u8], bytes: usize) -> Result<()> {
        // SAFETY: the range lies inside `dst`; OpenCL copies the pattern before returning.
        unsafe {
            enqueue_fill_buffer(
                self.queue.get(),
                dst.mem,
                pattern.as_ptr() as *const c_void,
                pattern.len(),
                0,
                bytes,
                0,
                std::ptr::null(),
            )
        }
        .map(|e| drop(opencl3::event::Event::new(e)))
        .map_err(cl_err("fill"))
    }

    fn launch(&self, launch: &Launch<'_>, args: &[DriverArg<'_, ClBuffer>]) -> Result<()> {
        self.with_kernel(launch.module, launch.kernel, |k| {
            for (index, arg) in args.iter().enumerate() {
                let index = index as u32;
                // SAFETY (all): the kernel declares argument `index` with this C type.
                let set = match *arg {
                    DriverArg::Buffer(b) => {
                        let mem = b.unwrap_or(&self.dummy).mem;
                        unsafe { k.set_arg(index, &mem) }
                    }
                    DriverArg::I64(v) => unsafe { k.set_arg(index, &v) },
                    DriverArg::U64(v) => unsafe { k.set_arg(index, &v) },
                    DriverArg::U32(v) => unsafe { k.set_arg(index, &v) },
                    DriverArg::I32(v) => unsafe { k.set_arg(index, &v) },
                    DriverArg::F32(v) => unsafe { k.set_arg(index, &v) },
                    DriverArg::F64(v) => unsafe { k.set_arg(index, &v) },
                    DriverArg::View(v) => unsafe { k.set_arg(index, &v) },
                };
                set.map_err(|e| cl_err(launch.kernel)(e.0))?;
            }
            let global: [usize; 3] =
                std::array::from_fn(|d| launch.grid[d] as usize * launch.block[d] as usize);
            let local: [usize; 3] = std::array::from_fn(|d| launch.block[d] as usize);
            // One dimension when the launch is one-dimensional (as OpenCL users write it).
            let dims = if global[1] * global[2] * local[1] * local[2] == 1 {
                1
            } else {
                3
            };
            // SAFETY: every argument was set above; the sizes have three entries each.
            let event = unsafe {
                self.queue.enqueue_nd_range_kernel(
                    k.get(),
                    dims,
                    std::ptr::null(),
                    global.as_ptr(),
                    local.as_ptr(),
                    &[],
                )
            }
            .map_err(|e| cl_err(launch.kernel)(e.0))?;
            drop(event);
            Ok(())
        })
    }

    fn synchronize(&self) -> Result<()> {
        self.queue.finish().map_err(|e| cl_err("synchronize")(e.0))
    }

    fn blas_gemm(&self, call: &BlasGemm<'_, ClBuffer>) -> Option<Result<()>> {
        if !self.with_blas {
            return None;
        }
        Some((|| {
            let a = self.read_all(call.a.buffer)?;
            let b = self.read_all(call.b.buffer)?;
            let mut c = self.read_all(call.c)?;
            let at = |o: &BlasOperand<'_, ClBuffer>, bytes: &[u8], batch, i, j| {
                let base = o.offset + batch * o.batch_stride;
                let index = match o.transpose {
                    BlasTranspose::None => base + i + j * o.ld,
                    BlasTranspose::Transpose => base + j + i * o.ld,
                };
                element(bytes, call.dtype, index)
            };
            for batch in 0..call.batch {
                for j in 0..call.n {
                    for i in 0..call.m {
                        let v: f64 = (0..call.k)
                            .map(|q| at(&call.a, &a, batch, i, q) * at(&call.b, &b, batch, q, j))
                            .sum();
                        let index = call.c_offset + batch * call.c_batch_stride + i + j * call.ldc;
                        match call.dtype {
                            DType::F32 => c[4 * index..4 * index + 4]
                                .copy_from_slice(&(v as f32).to_ne_bytes()),
                            _ => c[8 * index..8 * index + 8].copy_from_slice(&v.to_ne_bytes()),
                        }
                    }
                }
            }
            self.write(call.c, &c)
        })())
    }

    fn blas_unavailable(&self) -> Option<String> {
        (!self.with_blas).then(|| "the OpenCL test driver has no BLAS".to_string())
    }
}
