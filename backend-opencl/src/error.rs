//! Turning OpenCL status codes into Tessera's typed [`Error`].

use opencl3::error_codes::{
    ClError, CL_INVALID_BUFFER_SIZE, CL_MEM_OBJECT_ALLOCATION_FAILURE, CL_OUT_OF_HOST_MEMORY,
    CL_OUT_OF_RESOURCES, CL_PLATFORM_NOT_FOUND_KHR, DLOPEN_FUNCTION_NOT_AVAILABLE,
    DLOPEN_RUNTIME_LOAD_FAILED,
};
use tessera_core::Error;

/// The backend name used in errors.
pub(crate) const BACKEND: &str = "opencl";

/// What to install when no OpenCL runtime or device is found.
pub const INSTALL_HINT: &str = "install an OpenCL driver; on Debian or Ubuntu: \
     `apt-get install ocl-icd-libopencl1 pocl-opencl-icd` (PoCL runs OpenCL on the CPU)";

/// An [`Error::NoDevice`] with `reason` and the install hint.
pub(crate) fn no_device(reason: impl Into<String>) -> Error {
    Error::NoDevice {
        backend: BACKEND,
        reason: format!("{}; {INSTALL_HINT}", reason.into()),
    }
}

/// Maps a failed OpenCL call made by `op` to an error: a missing loader or platform becomes
/// [`Error::NoDevice`], an allocation failure [`Error::OutOfMemory`] when `bytes` is known, and
/// anything else [`Error::Backend`] naming the status.
pub(crate) fn cl_error(op: &'static str, code: i32, bytes: Option<usize>) -> Error {
    cl_error_as(BACKEND, op, code, bytes)
}

/// [`cl_error`] for a driver that describes itself as `backend` (an emulated device, see
/// `crate::testing`): its driver errors and out-of-memory errors carry that name; a missing
/// OpenCL runtime is still OpenCL's [`Error::NoDevice`].
pub(crate) fn cl_error_as(
    backend: &'static str,
    op: &'static str,
    code: i32,
    bytes: Option<usize>,
) -> Error {
    match code {
        DLOPEN_RUNTIME_LOAD_FAILED => {
            no_device("the OpenCL loader library (libOpenCL.so.1) could not be loaded")
        }
        DLOPEN_FUNCTION_NOT_AVAILABLE => Error::Backend {
            backend,
            op,
            msg: "the installed OpenCL loader lacks a function this backend needs (OpenCL 1.2)"
                .into(),
        },
        CL_PLATFORM_NOT_FOUND_KHR => no_device("no OpenCL platform is installed"),
        CL_MEM_OBJECT_ALLOCATION_FAILURE
        | CL_OUT_OF_RESOURCES
        | CL_OUT_OF_HOST_MEMORY
        | CL_INVALID_BUFFER_SIZE
            if bytes.is_some() =>
        {
            Error::OutOfMemory {
                device: backend.into(),
                requested_bytes: bytes.unwrap_or(0),
            }
        }
        _ => Error::Backend {
            backend,
            op,
            msg: format!("OpenCL call failed with {} ({code})", ClError(code)),
        },
    }
}

/// Shorthand: `map_err` adapter for opencl3 calls that return [`ClError`].
pub(crate) fn cl(op: &'static str) -> impl Fn(ClError) -> Error {
    move |e| cl_error(op, e.0, None)
}

/// An [`Error::Backend`] with a free-form message.
pub(crate) fn backend_error(op: &'static str, msg: impl Into<String>) -> Error {
    backend_error_as(BACKEND, op, msg)
}

/// [`backend_error`] for a driver that describes itself as `backend`.
pub(crate) fn backend_error_as(
    backend: &'static str,
    op: &'static str,
    msg: impl Into<String>,
) -> Error {
    Error::Backend {
        backend,
        op,
        msg: msg.into(),
    }
}
