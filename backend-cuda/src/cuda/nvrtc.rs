//! NVRTC, NVIDIA's run-time CUDA C++ compiler, loaded at run time ([`crate::dynamic_library`]):
//! the handful of functions that create a program, compile it, fetch PTX or a cubin, and fetch
//! the log.
//!
//! Found by [`crate::dynamic_library`]: `TESSERA_NVRTC_LIBRARY`, the loader path, the CUDA
//! toolkit, or PyPI's `nvidia-cuda-nvrtc-cu12` wheel.

use crate::dynamic_library::{DynamicLibrary, LibrarySpec};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::fmt;
use std::path::Path;
use std::ptr;
use std::sync::OnceLock;

/// Where NVRTC is searched for.
pub(crate) const NVRTC_LIBRARY: LibrarySpec = LibrarySpec {
    env_var: "TESSERA_NVRTC_LIBRARY",
    file_names: &[
        "libnvrtc.so.13",
        "libnvrtc.so.12",
        "libnvrtc.so.11.2",
        "libnvrtc.so",
    ],
    wheel_dir: "nvidia/cuda_nvrtc/lib",
};

type Program = *mut c_void;
type CreateProgramFn = unsafe extern "C" fn(
    *mut Program,
    *const c_char,
    *const c_char,
    c_int,
    *const *const c_char,
    *const *const c_char,
) -> c_int;
type CompileProgramFn = unsafe extern "C" fn(Program, c_int, *const *const c_char) -> c_int;
type GetSizeFn = unsafe extern "C" fn(Program, *mut usize) -> c_int;
type GetBytesFn = unsafe extern "C" fn(Program, *mut c_char) -> c_int;
type DestroyProgramFn = unsafe extern "C" fn(*mut Program) -> c_int;
type GetErrorStringFn = unsafe extern "C" fn(c_int) -> *const c_char;
type VersionFn = unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int;

/// What a compilation produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvrtcOutput {
    /// PTX text for a virtual architecture (`--gpu-architecture=compute_XY`).
    Ptx,
    /// A cubin for a real architecture (`--gpu-architecture=sm_XY`).
    Cubin,
}

/// A failed compilation: NVRTC's status and its log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NvrtcError {
    /// The failing call and NVRTC's error string.
    pub message: String,
    /// The compiler's log (diagnostics with line numbers), possibly empty.
    pub log: String,
}

impl fmt::Display for NvrtcError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.log.trim().is_empty() {
            write!(f, "{}", self.message)
        } else {
            write!(f, "{}; log:\n{}", self.message, self.log.trim_end())
        }
    }
}

/// The loaded library and its functions.
pub struct Nvrtc {
    create_program: CreateProgramFn,
    compile_program: CompileProgramFn,
    get_ptx_size: GetSizeFn,
    get_ptx: GetBytesFn,
    get_cubin_size: GetSizeFn,
    get_cubin: GetBytesFn,
    get_log_size: GetSizeFn,
    get_log: GetBytesFn,
    destroy_program: DestroyProgramFn,
    get_error_string: GetErrorStringFn,
    version: (i32, i32),
    // Keeps the functions above valid; never unloaded before them (dropped last).
    library: DynamicLibrary,
}

impl fmt::Debug for Nvrtc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Nvrtc")
            .field("version", &self.version)
            .field("path", &self.library.path())
            .finish()
    }
}

impl Nvrtc {
    /// The process-wide NVRTC, loaded on first use; the error says where it was searched.
    pub fn get() -> Result<&'static Nvrtc, String> {
        static NVRTC: OnceLock<Result<Nvrtc, String>> = OnceLock::new();
        NVRTC
            .get_or_init(Nvrtc::load)
            .as_ref()
            .map_err(Clone::clone)
    }

    fn load() -> Result<Nvrtc, String> {
        // SAFETY: NVRTC's initialisers have no preconditions.
        let library = unsafe { DynamicLibrary::load(&NVRTC_LIBRARY) }?;
        // SAFETY: every type below is the signature of the function of the same name in
        // NVIDIA's nvrtc.h (nvrtcProgram is an opaque pointer, nvrtcResult an int); the
        // pointers live in `Nvrtc` beside the library, which outlives them.
        unsafe {
            let version_fn: VersionFn = library.symbol("nvrtcVersion")?;
            let (mut major, mut minor) = (0, 0);
            version_fn(&mut major, &mut minor);
            Ok(Nvrtc {
                create_program: library.symbol("nvrtcCreateProgram")?,
                compile_program: library.symbol("nvrtcCompileProgram")?,
                get_ptx_size: library.symbol("nvrtcGetPTXSize")?,
                get_ptx: library.symbol("nvrtcGetPTX")?,
                get_cubin_size: library.symbol("nvrtcGetCUBINSize")?,
                get_cubin: library.symbol("nvrtcGetCUBIN")?,
                get_log_size: library.symbol("nvrtcGetProgramLogSize")?,
                get_log: library.symbol("nvrtcGetProgramLog")?,
                destroy_program: library.symbol("nvrtcDestroyProgram")?,
                get_error_string: library.symbol("nvrtcGetErrorString")?,
                version: (major, minor),
                library,
            })
        }
    }

    /// NVRTC's version `(major, minor)`.
    pub fn version(&self) -> (i32, i32) {
        self.version
    }

    /// The library file (or bare name) that was loaded.
    pub fn path(&self) -> &Path {
        self.library.path()
    }

    fn error_string(&self, code: c_int) -> String {
        // SAFETY: nvrtcGetErrorString returns a static NUL-terminated string for any code.
        let text = unsafe { (self.get_error_string)(code) };
        if text.is_null() {
            return format!("NVRTC error {code}");
        }
        // SAFETY: non-null, NUL-terminated and static (see above).
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }

    /// Compiles `source` (named `name` in diagnostics) with `options` and returns the PTX (NUL
    /// excluded) or the cubin.
    pub fn compile(
        &self,
        source: &str,
        name: &str,
        options: &[String],
        output: NvrtcOutput,
    ) -> Result<Vec<u8>, NvrtcError> {
        let plain = |message: String| NvrtcError {
            message,
            log: String::new(),
        };
        let source_c = CString::new(source).map_err(|e| plain(format!("source: {e}")))?;
        let name_c = CString::new(name).map_err(|e| plain(format!("name: {e}")))?;
        let options_c: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()
            .map_err(|e| plain(format!("option: {e}")))?;
        let option_ptrs: Vec<*const c_char> = options_c.iter().map(|o| o.as_ptr()).collect();
        let mut program: Program = ptr::null_mut();
        // SAFETY: `program` receives a new handle; the strings are NUL-terminated and live until
        // the call returns (NVRTC copies them); no headers are passed.
        let code = unsafe {
            (self.create_program)(
                &mut program,
                source_c.as_ptr(),
                name_c.as_ptr(),
                0,
                ptr::null(),
                ptr::null(),
            )
        };
        if code != 0 {
            return Err(plain(format!(
                "nvrtcCreateProgram: {}",
                self.error_string(code)
            )));
        }
        let guard = ProgramGuard {
            nvrtc: self,
            program,
        };
        // SAFETY: `program` is the live handle created above; the option pointers are valid
        // NUL-terminated strings for the duration of the call.
        let code = unsafe {
            (self.compile_program)(program, option_ptrs.len() as c_int, option_ptrs.as_ptr())
        };
        let log = guard.bytes(self.get_log_size, self.get_log).map_or_else(
            |e| format!("(log unavailable: {e})"),
            |bytes| {
                String::from_utf8_lossy(&bytes)
                    .trim_end_matches('\0')
                    .to_string()
            },
        );
        if code != 0 {
            return Err(NvrtcError {
                message: format!("nvrtcCompileProgram({name}): {}", self.error_string(code)),
                log,
            });
        }
        let (size_fn, bytes_fn, what) = match output {
            NvrtcOutput::Ptx => (self.get_ptx_size, self.get_ptx, "PTX"),
            NvrtcOutput::Cubin => (self.get_cubin_size, self.get_cubin, "cubin"),
        };
        let mut bytes = guard
            .bytes(size_fn, bytes_fn)
            .map_err(|message| NvrtcError {
                message: format!("fetching the {what} of {name}: {message}"),
                log: log.clone(),
            })?;
        if output == NvrtcOutput::Ptx {
            while bytes.last() == Some(&0) {
                bytes.pop();
            }
        }
        Ok(bytes)
    }
}

/// Destroys an NVRTC program when dropped.
struct ProgramGuard<'a> {
    nvrtc: &'a Nvrtc,
    program: Program,
}

impl ProgramGuard<'_> {
    /// Fetches a size-prefixed result (log, PTX, cubin) of the program.
    fn bytes(&self, size_fn: GetSizeFn, bytes_fn: GetBytesFn) -> Result<Vec<u8>, String> {
        let mut size = 0usize;
        // SAFETY: `program` is live; `size` is a valid out-pointer.
        let code = unsafe { size_fn(self.program, &mut size) };
        if code != 0 {
            return Err(self.nvrtc.error_string(code));
        }
        let mut buffer = vec![0u8; size.max(1)];
        // SAFETY: the buffer holds `size` bytes, the amount NVRTC reported it will write.
        let code = unsafe { bytes_fn(self.program, buffer.as_mut_ptr().cast::<c_char>()) };
        if code != 0 {
            return Err(self.nvrtc.error_string(code));
        }
        buffer.truncate(size);
        Ok(buffer)
    }
}

impl Drop for ProgramGuard<'_> {
    fn drop(&mut self) {
        // SAFETY: `program` was created by nvrtcCreateProgram and is destroyed exactly once.
        unsafe {
            (self.nvrtc.destroy_program)(&mut self.program);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compile_error_carries_nvrtc_s_log() {
        let nvrtc = match Nvrtc::get() {
            Ok(nvrtc) => nvrtc,
            Err(reason) => {
                eprintln!("skipped: NVRTC is not available ({reason})");
                return;
            }
        };
        let err = nvrtc
            .compile(
                "extern \"C\" __global__ void broken(int* x) { x[0] = undeclared; }",
                "broken.cu",
                &["--gpu-architecture=compute_80".to_string()],
                NvrtcOutput::Ptx,
            )
            .unwrap_err();
        assert!(
            err.message.contains("nvrtcCompileProgram(broken.cu)"),
            "{err}"
        );
        assert!(err.log.contains("undeclared"), "{err}");
        assert!(err.to_string().contains("log:"), "{err}");
    }
}
