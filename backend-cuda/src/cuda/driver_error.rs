//! Turning CUDA driver status codes into Tessera's typed [`Error`].

use cust::sys::{cuGetErrorName, cuGetErrorString, cudaError_enum, CUresult};
use std::ffi::{c_char, CStr};
use tessera_core::Error;

/// The backend name used in errors and devices.
pub(crate) const BACKEND: &str = "cuda";

/// How to get a working CUDA setup, appended to [`Error::NoDevice`].
pub const INSTALL_HINT: &str = "install the NVIDIA driver (it provides libcuda.so.1) on a \
     machine with an NVIDIA GPU; kernels also need NVRTC (the CUDA toolkit or `pip install \
     nvidia-cuda-nvrtc-cu12`) or a folder of precompiled kernels named by TESSERA_CUDA_KERNELS";

/// `CUDA_ERROR_NAME: description` for a status code, from the driver itself.
pub(crate) fn describe(code: CUresult) -> String {
    let read = |f: unsafe extern "C" fn(CUresult, *mut *const c_char) -> CUresult| {
        let mut text: *const c_char = std::ptr::null();
        // SAFETY: `text` is a valid out-pointer; on success the driver stores a pointer to a
        // static NUL-terminated string (or leaves it null).
        let status = unsafe { f(code, &mut text) };
        if status != cudaError_enum::CUDA_SUCCESS || text.is_null() {
            return None;
        }
        // SAFETY: non-null and NUL-terminated, owned by the driver for the process lifetime.
        Some(
            unsafe { CStr::from_ptr(text) }
                .to_string_lossy()
                .into_owned(),
        )
    };
    let name = read(cuGetErrorName).unwrap_or_else(|| format!("CUDA error {}", code as i32));
    match read(cuGetErrorString) {
        Some(text) => format!("{name}: {text}"),
        None => name,
    }
}

/// Whether `code` means that there is no usable driver or device.
fn means_no_device(code: CUresult) -> bool {
    matches!(
        code,
        cudaError_enum::CUDA_ERROR_NO_DEVICE
            | cudaError_enum::CUDA_ERROR_INVALID_DEVICE
            | cudaError_enum::CUDA_ERROR_STUB_LIBRARY
            | cudaError_enum::CUDA_ERROR_NOT_INITIALIZED
            | cudaError_enum::CUDA_ERROR_SYSTEM_DRIVER_MISMATCH
            | cudaError_enum::CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE
    )
}

/// `Ok` for `CUDA_SUCCESS`, else the error of `op`: [`Error::NoDevice`] when the driver or
/// device is missing, [`Error::Backend`] naming the status otherwise.
pub(crate) fn check(op: &'static str, code: CUresult) -> tessera_core::Result<()> {
    if code == cudaError_enum::CUDA_SUCCESS {
        return Ok(());
    }
    if means_no_device(code) {
        return Err(no_device(describe(code)));
    }
    Err(Error::Backend {
        backend: BACKEND,
        op,
        msg: describe(code),
    })
}

/// An [`Error::NoDevice`] with `reason` and the install hint.
pub(crate) fn no_device(reason: impl Into<String>) -> Error {
    Error::NoDevice {
        backend: BACKEND,
        reason: format!("{}; {INSTALL_HINT}", reason.into()),
    }
}

/// An [`Error::Backend`] with a free-form message.
pub(crate) fn backend_error(op: &'static str, msg: impl Into<String>) -> Error {
    Error::Backend {
        backend: BACKEND,
        op,
        msg: msg.into(),
    }
}
