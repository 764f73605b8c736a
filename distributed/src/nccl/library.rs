//! NCCL loaded at run time: the functions Tessera calls, looked up in `libnccl.so.2` with
//! `tessera_cuda::dynamic_library` (the way `tessera-cuda` loads cuBLAS), so that nothing links
//! NCCL at build time. Without the library everything builds and [`NcclLibrary::load`] says
//! where it looked.

use super::cuda_interop::{DynamicLibrary, LibrarySpec};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;
use std::path::Path;

/// Environment variable naming the NCCL library file to load.
pub const NCCL_LIBRARY_ENV_VAR: &str = "TESSERA_NCCL_LIBRARY";

/// Where NCCL is searched for: the file names, newest first, and where PyPI's
/// `nvidia-nccl-cu12` puts the library under site-packages.
const NCCL_LIBRARY: LibrarySpec = LibrarySpec {
    env_var: NCCL_LIBRARY_ENV_VAR,
    file_names: &["libnccl.so.2", "libnccl.so"],
    wheel_dir: "nvidia/nccl/lib",
};

/// `ncclComm_t`: an opaque communicator handle.
pub type RawComm = *mut c_void;

/// `ncclUniqueId`: the 128 bytes rank 0 makes and every rank needs to join the communicator.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct UniqueId {
    /// The opaque bytes.
    pub internal: [u8; 128],
}

/// `ncclResult_t` `ncclSuccess`.
pub const SUCCESS: c_int = 0;
/// `ncclResult_t` `ncclInProgress` (a non-blocking operation has not finished).
pub const IN_PROGRESS: c_int = 7;

/// `ncclDataType_t` values.
pub mod data_type {
    use std::ffi::c_int;
    /// `ncclUint8`.
    pub const UINT8: c_int = 1;
    /// `ncclInt64`.
    pub const INT64: c_int = 4;
    /// `ncclFloat16` (`ncclHalf`).
    pub const FLOAT16: c_int = 6;
    /// `ncclFloat32`.
    pub const FLOAT32: c_int = 7;
    /// `ncclFloat64`.
    pub const FLOAT64: c_int = 8;
    /// `ncclBfloat16` (NCCL 2.10 and later: [`BFLOAT16_SINCE`]).
    pub const BFLOAT16: c_int = 9;
    /// The first NCCL version with `ncclBfloat16`, as `NcclLibrary::version` writes it.
    pub const BFLOAT16_SINCE: i32 = 2_10_00;
}

/// `ncclRedOp_t` values.
pub mod red_op {
    use std::ffi::c_int;
    /// `ncclSum`.
    pub const SUM: c_int = 0;
    /// `ncclMax`.
    pub const MAX: c_int = 2;
    /// `ncclMin`.
    pub const MIN: c_int = 3;
}

pub(crate) type GetVersionFn = unsafe extern "C" fn(*mut c_int) -> c_int;
pub(crate) type GetUniqueIdFn = unsafe extern "C" fn(*mut UniqueId) -> c_int;
pub(crate) type CommInitRankFn =
    unsafe extern "C" fn(*mut RawComm, c_int, UniqueId, c_int) -> c_int;
pub(crate) type CommFn = unsafe extern "C" fn(RawComm) -> c_int;
pub(crate) type CommIntFn = unsafe extern "C" fn(RawComm, *mut c_int) -> c_int;
pub(crate) type CollectiveFn = unsafe extern "C" fn(
    *const c_void,
    *mut c_void,
    usize,
    c_int,
    c_int,
    RawComm,
    *mut c_void,
) -> c_int;
/// `ncclAllGather(send, recv, sendcount, datatype, comm, stream)`.
pub(crate) type AllGatherFn =
    unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, RawComm, *mut c_void) -> c_int;
pub(crate) type GetErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
pub(crate) type GetLastErrorFn = unsafe extern "C" fn(RawComm) -> *const c_char;

/// The loaded library and the functions Tessera calls (`nccl.h`'s signatures).
pub struct NcclLibrary {
    /// `ncclGetVersion(int*)`.
    pub(crate) get_version: GetVersionFn,
    /// `ncclGetUniqueId(ncclUniqueId*)`.
    pub(crate) get_unique_id: GetUniqueIdFn,
    /// `ncclCommInitRank(ncclComm_t*, int nranks, ncclUniqueId, int rank)`.
    pub(crate) comm_init_rank: CommInitRankFn,
    /// `ncclCommDestroy(ncclComm_t)`.
    pub(crate) comm_destroy: CommFn,
    /// `ncclCommAbort(ncclComm_t)`.
    pub(crate) comm_abort: CommFn,
    /// `ncclCommGetAsyncError(ncclComm_t, ncclResult_t*)`.
    pub(crate) comm_get_async_error: CommIntFn,
    /// `ncclCommCount(ncclComm_t, int*)`.
    pub(crate) comm_count: CommIntFn,
    /// `ncclCommUserRank(ncclComm_t, int*)`.
    pub(crate) comm_user_rank: CommIntFn,
    /// `ncclCommCuDevice(ncclComm_t, int*)`.
    pub(crate) comm_cu_device: CommIntFn,
    /// `ncclAllReduce(send, recv, count, datatype, op, comm, stream)`.
    pub(crate) all_reduce: CollectiveFn,
    /// `ncclBroadcast(send, recv, count, datatype, root, comm, stream)`.
    pub(crate) broadcast: CollectiveFn,
    /// `ncclReduceScatter(send, recv, recvcount, datatype, op, comm, stream)`.
    pub(crate) reduce_scatter: CollectiveFn,
    /// `ncclAllGather(send, recv, sendcount, datatype, comm, stream)`.
    pub(crate) all_gather: AllGatherFn,
    /// `ncclGetErrorString(ncclResult_t)`.
    pub(crate) get_error_string: GetErrorStringFn,
    /// `ncclGetLastError(ncclComm_t)`.
    pub(crate) get_last_error: GetLastErrorFn,
    // Keeps the function pointers above valid (dropped after them).
    library: DynamicLibrary,
}

impl fmt::Debug for NcclLibrary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NcclLibrary")
            .field("path", &self.library.path())
            .finish()
    }
}

impl NcclLibrary {
    /// Loads NCCL: `$TESSERA_NCCL_LIBRARY`, the loader's search for `libnccl.so.2`, the CUDA
    /// toolkit, then PyPI's `nvidia-nccl-cu12` wheel; resolves every function. Needs no GPU.
    pub fn load() -> Result<NcclLibrary, String> {
        // SAFETY: NCCL's initialisers have no preconditions (no GPU is touched by loading).
        let library = unsafe { DynamicLibrary::load(&NCCL_LIBRARY) }
            .map_err(|e| format!("{e} (pip install nvidia-nccl-cu12 provides it)"))?;
        // SAFETY: every type is the function's signature in nccl.h (handles and streams are
        // opaque pointers, enums and results ints, counts size_t; ncclUniqueId is a 128-byte
        // struct passed by value); the pointers live in `NcclLibrary` beside the library, which
        // outlives them.
        unsafe {
            Ok(NcclLibrary {
                get_version: library.symbol("ncclGetVersion")?,
                get_unique_id: library.symbol("ncclGetUniqueId")?,
                comm_init_rank: library.symbol("ncclCommInitRank")?,
                comm_destroy: library.symbol("ncclCommDestroy")?,
                comm_abort: library.symbol("ncclCommAbort")?,
                comm_get_async_error: library.symbol("ncclCommGetAsyncError")?,
                comm_count: library.symbol("ncclCommCount")?,
                comm_user_rank: library.symbol("ncclCommUserRank")?,
                comm_cu_device: library.symbol("ncclCommCuDevice")?,
                all_reduce: library.symbol("ncclAllReduce")?,
                broadcast: library.symbol("ncclBroadcast")?,
                reduce_scatter: library.symbol("ncclReduceScatter")?,
                all_gather: library.symbol("ncclAllGather")?,
                get_error_string: library.symbol("ncclGetErrorString")?,
                get_last_error: library.symbol("ncclGetLastError")?,
                library,
            })
        }
    }

    /// The file that was loaded.
    pub fn path(&self) -> &Path {
        self.library.path()
    }

    /// NCCL's version as `major * 10000 + minor * 100 + patch` (e.g. 22303 for 2.23.3).
    pub fn version(&self) -> Result<i32, String> {
        let mut version: c_int = 0;
        // SAFETY: `version` is a valid out-pointer; the call needs no GPU or communicator.
        let rc = unsafe { (self.get_version)(&mut version) };
        if rc != SUCCESS {
            return Err(self.error_string(rc));
        }
        Ok(version)
    }

    /// NCCL's name for a result code.
    pub fn error_string(&self, result: c_int) -> String {
        // SAFETY: ncclGetErrorString returns a static NUL-terminated string for any value.
        let text = unsafe { (self.get_error_string)(result) };
        if text.is_null() {
            return format!("NCCL result {result}");
        }
        // SAFETY: non-null, NUL-terminated and static (see above).
        let text = unsafe { CStr::from_ptr(text) }.to_string_lossy();
        format!("{text} (NCCL result {result})")
    }

    /// NCCL's description of the last error of `comm` (may be empty).
    ///
    /// # Safety
    /// `comm` must be a live communicator of this library, or null.
    pub unsafe fn last_error(&self, comm: RawComm) -> String {
        // SAFETY: the caller guarantees `comm`; the result is a NUL-terminated string owned by
        // NCCL (or null).
        let text = unsafe { (self.get_last_error)(comm) };
        if text.is_null() {
            return String::new();
        }
        // SAFETY: non-null and NUL-terminated (see above).
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}
