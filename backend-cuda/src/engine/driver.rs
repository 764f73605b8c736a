//! [`Driver`]: the handful of device operations the engine needs, so that the host-side logic
//! of every op (plans, views, kernel choice, launch geometry, the error flag) is written once and
//! runs on CUDA, and, in this crate's own tests, on an OpenCL device (PoCL on a CPU), which is
//! how that logic is checked on machines without an NVIDIA GPU.

use crate::engine::view::View;
use std::fmt;
use tensor_core::kernels::Program;
use tensor_core::{DType, Result};

/// Work-items per block of tree reductions and fused softmax (`TS_REDUCE_WG`): a power of two
/// that every CUDA GPU (and PoCL) accepts as a block size.
pub(crate) const REDUCE_GROUP: u32 = 256;

/// Work-items per block of one-dimensional element-wise launches.
pub(crate) const LAUNCH_GROUP: u32 = 256;

/// A compiled program: one of the shared kernel programs for one dtype, plus extra defines
/// (the GEMM tile sizes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct ModuleKey {
    /// The kernel program.
    pub(crate) program: Program,
    /// The element type it is built for.
    pub(crate) dtype: DType,
    /// Defines added after the program's own and `TS_REDUCE_WG`.
    pub(crate) extra_defines: Vec<String>,
}

impl ModuleKey {
    /// [`Program::Tensor`] for `dtype`.
    pub(crate) fn tensor(dtype: DType) -> Self {
        ModuleKey {
            program: Program::Tensor,
            dtype,
            extra_defines: Vec::new(),
        }
    }

    /// Every `NAME=VALUE` define the program is built with.
    pub(crate) fn defines(&self) -> Vec<String> {
        let mut defines = self.program.defines(self.dtype);
        defines.push(format!("TS_REDUCE_WG={REDUCE_GROUP}"));
        defines.extend(self.extra_defines.iter().cloned());
        defines
    }

    /// A short description for messages and file names: `tensor-f32`, `gemm-f64-TS_BM=64...`.
    pub(crate) fn label(&self) -> String {
        let mut label = format!("{}-{}", self.program.name(), self.dtype);
        for d in &self.extra_defines {
            label.push('-');
            label.push_str(d);
        }
        label
    }
}

/// One kernel argument as the driver passes it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum DriverArg<'a, B> {
    /// A device buffer (None: an empty storage, passed as a null pointer never dereferenced).
    Buffer(Option<&'a B>),
    I64(i64),
    U64(u64),
    U32(u32),
    I32(i32),
    F32(f32),
    F64(f64),
    View(View),
}

/// A launch: CUDA's grid of blocks (OpenCL: global size = grid * block, local size = block).
#[derive(Clone, Debug)]
pub(crate) struct Launch<'k> {
    /// The program holding the kernel.
    pub(crate) module: &'k ModuleKey,
    /// The kernel's name.
    pub(crate) kernel: &'static str,
    /// Blocks per grid dimension.
    pub(crate) grid: [u32; 3],
    /// Work-items per block dimension.
    pub(crate) block: [u32; 3],
}

/// Which operand layout a column-major BLAS call reads (`cublasOperation_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BlasTranspose {
    /// `CUBLAS_OP_N`: the matrix as stored, column-major.
    None,
    /// `CUBLAS_OP_T`: its transpose.
    Transpose,
}

/// One column-major operand of a strided-batched GEMM: `ld` and the batch stride are in
/// elements, `offset` is the element offset of the first matrix.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlasOperand<'a, B> {
    pub(crate) buffer: &'a B,
    pub(crate) offset: usize,
    pub(crate) transpose: BlasTranspose,
    pub(crate) ld: usize,
    pub(crate) batch_stride: usize,
}

/// `C = op(A) op(B)` for `batch` column-major matrices (`C` is `m x n`, contiguous batches of
/// `ldc * n` elements): the arguments of `cublas{S,D}gemmStridedBatched` with alpha 1, beta 0.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BlasGemm<'a, B> {
    pub(crate) dtype: DType,
    pub(crate) m: usize,
    pub(crate) n: usize,
    pub(crate) k: usize,
    pub(crate) a: BlasOperand<'a, B>,
    pub(crate) b: BlasOperand<'a, B>,
    pub(crate) c: &'a B,
    pub(crate) c_offset: usize,
    pub(crate) ldc: usize,
    pub(crate) c_batch_stride: usize,
    pub(crate) batch: usize,
}

/// What a driver tells about its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DriverInfo {
    /// `"cuda"` (the backend name of errors and devices).
    pub(crate) backend: &'static str,
    /// Device ordinal.
    pub(crate) ordinal: usize,
    /// Device name, e.g. `"NVIDIA H200"`.
    pub(crate) name: String,
    /// Streaming multiprocessors (compute units).
    pub(crate) compute_units: usize,
    /// Global memory in bytes.
    pub(crate) memory_bytes: u64,
}

impl fmt::Display for DriverInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} ({})", self.backend, self.ordinal, self.name)
    }
}

/// The raw device operations. Every command goes to one in-order stream; only
/// [`Driver::read`] and [`Driver::synchronize`] wait for the device.
pub(crate) trait Driver: Send + Sync + Sized + 'static {
    /// One device allocation.
    type Buffer: Send + Sync + fmt::Debug;

    /// The device's description.
    fn info(&self) -> &DriverInfo;

    /// `bytes` (> 0) bytes of device memory with undefined contents, and whether they were
    /// reused from a cache. Out of memory (after freeing any cache) is
    /// [`tensor_core::Error::OutOfMemory`].
    fn alloc(&self, bytes: usize) -> Result<(Self::Buffer, bool)>;

    /// Gives back a buffer no longer referenced by the host. Work already queued that uses it
    /// may still be pending: a driver reuses it only for work queued later on the same stream.
    fn release(&self, buffer: Self::Buffer);

    /// Copies `src` to the start of `dst`; the host memory may be reused as soon as this returns.
    fn write(&self, dst: &Self::Buffer, src: &[u8]) -> Result<()>;

    /// Waits for all queued work, then copies `dst.len()` bytes from `byte_offset` of `src`.
    fn read(&self, src: &Self::Buffer, byte_offset: usize, dst: &mut [u8]) -> Result<()>;

    /// Fills the first `bytes` bytes of `dst` (a multiple of the pattern's size: 1, 4 or 8)
    /// with copies of `pattern`.
    fn fill(&self, dst: &Self::Buffer, pattern: &[u8], bytes: usize) -> Result<()>;

    /// Queues a kernel launch; `args` match the kernel's parameters in order and type.
    fn launch(&self, launch: &Launch<'_>, args: &[DriverArg<'_, Self::Buffer>]) -> Result<()>;

    /// Waits for all queued work.
    fn synchronize(&self) -> Result<()>;

    /// Queues a vendor BLAS GEMM, or returns `None` when the driver has no BLAS library.
    fn blas_gemm(&self, call: &BlasGemm<'_, Self::Buffer>) -> Option<Result<()>>;

    /// Why [`Driver::blas_gemm`] is unavailable (None when it is available).
    fn blas_unavailable(&self) -> Option<String>;
}
