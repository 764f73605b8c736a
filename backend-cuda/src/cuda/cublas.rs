//! cuBLAS, loaded at run time when present ([`crate::dynamic_library`]): a handle bound to the
//! device's stream, `cublas{S,D}gemmStridedBatched` for f32 and f64, and
//! `cublasGemmStridedBatchedEx` for f16, bf16 and TF32 f32 products ([`gemm_route`] decides
//! which).
//!
//! Found by [`crate::dynamic_library`]: `TESSERA_CUBLAS_LIBRARY`, the loader path, the CUDA
//! toolkit, or PyPI's `nvidia-cublas-cu12` wheel. The handle keeps cuBLAS's default math mode
//! (no TF32 for single precision); TF32 is requested per call through the compute type, so
//! handles with and without it share one cuBLAS handle without interfering.

use crate::dynamic_library::{DynamicLibrary, LibrarySpec};
use std::ffi::{c_int, c_longlong, c_void};
use std::fmt;
use tessera_core::DType;
use tessera_gpu::BlasTranspose;

// Enum values of `library_types.h` (`cudaDataType_t`) and `cublas_api.h`
// (`cublasComputeType_t`, `cublasGemmAlgo_t`), as NVIDIA documents them: cuBLAS guide,
// https://docs.nvidia.com/cuda/cublas/index.html, sections "cudaDataType_t" (CUDA_R_32F = 0,
// CUDA_R_16F = 2, CUDA_R_16BF = 14; also listed with their values in nvmath-python's
// `CudaDataType`, https://docs.nvidia.com/cuda/nvmath-python/latest/host-apis/generated/nvmath.CudaDataType.html),
// "cublasComputeType_t" (CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77) and
// "cublasGemmAlgo_t" (CUBLAS_GEMM_DEFAULT = -1); the signature of
// `cublasGemmStridedBatchedEx` is the guide's section of that name (cuBLAS 11 and later take a
// `cublasComputeType_t` there, which every library this crate loads is).

/// `CUDA_R_32F`.
pub(crate) const CUDA_R_32F: c_int = 0;
/// `CUDA_R_16F`.
pub(crate) const CUDA_R_16F: c_int = 2;
/// `CUDA_R_16BF`.
pub(crate) const CUDA_R_16BF: c_int = 14;
/// `CUBLAS_COMPUTE_32F`: f32 arithmetic and accumulation.
pub(crate) const CUBLAS_COMPUTE_32F: c_int = 68;
/// `CUBLAS_COMPUTE_32F_FAST_TF32`: f32 accumulation, inputs rounded to TF32 on tensor cores.
pub(crate) const CUBLAS_COMPUTE_32F_FAST_TF32: c_int = 77;
/// `CUBLAS_GEMM_DEFAULT`: cuBLAS's heuristics choose the algorithm.
const CUBLAS_GEMM_DEFAULT: c_int = -1;

/// Which cuBLAS entry point runs a GEMM, and with which types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemmRoute {
    /// `cublasSgemmStridedBatched`: f32 in, out and compute (default math mode, no TF32).
    Sgemm,
    /// `cublasDgemmStridedBatched`: f64.
    Dgemm,
    /// `cublasGemmStridedBatchedEx` with A, B and C of `data_type` (a `cudaDataType_t`),
    /// `compute` (a `cublasComputeType_t`) and f32 alpha and beta (what every f32 compute type
    /// takes).
    Ex {
        /// `cudaDataType_t` of A, B and C.
        data_type: c_int,
        /// `cublasComputeType_t`.
        compute: c_int,
    },
}

impl GemmRoute {
    /// The cuBLAS function the route calls, for messages.
    pub(crate) fn function(self) -> &'static str {
        match self {
            GemmRoute::Sgemm => "cublasSgemmStridedBatched",
            GemmRoute::Dgemm => "cublasDgemmStridedBatched",
            GemmRoute::Ex { .. } => "cublasGemmStridedBatchedEx",
        }
    }
}

/// The cuBLAS call for a product of `dtype` when the handle allows TF32 (`allow_tf32`) and the
/// loaded library has `cublasGemmStridedBatchedEx` (`has_ex`); None when cuBLAS cannot run it
/// (another dtype, or a 16-bit one without the Ex entry point), so that the kernel does.
///
/// * f64: `Dgemm` (TF32 does not apply).
/// * f32: `Sgemm`; with TF32 allowed, `Ex` with `CUBLAS_COMPUTE_32F_FAST_TF32` (falling back
///   to `Sgemm`, which is at least as precise, when the library lacks `Ex`).
/// * f16 / bf16: `Ex` with `CUDA_R_16F` / `CUDA_R_16BF` storage and `CUBLAS_COMPUTE_32F`
///   (f32 accumulation, as the tiled kernel computes them).
pub(crate) fn gemm_route(dtype: DType, allow_tf32: bool, has_ex: bool) -> Option<GemmRoute> {
    let ex = |data_type, compute| has_ex.then_some(GemmRoute::Ex { data_type, compute });
    match dtype {
        DType::F64 => Some(GemmRoute::Dgemm),
        DType::F32 if allow_tf32 => {
            ex(CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32).or(Some(GemmRoute::Sgemm))
        }
        DType::F32 => Some(GemmRoute::Sgemm),
        DType::F16 => ex(CUDA_R_16F, CUBLAS_COMPUTE_32F),
        DType::BF16 => ex(CUDA_R_16BF, CUBLAS_COMPUTE_32F),
        _ => None,
    }
}

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

type GemmExFn = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    c_longlong,
    *const c_void,
    c_int,
    c_int,
    c_longlong,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_longlong,
    c_int,
    c_int,
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

/// `C = op(A) op(B)` for `batch` column-major matrices, alpha 1 and beta 0, through `route`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmCall {
    pub(crate) route: GemmRoute,
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
    // `cublasGemmStridedBatchedEx`, absent from libraries older than cuBLAS 9.1.
    gemm_ex: Option<GemmExFn>,
    // Keeps the functions above valid; dropped after the handle is destroyed.
    library: DynamicLibrary,
}

// SAFETY: the handle is only used through `&self` methods that the runtime serialises (it calls
// cuBLAS under its launch lock), with the device's context current on the calling thread.
unsafe impl Send for Cublas {}
// SAFETY: as above.
unsafe impl Sync for Cublas {}

impl fmt::Debug for Cublas {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cublas")
            .field("path", &self.library.path())
            .finish()
    }
}

impl Cublas {
    /// Loads cuBLAS and creates a handle on the current context, bound to `stream`.
    ///
    /// # Safety
    /// The device's context must be current on this thread and `stream` a live stream of it
    /// that outlives the returned value.
    pub(crate) unsafe fn new(stream: *mut c_void) -> Result<Cublas, String> {
        // SAFETY: cuBLAS's initialisers have no preconditions.
        let library = unsafe { DynamicLibrary::load(&CUBLAS_LIBRARY) }?;
        // SAFETY: the types are the signatures of cublas_api.h (handles and streams are opaque
        // pointers, enums and statuses ints, strides long long); the pointers live in `Cublas`
        // beside the library, which outlives them.
        let (create, destroy, set_stream, sgemm, dgemm) = unsafe {
            (
                library.symbol::<CreateFn>("cublasCreate_v2")?,
                library.symbol::<DestroyFn>("cublasDestroy_v2")?,
                library.symbol::<SetStreamFn>("cublasSetStream_v2")?,
                library.symbol::<SgemmFn>("cublasSgemmStridedBatched")?,
                library.symbol::<DgemmFn>("cublasDgemmStridedBatched")?,
            )
        };
        // SAFETY: the signature of `cublasGemmStridedBatchedEx` in cublas_api.h (cuBLAS 11+:
        // pointers, `int` enums, `long long` strides; see the enum notes at the top); kept as
        // above.
        let gemm_ex = unsafe { library.symbol::<GemmExFn>("cublasGemmStridedBatchedEx") }.ok();
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
            gemm_ex,
            library,
        })
    }

    /// Whether the library has `cublasGemmStridedBatchedEx` (16-bit and TF32 products).
    pub(crate) fn has_gemm_ex(&self) -> bool {
        self.gemm_ex.is_some()
    }

    /// The library that was loaded.
    pub(crate) fn path(&self) -> &std::path::Path {
        self.library.path()
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
        let (ta, tb) = (op(call.a.transpose), op(call.b.transpose));
        let (sa, sb, sc) = (
            long(call.a.batch_stride),
            long(call.b.batch_stride),
            long(call.c_batch_stride),
        );
        let status = match call.route {
            GemmRoute::Dgemm => {
                let (one, zero) = (1.0f64, 0.0f64);
                // SAFETY: the caller guarantees the addresses and extents; alpha and beta are
                // host scalars (cuBLAS's default pointer mode) read before the call returns.
                unsafe {
                    (self.dgemm)(
                        self.handle,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        &one,
                        call.a.address as *const f64,
                        lda,
                        sa,
                        call.b.address as *const f64,
                        ldb,
                        sb,
                        &zero,
                        call.c_address as *mut f64,
                        ldc,
                        sc,
                        batch,
                    )
                }
            }
            GemmRoute::Sgemm => {
                let (one, zero) = (1.0f32, 0.0f32);
                // SAFETY: as above, in single precision.
                unsafe {
                    (self.sgemm)(
                        self.handle,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        &one,
                        call.a.address as *const f32,
                        lda,
                        sa,
                        call.b.address as *const f32,
                        ldb,
                        sb,
                        &zero,
                        call.c_address as *mut f32,
                        ldc,
                        sc,
                        batch,
                    )
                }
            }
            GemmRoute::Ex { data_type, compute } => {
                let gemm_ex = self.gemm_ex.ok_or_else(|| {
                    "cublasGemmStridedBatchedEx is missing from the loaded cuBLAS".to_string()
                })?;
                // Every compute type `gemm_route` picks is an f32 one, whose alpha and beta
                // are floats.
                let (one, zero) = (1.0f32, 0.0f32);
                // SAFETY: as above, with A, B and C holding elements of `data_type`;
                // alpha and beta point to f32 host scalars, as f32 compute types require.
                unsafe {
                    gemm_ex(
                        self.handle,
                        ta,
                        tb,
                        m,
                        n,
                        k,
                        (&one as *const f32).cast(),
                        call.a.address as *const c_void,
                        data_type,
                        lda,
                        sa,
                        call.b.address as *const c_void,
                        data_type,
                        ldb,
                        sb,
                        (&zero as *const f32).cast(),
                        call.c_address as *mut c_void,
                        data_type,
                        ldc,
                        sc,
                        batch,
                        compute,
                        CUBLAS_GEMM_DEFAULT,
                    )
                }
            }
        };
        if status != 0 {
            return Err(status_error(call.route.function(), status));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cublas_found_here_has_every_symbol_this_crate_calls() {
        // Loading needs no GPU; creating a handle would. Skips where no cuBLAS is installed.
        // SAFETY: cuBLAS's initialisers have no preconditions.
        let library = match unsafe { DynamicLibrary::load(&CUBLAS_LIBRARY) } {
            Ok(found) => found,
            Err(reason) => {
                eprintln!("skipped: no cuBLAS on this machine ({reason})");
                return;
            }
        };
        for name in [
            "cublasCreate_v2",
            "cublasDestroy_v2",
            "cublasSetStream_v2",
            "cublasSgemmStridedBatched",
            "cublasDgemmStridedBatched",
            "cublasGemmStridedBatchedEx",
        ] {
            // SAFETY: only the symbol's presence is checked; nothing is read or called.
            let found = unsafe { library.symbol::<*const c_void>(name) };
            assert!(found.is_ok(), "{}", found.unwrap_err());
        }
    }

    #[test]
    fn f32_and_f64_keep_the_classic_entry_points_unless_tf32_is_allowed() {
        for has_ex in [false, true] {
            assert_eq!(
                gemm_route(DType::F64, false, has_ex),
                Some(GemmRoute::Dgemm)
            );
            assert_eq!(gemm_route(DType::F64, true, has_ex), Some(GemmRoute::Dgemm));
            assert_eq!(
                gemm_route(DType::F32, false, has_ex),
                Some(GemmRoute::Sgemm)
            );
        }
    }

    #[test]
    fn tf32_uses_the_ex_entry_point_with_the_fast_tf32_compute_type() {
        let route = gemm_route(DType::F32, true, true).unwrap();
        assert_eq!(
            route,
            GemmRoute::Ex {
                data_type: 0,
                compute: 77
            }
        );
        assert_eq!(route.function(), "cublasGemmStridedBatchedEx");
        // Without the Ex entry point TF32 is a permission not taken: full f32 precision.
        assert_eq!(gemm_route(DType::F32, true, false), Some(GemmRoute::Sgemm));
    }

    #[test]
    fn sixteen_bit_dtypes_use_ex_with_f32_compute_or_fall_back_to_the_kernel() {
        for tf32 in [false, true] {
            assert_eq!(
                gemm_route(DType::F16, tf32, true),
                Some(GemmRoute::Ex {
                    data_type: 2,
                    compute: 68
                })
            );
            assert_eq!(
                gemm_route(DType::BF16, tf32, true),
                Some(GemmRoute::Ex {
                    data_type: 14,
                    compute: 68
                })
            );
            assert_eq!(gemm_route(DType::F16, tf32, false), None);
            assert_eq!(gemm_route(DType::BF16, tf32, false), None);
        }
    }

    #[test]
    fn integer_dtypes_have_no_cublas_route() {
        for dtype in [DType::I64, DType::Bool] {
            assert_eq!(gemm_route(dtype, false, true), None);
            assert_eq!(gemm_route(dtype, true, true), None);
        }
    }

    #[test]
    fn route_names_are_the_cublas_symbols() {
        assert_eq!(GemmRoute::Sgemm.function(), "cublasSgemmStridedBatched");
        assert_eq!(GemmRoute::Dgemm.function(), "cublasDgemmStridedBatched");
    }
}
