//! cuBLAS, loaded with `libloading` when present: a handle bound to the device's stream and
//! `cublas{S,D}gemmStridedBatched`.
//!
//! Found by [`crate::cuda::library_search`]: `TESSERA_CUBLAS_LIBRARY`, the loader path, the CUDA
//! toolkit, or PyPI's `nvidia-cublas-cu12` wheel. cuBLAS's default math mode is kept, which does
//! not use TF32 for single precision, so results match the tiled kernel's precision.

use crate::cuda::library_search::{load_library, LibrarySpec};
use std::ffi::{c_int, c_longlong, c_void};
use std::fmt;
use std::path::PathBuf;
use tessera_gpu::BlasTranspose;

/// Where cuBLAS is searched for.
pub(crate) const CUBLAS_LIBRARY: LibrarySpec = LibrarySpec {
    env_var: "TESSERA_CUBLAS_LIBRARY",
    file_names: &[
        "libcublas.so.13",
        "libcublas.so.12",
        "libcublas.so.11",
        "libcublas.so",
    ],
    wheel_dir: "nvidia/cublas/lib",
};

type Handle = *mut c_void;
type CreateFn = unsafe extern "C" fn(*mut Handle) -> c_int;
type DestroyFn = unsafe extern "C" fn(Handle) -> c_int;
type SetStreamFn = unsafe extern "C" fn(Handle, *mut c_void) -> c_int;
type SgemmFn = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const f32,
    *const f32,
    c_int,
    c_longlong,
    *const f32,
    c_int,
    c_longlong,
    *const f32,
    *mut f32,
    c_int,
    c_longlong,
    c_int,
) -> c_int;
type DgemmFn = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const f64,
    *const f64,
    c_int,
    c_longlong,
    *const f64,
    c_int,
    c_longlong,
    *const f64,
    *mut f64,
    c_int,
    c_longlong,
    c_int,
) -> c_int;

/// The name of a `cublasStatus_t`.
fn status_name(status: c_int) -> &'static str {
    match status {
        0 => "CUBLAS_STATUS_SUCCESS",
        1 => "CUBLAS_STATUS_NOT_INITIALIZED",
        3 => "CUBLAS_STATUS_ALLOC_FAILED",
        7 => "CUBLAS_STATUS_INVALID_VALUE",
        8 => "CUBLAS_STATUS_ARCH_MISMATCH",
        11 => "CUBLAS_STATUS_MAPPING_ERROR",
        13 => "CUBLAS_STATUS_EXECUTION_FAILED",
        14 => "CUBLAS_STATUS_INTERNAL_ERROR",
        15 => "CUBLAS_STATUS_NOT_SUPPORTED",
        16 => "CUBLAS_STATUS_LICENSE_ERROR",
        _ => "unknown cuBLAS status",
    }
}

/// A cuBLAS error: the failing call and its status.
pub(crate) fn status_error(call: &str, status: c_int) -> String {
    format!("{call} returned {} ({status})", status_name(status))
}

/// One column-major operand as cuBLAS takes it: device address of the first matrix, operation,
/// leading dimension and batch stride, in elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmOperand {
    pub(crate) address: u64,
    pub(crate) transpose: BlasTranspose,
    pub(crate) ld: usize,
    pub(crate) batch_stride: usize,
}

/// `C = op(A) op(B)` for `batch` column-major matrices, alpha 1 and beta 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmCall {
    pub(crate) double: bool,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) a: GemmOperand,
    pub(crate) b: GemmOperand,
    pub(crate) c_address: u64,
    pub(crate) ldc: usize,
    pub(crate) c_batch_stride: usize,
    pub(crate) batch: usize,
}

/// The loaded library and a handle bound to one device's stream.
pub(crate) struct Cublas {
    handle: Handle,
    destroy: DestroyFn,
    sgemm: SgemmFn,
    dgemm: DgemmFn,
    path: PathBuf,
    // Keeps the functions above valid; dropped after the handle is destroyed.
    _library: libloading::Library,
}

// SAFETY: the handle is only used through `&self` methods that the runtime serialises (it calls
// cuBLAS under its launch lock), with the device's context current on the calling thread.
unsafe impl Send for Cublas {}
// SAFETY: as above.
unsafe impl Sync for Cublas {}

impl fmt::Debug for Cublas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cublas").field("path", &self.path).finish()
    }
}

/// Reads symbol `name` of `library` as a function pointer of type `T`.
///
/// # Safety
/// `T` must be the function's exact C signature.
unsafe fn symbol<T: Copy>(library: &libloading::Library, name: &str) -> Result<T, String> {
    // SAFETY: the caller guarantees the type; the pointer stays valid while `library` is loaded,
    // which `Cublas` guarantees by owning it.
    unsafe { library.get::<T>(name.as_bytes()) }
        .map(|s| *s)
        .map_err(|e| format!("symbol {name} missing: {e}"))
}

impl Cublas {
    /// Loads cuBLAS and creates a handle on the current context, bound to `stream`.
    ///
    /// # Safety
    /// The device's context must be current on this thread and `stream` a live stream of it
    /// that outlives the returned value.
    pub(crate) unsafe fn new(stream: *mut c_void) -> Result<Cublas, String> {
        let (library, path) = load_library(&CUBLAS_LIBRARY)?;
        // SAFETY: the types are the signatures of cublas_api.h (handles and streams are opaque
        // pointers, enums and statuses ints, strides long long).
        let (create, destroy, set_stream, sgemm, dgemm) = unsafe {
            (
                symbol::<CreateFn>(&library, "cublasCreate_v2")?,
                symbol::<DestroyFn>(&library, "cublasDestroy_v2")?,
                symbol::<SetStreamFn>(&library, "cublasSetStream_v2")?,
                symbol::<SgemmFn>(&library, "cublasSgemmStridedBatched")?,
                symbol::<DgemmFn>(&library, "cublasDgemmStridedBatched")?,
            )
        };
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: `handle` is a valid out-pointer; the caller made the context current.
        let status = unsafe { create(&mut handle) };
        if status != 0 {
            return Err(status_error("cublasCreate_v2", status));
        }
        // SAFETY: `handle` was just created; `stream` is live (caller's guarantee).
        let status = unsafe { set_stream(handle, stream) };
        if status != 0 {
            // SAFETY: destroys the handle created above, once.
            unsafe { destroy(handle) };
            return Err(status_error("cublasSetStream_v2", status));
        }
        Ok(Cublas {
            handle,
            destroy,
            sgemm,
            dgemm,
            path,
            _library: library,
        })
    }

    /// The library that was loaded.
    pub(crate) fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Queues `call` on the handle's stream.
    ///
    /// # Safety
    /// The context must be current; every address must point to device memory of the element
    /// type holding every element the call reads or writes (sizes, leading dimensions and batch
    /// strides as given), and stay allocated until the stream has executed the call.
    pub(crate) unsafe fn gemm(&self, call: &GemmCall) -> Result<(), String> {
        let int = |v: usize, what: &str| {
            c_int::try_from(v).map_err(|_| format!("{what} = {v} exceeds cuBLAS's int range"))
        };
        let long = |v: usize| v as c_longlong;
        let op = |t: BlasTranspose| match t {
            BlasTranspose::None => 0,
            BlasTranspose::Transpose => 1,
        };
        let (m, n, k) = (int(call.m, "m")?, int(call.n, "n")?, int(call.k, "k")?);
        let (lda, ldb, ldc) = (
            int(call.a.ld, "lda")?,
            int(call.b.ld, "ldb")?,
            int(call.ldc, "ldc")?,
        );
        let batch = int(call.batch, "batch")?;
        let status = if call.double {
            let (one, zero) = (1.0f64, 0.0f64);
            // SAFETY: the caller guarantees the addresses and extents; alpha and beta are host
            // scalars (cuBLAS's default pointer mode) read before the call returns.
            unsafe {
                (self.dgemm)(
                    self.handle,
                    op(call.a.transpose),
                    op(call.b.transpose),
                    m,
                    n,
                    k,
                    &one,
                    call.a.address as *const f64,
                    lda,
                    long(call.a.batch_stride),
                    call.b.address as *const f64,
                    ldb,
                    long(call.b.batch_stride),
                    &zero,
                    call.c_address as *mut f64,
                    ldc,
                    long(call.c_batch_stride),
                    batch,
                )
            }
        } else {
            let (one, zero) = (1.0f32, 0.0f32);
            // SAFETY: as above, in single precision.
            unsafe {
                (self.sgemm)(
                    self.handle,
                    op(call.a.transpose),
                    op(call.b.transpose),
                    m,
                    n,
                    k,
                    &one,
                    call.a.address as *const f32,
                    lda,
                    long(call.a.batch_stride),
                    call.b.address as *const f32,
                    ldb,
                    long(call.b.batch_stride),
                    &zero,
                    call.c_address as *mut f32,
                    ldc,
                    long(call.c_batch_stride),
                    batch,
                )
            }
        };
        if status != 0 {
            let name = if call.double {
                "cublasDgemmStridedBatched"
            } else {
                "cublasSgemmStridedBatched"
            };
            return Err(status_error(name, status));
        }
        Ok(())
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        // SAFETY: the handle was created in `new` and is destroyed exactly once, before the
        // library is unloaded (fields drop after this body).
        unsafe {
            (self.destroy)(self.handle);
        }
    }
}
