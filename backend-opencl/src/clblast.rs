//! CLBlast, the tuned vendor-neutral OpenCL BLAS, loaded at run time when it is installed (as
//! `backend-cuda` loads cuBLAS): matrix products of f32 and f64 go to
//! `CLBlast{S,D}gemmStridedBatched` on the device's own queue, without host synchronisation;
//! everything else (16-bit dtypes, operands without a unit stride) stays on the tiled kernel,
//! which is also the reference the CLBlast route is tested against.
//!
//! * [`GEMM_ENV_VAR`] (`TESSERA_OPENCL_GEMM=auto|clblast|tiled`, default `auto`) chooses the
//!   route of the handles `OpenCl::new()` and friends return: `auto` uses CLBlast when the
//!   library loads and the tiled kernel otherwise, `clblast` requires it (a matrix product then
//!   fails with [`tessera_core::Error::Backend`] saying why it could not be loaded), `tiled`
//!   never uses it. `dev.with_gemm(GemmEngine::{Auto, Blas, Tiled})` does the same per handle.
//! * The library is `$TESSERA_CLBLAST_LIBRARY` when set (that file only), else `libclblast.so.1`
//!   (Debian's `libclblast1`) or `libclblast.so`, found by the dynamic loader. It is loaded once
//!   per process, on the first matrix product that could use it, and never unloaded.
//! * f16 products stay on the tiled kernel even on devices with `cl_khr_fp16`: CLBlast's
//!   `CLBlastHgemm*` computes and accumulates in half precision, where the tiled kernel (and
//!   cuBLAS's `GemmEx` with `CUBLAS_COMPUTE_32F`) accumulate in f32. bf16 has no CLBlast routine.
//!
//! Signatures and enum values are those of CLBlast's C header, `clblast_c.h` (CLBlast 1.5.3 as
//! Debian's `libclblast-dev` installs it at `/usr/include/clblast_c.h`: `CLBlastStatusCode`,
//! `CLBlastLayout`, `CLBlastTranspose` near its top; `CLBlastSgemmStridedBatched` and
//! `CLBlastDgemmStridedBatched` in its "StridedBatched version of GEMM" section). Enums are C
//! `enum`s, passed as `int`.

use opencl3::types::{cl_command_queue, cl_event, cl_mem};
use std::ffi::c_int;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tessera_core::{DType, Error, Result};
use tessera_gpu::{BlasTranspose, GemmEngine};

/// Environment variable choosing the GEMM route of new handles: `auto` (default), `clblast`
/// (or `blas`) or `tiled`, any case.
pub const GEMM_ENV_VAR: &str = "TESSERA_OPENCL_GEMM";

/// Environment variable naming the CLBlast library file to load (then the only one tried).
pub const LIBRARY_ENV_VAR: &str = "TESSERA_CLBLAST_LIBRARY";

/// File names tried when [`LIBRARY_ENV_VAR`] is unset, resolved by the dynamic loader.
pub const LIBRARY_NAMES: [&str; 2] = ["libclblast.so.1", "libclblast.so"];

/// `CLBlastLayoutColMajor`.
const LAYOUT_COL_MAJOR: c_int = 102;
/// `CLBlastTransposeNo`.
const TRANSPOSE_NO: c_int = 111;
/// `CLBlastTransposeYes`.
const TRANSPOSE_YES: c_int = 112;

/// Parses a [`GEMM_ENV_VAR`] value: `auto` (or empty), `clblast` or `blas`, `tiled`.
///
/// # Errors
/// [`Error::InvalidArgument`] naming the variable and the value.
pub fn parse_gemm_engine(text: &str) -> Result<GemmEngine> {
    match text.trim().to_ascii_lowercase().as_str() {
        "clblast" | "blas" => Ok(GemmEngine::Blas),
        "auto" | "" => Ok(GemmEngine::Auto),
        "tiled" => Ok(GemmEngine::Tiled),
        other => Err(Error::InvalidArgument {
            op: GEMM_ENV_VAR,
            msg: format!("`{other}` is not auto, clblast or tiled"),
        }),
    }
}

/// The engine [`GEMM_ENV_VAR`] asks for ([`GemmEngine::Auto`] when unset).
///
/// # Errors
/// As [`parse_gemm_engine`].
pub fn gemm_engine_from_env() -> Result<GemmEngine> {
    match std::env::var(GEMM_ENV_VAR) {
        Ok(text) => parse_gemm_engine(&text),
        Err(_) => Ok(GemmEngine::Auto),
    }
}

/// The CLBlast library this process uses, or why there is none (loaded on first call).
pub fn library_path() -> std::result::Result<PathBuf, String> {
    library().map(|l| l.path.clone())
}

/// Which CLBlast routine runs a product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Routine {
    /// `CLBlastSgemmStridedBatched`.
    Sgemm,
    /// `CLBlastDgemmStridedBatched`.
    Dgemm,
}

impl Routine {
    /// The C function, for messages.
    pub(crate) fn function(self) -> &'static str {
        match self {
            Routine::Sgemm => "CLBlastSgemmStridedBatched",
            Routine::Dgemm => "CLBlastDgemmStridedBatched",
        }
    }
}

/// The routine for products of `dtype`, or None (the tiled kernel runs): f32 always, f64 on
/// devices with it (`has_fp64`), nothing else (see the module documentation for f16).
pub(crate) fn routine(dtype: DType, has_fp64: bool) -> Option<Routine> {
    match dtype {
        DType::F32 => Some(Routine::Sgemm),
        DType::F64 if has_fp64 => Some(Routine::Dgemm),
        _ => None,
    }
}

/// The name of a `CLBlastStatusCode`.
pub(crate) fn status_name(status: c_int) -> &'static str {
    match status {
        0 => "CLBlastSuccess",
        -3 => "CLBlastOpenCLCompilerNotAvailable",
        -4 => "CLBlastTempBufferAllocFailure",
        -5 => "CLBlastOpenCLOutOfResources",
        -6 => "CLBlastOpenCLOutOfHostMemory",
        -11 => "CLBlastOpenCLBuildProgramFailure",
        -30 => "CLBlastInvalidValue",
        -36 => "CLBlastInvalidCommandQueue",
        -38 => "CLBlastInvalidMemObject",
        -42 => "CLBlastInvalidBinary",
        -43 => "CLBlastInvalidBuildOptions",
        -44 => "CLBlastInvalidProgram",
        -45 => "CLBlastInvalidProgramExecutable",
        -46 => "CLBlastInvalidKernelName",
        -47 => "CLBlastInvalidKernelDefinition",
        -48 => "CLBlastInvalidKernel",
        -49 => "CLBlastInvalidArgIndex",
        -50 => "CLBlastInvalidArgValue",
        -51 => "CLBlastInvalidArgSize",
        -52 => "CLBlastInvalidKernelArgs",
        -53 => "CLBlastInvalidLocalNumDimensions",
        -54 => "CLBlastInvalidLocalThreadsTotal",
        -55 => "CLBlastInvalidLocalThreadsDim",
        -56 => "CLBlastInvalidGlobalOffset",
        -57 => "CLBlastInvalidEventWaitList",
        -58 => "CLBlastInvalidEvent",
        -59 => "CLBlastInvalidOperation",
        -61 => "CLBlastInvalidBufferSize",
        -63 => "CLBlastInvalidGlobalWorkSize",
        -1024 => "CLBlastNotImplemented",
        -1022 => "CLBlastInvalidMatrixA",
        -1021 => "CLBlastInvalidMatrixB",
        -1020 => "CLBlastInvalidMatrixC",
        -1019 => "CLBlastInvalidVectorX",
        -1018 => "CLBlastInvalidVectorY",
        -1017 => "CLBlastInvalidDimension",
        -1016 => "CLBlastInvalidLeadDimA",
        -1015 => "CLBlastInvalidLeadDimB",
        -1014 => "CLBlastInvalidLeadDimC",
        -1013 => "CLBlastInvalidIncrementX",
        -1012 => "CLBlastInvalidIncrementY",
        -1011 => "CLBlastInsufficientMemoryA",
        -1010 => "CLBlastInsufficientMemoryB",
        -1009 => "CLBlastInsufficientMemoryC",
        -1008 => "CLBlastInsufficientMemoryX",
        -1007 => "CLBlastInsufficientMemoryY",
        -2050 => "CLBlastInsufficientMemoryTemp",
        -2049 => "CLBlastInvalidBatchCount",
        -2048 => "CLBlastInvalidOverrideKernel",
        -2047 => "CLBlastMissingOverrideParameter",
        -2046 => "CLBlastInvalidLocalMemUsage",
        -2045 => "CLBlastNoHalfPrecision",
        -2044 => "CLBlastNoDoublePrecision",
        -2043 => "CLBlastInvalidVectorScalar",
        -2042 => "CLBlastInsufficientMemoryScalar",
        -2041 => "CLBlastDatabaseError",
        -2040 => "CLBlastUnknownError",
        -2039 => "CLBlastUnexpectedError",
        _ => "unknown CLBlast status",
    }
}

/// The message of a failed CLBlast call: the function and its status.
pub(crate) fn status_error(function: &str, status: c_int) -> String {
    format!("{function} returned {} ({status})", status_name(status))
}

/// `CLBlast{S,D}gemmStridedBatched(layout, a_transpose, b_transpose, m, n, k, alpha, a_buffer,
/// a_offset, a_ld, a_stride, b_buffer, b_offset, b_ld, b_stride, beta, c_buffer, c_offset,
/// c_ld, c_stride, batch_count, queue, event)` with `T` the element (and scalar) type.
type GemmStridedBatchedFn<T> = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    usize,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    usize,
    cl_mem,
    usize,
    usize,
    usize,
    T,
    cl_mem,
    usize,
    usize,
    usize,
    usize,
    *mut cl_command_queue,
    *mut cl_event,
) -> c_int;

/// One column-major operand as CLBlast takes it: buffer, element offset of the first matrix,
/// transpose, leading dimension and batch stride (elements).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Operand {
    pub(crate) buffer: cl_mem,
    pub(crate) offset: usize,
    pub(crate) transpose: BlasTranspose,
    pub(crate) ld: usize,
    pub(crate) batch_stride: usize,
}

/// `C = op(A) op(B)` for `batch` column-major matrices, alpha 1 and beta 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct GemmCall {
    pub(crate) routine: Routine,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) a: Operand,
    pub(crate) b: Operand,
    pub(crate) c: cl_mem,
    pub(crate) c_offset: usize,
    pub(crate) ldc: usize,
    pub(crate) c_batch_stride: usize,
    pub(crate) batch: usize,
}

/// The loaded library and the routines read from it.
pub(crate) struct ClBlast {
    sgemm: GemmStridedBatchedFn<f32>,
    dgemm: GemmStridedBatchedFn<f64>,
    path: PathBuf,
    // Keeps the functions above valid (declared last: dropped after them).
    _library: libloading::Library,
}

impl fmt::Debug for ClBlast {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClBlast").field("path", &self.path).finish()
    }
}

/// The files to try: [`LIBRARY_ENV_VAR`]'s alone when it is set, else [`LIBRARY_NAMES`].
pub(crate) fn candidates() -> Vec<PathBuf> {
    match std::env::var_os(LIBRARY_ENV_VAR).filter(|v| !v.is_empty()) {
        Some(explicit) => vec![PathBuf::from(explicit)],
        None => LIBRARY_NAMES.iter().map(PathBuf::from).collect(),
    }
}

/// The process's CLBlast, loaded from [`candidates`] on first call; the error says why none
/// could be used.
pub(crate) fn library() -> std::result::Result<&'static ClBlast, String> {
    static LIBRARY: OnceLock<std::result::Result<ClBlast, String>> = OnceLock::new();
    LIBRARY
        .get_or_init(|| {
            // SAFETY: the candidates are CLBlast (Debian's libclblast1 or the file the user
            // named), whose initialisers only set up its C++ runtime and caches.
            unsafe { ClBlast::load(&candidates()) }
        })
        .as_ref()
        .map_err(Clone::clone)
}

impl ClBlast {
    /// The first of `candidates` that loads and has both routines; the error lists every
    /// candidate's failure and how to name the file.
    ///
    /// # Safety
    /// Every candidate must be a library whose initialisers are sound to run (CLBlast's are).
    pub(crate) unsafe fn load(candidates: &[PathBuf]) -> std::result::Result<ClBlast, String> {
        let mut failures = Vec::new();
        for candidate in candidates {
            // SAFETY: the caller guarantees that the candidates' initialisers are sound.
            let library = match unsafe { libloading::Library::new(candidate) } {
                Ok(library) => library,
                Err(e) => {
                    failures.push(format!("{}: {e}", candidate.display()));
                    continue;
                }
            };
            // SAFETY: the types are the signatures of clblast_c.h (see the module
            // documentation); the pointers are kept beside the library, which outlives them.
            let routines = unsafe {
                symbol::<GemmStridedBatchedFn<f32>>(
                    &library,
                    candidate,
                    "CLBlastSgemmStridedBatched",
                )
                .and_then(|sgemm| {
                    symbol::<GemmStridedBatchedFn<f64>>(
                        &library,
                        candidate,
                        "CLBlastDgemmStridedBatched",
                    )
                    .map(|dgemm| (sgemm, dgemm))
                })
            };
            match routines {
                Ok((sgemm, dgemm)) => {
                    return Ok(ClBlast {
                        sgemm,
                        dgemm,
                        path: candidate.clone(),
                        _library: library,
                    })
                }
                Err(e) => failures.push(e),
            }
        }
        Err(format!(
            "CLBlast could not be loaded (install Debian's `libclblast1`, or set {LIBRARY_ENV_VAR} \
             to the library file; tried {})",
            failures.join("; ")
        ))
    }

    /// The file (or bare name, resolved by the loader) that was loaded.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Enqueues `call` on `queue` (no event, no wait).
    ///
    /// # Safety
    /// `queue` must be a live command queue whose context holds the three buffers; each buffer
    /// must hold every element of its matrix type the call reads or writes (offsets, leading
    /// dimensions and batch strides as given; CLBlast also checks the sizes it can see); `f64`
    /// calls need a device with `cl_khr_fp64`. The caller serialises the queue's users.
    pub(crate) unsafe fn gemm(
        &self,
        call: &GemmCall,
        queue: cl_command_queue,
    ) -> std::result::Result<(), String> {
        let op = |t: BlasTranspose| match t {
            BlasTranspose::None => TRANSPOSE_NO,
            BlasTranspose::Transpose => TRANSPOSE_YES,
        };
        let mut queue = queue;
        let (a, b) = (&call.a, &call.b);
        let status = match call.routine {
            // SAFETY: the caller guarantees the queue, the buffers and their extents; `queue`
            // is a valid pointer to the handle for the duration of the call; the event pointer
            // is null, which CLBlast accepts (no event is returned).
            Routine::Sgemm => unsafe {
                (self.sgemm)(
                    LAYOUT_COL_MAJOR,
                    op(a.transpose),
                    op(b.transpose),
                    call.m,
                    call.n,
                    call.k,
                    1.0,
                    a.buffer,
                    a.offset,
                    a.ld,
                    a.batch_stride,
                    b.buffer,
                    b.offset,
                    b.ld,
                    b.batch_stride,
                    0.0,
                    call.c,
                    call.c_offset,
                    call.ldc,
                    call.c_batch_stride,
                    call.batch,
                    &mut queue,
                    std::ptr::null_mut(),
                )
            },
            // SAFETY: as above, in double precision (the caller checked the device has it).
            Routine::Dgemm => unsafe {
                (self.dgemm)(
                    LAYOUT_COL_MAJOR,
                    op(a.transpose),
                    op(b.transpose),
                    call.m,
                    call.n,
                    call.k,
                    1.0,
                    a.buffer,
                    a.offset,
                    a.ld,
                    a.batch_stride,
                    b.buffer,
                    b.offset,
                    b.ld,
                    b.batch_stride,
                    0.0,
                    call.c,
                    call.c_offset,
                    call.ldc,
                    call.c_batch_stride,
                    call.batch,
                    &mut queue,
                    std::ptr::null_mut(),
                )
            },
        };
        if status != 0 {
            return Err(status_error(call.routine.function(), status));
        }
        Ok(())
    }
}

/// Symbol `name` of `library` (loaded from `path`) as a `T`; the error names both.
///
/// # Safety
/// `T` must be the symbol's exact type, and the value must not outlive `library`.
unsafe fn symbol<T: Copy>(
    library: &libloading::Library,
    path: &Path,
    name: &str,
) -> std::result::Result<T, String> {
    let mut c_name = name.as_bytes().to_vec();
    c_name.push(0);
    // SAFETY: the caller guarantees the type and the lifetime; the value is copied out.
    unsafe { library.get::<T>(&c_name) }
        .map(|s| *s)
        .map_err(|e| format!("{}: symbol `{name}` not found: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_parse_with_clblast_as_the_blas() {
        assert_eq!(parse_gemm_engine("CLBlast").unwrap(), GemmEngine::Blas);
        assert_eq!(parse_gemm_engine("blas").unwrap(), GemmEngine::Blas);
        assert_eq!(parse_gemm_engine(" tiled ").unwrap(), GemmEngine::Tiled);
        assert_eq!(parse_gemm_engine("auto").unwrap(), GemmEngine::Auto);
        assert_eq!(parse_gemm_engine("").unwrap(), GemmEngine::Auto);
        let err = parse_gemm_engine("cublas").unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument { op, msg } if *op == GEMM_ENV_VAR && msg.contains("cublas")),
            "{err}"
        );
    }

    #[test]
    fn routines_cover_f32_and_f64_only() {
        assert_eq!(routine(DType::F32, false), Some(Routine::Sgemm));
        assert_eq!(routine(DType::F64, true), Some(Routine::Dgemm));
        assert_eq!(routine(DType::F64, false), None);
        for dtype in [DType::F16, DType::BF16, DType::I64, DType::Bool] {
            assert_eq!(routine(dtype, true), None, "{dtype}");
        }
        assert_eq!(Routine::Sgemm.function(), "CLBlastSgemmStridedBatched");
        assert_eq!(Routine::Dgemm.function(), "CLBlastDgemmStridedBatched");
    }

    #[test]
    fn statuses_are_named_as_in_the_header() {
        assert_eq!(
            status_error("CLBlastSgemmStridedBatched", -1016),
            "CLBlastSgemmStridedBatched returned CLBlastInvalidLeadDimA (-1016)"
        );
        assert_eq!(status_name(-2045), "CLBlastNoHalfPrecision");
        assert_eq!(status_name(-4), "CLBlastTempBufferAllocFailure");
        assert_eq!(status_name(7), "unknown CLBlast status");
    }

    #[test]
    fn a_missing_library_says_what_to_install_and_what_was_tried() {
        let tried = [PathBuf::from("/nonexistent/libclblast.so.1")];
        // SAFETY: nothing exists there, so nothing is loaded.
        let err = unsafe { ClBlast::load(&tried) }.unwrap_err();
        assert!(err.contains("libclblast1"), "{err}");
        assert!(err.contains(LIBRARY_ENV_VAR), "{err}");
        assert!(err.contains("/nonexistent/libclblast.so.1"), "{err}");
    }

    #[test]
    fn a_library_without_the_routines_is_refused_naming_the_symbol() {
        // The C math library loads everywhere and has no CLBlast symbol.
        let tried = [PathBuf::from("libm.so.6")];
        // SAFETY: libm's initialisers are sound to run.
        let err = unsafe { ClBlast::load(&tried) }.unwrap_err();
        assert!(
            err.contains("symbol `CLBlastSgemmStridedBatched` not found"),
            "{err}"
        );
    }

    #[test]
    fn the_installed_clblast_has_both_routines() {
        // SAFETY: CLBlast's initialisers are sound to run.
        match unsafe { ClBlast::load(&LIBRARY_NAMES.map(PathBuf::from)) } {
            Ok(clblast) => assert!(
                clblast.path().to_string_lossy().contains("clblast"),
                "{clblast:?}"
            ),
            Err(reason) if std::env::var_os(REQUIRE_ENV_VAR).is_some() => {
                panic!("{REQUIRE_ENV_VAR} is set but {reason}")
            }
            Err(reason) => eprintln!("skipped: {reason}"),
        }
    }

    /// Set by CI, where `libclblast1` is installed: a missing CLBlast fails instead of skipping.
    const REQUIRE_ENV_VAR: &str = "TESSERA_REQUIRE_CLBLAST";

    /// A driver on the default device when it and CLBlast exist, else None after saying why.
    fn driver_with_clblast() -> Option<crate::OpenClDriver> {
        use crate::device::{find_devices, DeviceSelector};
        let found = match find_devices().and_then(|d| DeviceSelector::Default.choose(&d)) {
            Ok(found) => found,
            Err(e) => {
                eprintln!("skipped: no OpenCL device ({e})");
                return None;
            }
        };
        if let Err(reason) = library() {
            assert!(
                std::env::var_os(REQUIRE_ENV_VAR).is_none(),
                "{REQUIRE_ENV_VAR} is set but {reason}"
            );
            eprintln!("skipped: {reason}");
            return None;
        }
        Some(crate::OpenClDriver::create(found.info, found.device).unwrap())
    }

    /// A 2 x 2 f32 product of `a` by `b` (column-major, leading dimension `ld` for A).
    fn call<'a>(
        a: &'a crate::DeviceBuffer,
        b: &'a crate::DeviceBuffer,
        c: &'a crate::DeviceBuffer,
        lda: usize,
        a_offset: usize,
    ) -> tessera_gpu::BlasGemm<'a, crate::DeviceBuffer> {
        let operand = |buffer, ld, offset| tessera_gpu::BlasOperand {
            buffer,
            offset,
            transpose: BlasTranspose::None,
            ld,
            batch_stride: 4,
        };
        tessera_gpu::BlasGemm {
            dtype: DType::F32,
            allow_tf32: false,
            m: 2,
            n: 2,
            k: 2,
            a: operand(a, lda, a_offset),
            b: operand(b, 2, 0),
            c,
            c_offset: 0,
            ldc: 2,
            c_batch_stride: 4,
            batch: 1,
        }
    }

    #[test]
    fn a_call_is_enqueued_on_the_device_queue_and_computes_the_product() {
        use tessera_gpu::Driver;
        let Some(driver) = driver_with_clblast() else {
            return;
        };
        let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let (a, b, c) = (
            driver.allocate(24).unwrap(),
            driver.allocate(16).unwrap(),
            driver.allocate(16).unwrap(),
        );
        // A (column-major, from element 2): [[1, 3], [2, 4]]; B: [[5, 7], [6, 8]].
        driver
            .write(&a, &bytes(&[9.0, 9.0, 1.0, 2.0, 3.0, 4.0]))
            .unwrap();
        driver.write(&b, &bytes(&[5.0, 6.0, 7.0, 8.0])).unwrap();
        driver.blas_gemm(&call(&a, &b, &c, 2, 2)).unwrap().unwrap();
        let mut out = [0u8; 16];
        driver.read(&c, 0, &mut out).unwrap();
        let got: Vec<f32> = out
            .chunks(4)
            .map(|q| f32::from_ne_bytes(q.try_into().unwrap()))
            .collect();
        assert_eq!(got, vec![23.0, 34.0, 31.0, 46.0]);
    }

    #[test]
    fn a_call_returns_while_the_queue_is_held_back() {
        use opencl3::command_queue::enqueue_barrier_with_wait_list;
        use opencl3::event::{create_user_event, release_event, set_user_event_status};
        use std::time::Duration;
        use tessera_gpu::Driver;
        let Some(driver) = driver_with_clblast() else {
            return;
        };
        let (a, b, c) = (
            driver.allocate(24).unwrap(),
            driver.allocate(16).unwrap(),
            driver.allocate(16).unwrap(),
        );
        // The first call builds CLBlast's kernels (on the host, once per process and device).
        driver.blas_gemm(&call(&a, &b, &c, 2, 2)).unwrap().unwrap();
        driver.synchronize().unwrap();
        let (queue, context) = driver.raw_queue_and_context();
        let gate = create_user_event(context).unwrap();
        // SAFETY: `queue` is the driver's live queue and `gate` a live event of its context;
        // the barrier holds back every later command until the gate opens (below, always).
        let barrier = unsafe { enqueue_barrier_with_wait_list(queue, 1, &gate) }.unwrap();
        let returned = std::thread::scope(|s| {
            let (tx, rx) = std::sync::mpsc::channel();
            let (a, b, c, driver) = (&a, &b, &c, &driver);
            s.spawn(move || {
                let outcome = driver.blas_gemm(&call(a, b, c, 2, 2));
                let _ = tx.send(outcome.map(|r| r.is_ok()));
            });
            let returned = rx.recv_timeout(Duration::from_secs(30));
            // Opens the gate whatever happened, so that a waiting CLBlast returns too.
            set_user_event_status(gate, opencl3::event::CL_COMPLETE).unwrap();
            returned
        });
        driver.synchronize().unwrap();
        // SAFETY: both events were created above and are released once, after the queue
        // drained.
        unsafe {
            release_event(barrier).unwrap();
            release_event(gate).unwrap();
        }
        assert_eq!(
            returned,
            Ok(Some(true)),
            "CLBlast did not return while the queue was held back (it waits for the device)"
        );
    }

    #[test]
    fn clblast_statuses_become_typed_backend_errors() {
        use tessera_gpu::Driver;
        let Some(driver) = driver_with_clblast() else {
            return;
        };
        let (a, b, c) = (
            driver.allocate(16).unwrap(),
            driver.allocate(16).unwrap(),
            driver.allocate(16).unwrap(),
        );
        // A leading dimension below the rows, then an A that does not fit its buffer: CLBlast
        // refuses both before enqueueing anything.
        for (lda, offset, status) in [
            (1, 0, "CLBlastInvalidLeadDimA"),
            (2, 3, "CLBlastInsufficientMemoryA"),
        ] {
            let err = driver
                .blas_gemm(&call(&a, &b, &c, lda, offset))
                .unwrap()
                .unwrap_err();
            assert!(
                matches!(&err, Error::Backend { backend: "opencl", op: "matmul", msg }
                    if msg.starts_with("CLBlastSgemmStridedBatched returned") && msg.contains(status)),
                "{err}"
            );
        }
        driver.synchronize().unwrap();
    }
}
