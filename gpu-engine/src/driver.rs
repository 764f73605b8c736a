//! [`Driver`]: the handful of raw device operations the engine needs, so that the host-side
//! logic of every op (plans, views, kernel choice, launch geometry, the error flag) is written
//! once and runs on any device that can run the shared kernels (CUDA, OpenCL).

use crate::gemm::{GemmConfig, GemmOptions};
use crate::kernels::{GemmTiles, Program};
use crate::runtime::Runtime;
use crate::view::View;
use std::fmt;
use std::sync::Arc;
use tessera_core::{DType, Error, Result};

/// A compiled program: one of the shared kernel programs for one dtype, plus extra defines
/// (the GEMM tile sizes).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModuleKey {
    /// The kernel program.
    pub program: Program,
    /// The element type it is built for.
    pub dtype: DType,
    /// Defines added after the program's own and `TS_REDUCE_WG`.
    pub extra_defines: Vec<String>,
}

impl ModuleKey {
    /// [`Program::Tensor`] for `dtype`.
    pub fn tensor(dtype: DType) -> Self {
        ModuleKey {
            program: Program::Tensor,
            dtype,
            extra_defines: Vec::new(),
        }
    }

    /// [`Program::Gemm`] for `dtype` with `tiles` (its `TS_*` tile defines).
    pub fn gemm(dtype: DType, tiles: &GemmTiles) -> Self {
        ModuleKey {
            program: Program::Gemm,
            dtype,
            extra_defines: tiles.defines(),
        }
    }

    /// Every `NAME=VALUE` define the program is built with on a device whose reductions use
    /// `reduce_group` work-items per block ([`DriverInfo::reduce_group`]).
    pub fn defines(&self, reduce_group: u32) -> Vec<String> {
        let mut defines = self.program.defines(self.dtype);
        defines.push(format!("TS_REDUCE_WG={reduce_group}"));
        defines.extend(self.extra_defines.iter().cloned());
        defines
    }

    /// A short description for messages and file names: `tensor-f32`, `gemm-f64-TS_BM=64...`.
    pub fn label(&self) -> String {
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
pub enum DriverArg<'a, B> {
    /// A device buffer. None for an empty storage: the kernel never dereferences it, and the
    /// driver passes whatever its API accepts (a null pointer, a dummy buffer).
    Buffer(Option<&'a B>),
    /// A `long`.
    I64(i64),
    /// An `ulong`.
    U64(u64),
    /// An `uint`.
    U32(u32),
    /// An `int`.
    I32(i32),
    /// A `float`.
    F32(f32),
    /// A `double`.
    F64(f64),
    /// A strided view (`ts_view` of `common.cl.c`), passed by value.
    View(View),
}

/// A launch in CUDA's terms: a grid of blocks. An OpenCL driver enqueues global size
/// `grid * block` with local size `block`.
#[derive(Clone, Debug)]
pub struct Launch<'k> {
    /// The program holding the kernel.
    pub module: &'k ModuleKey,
    /// The kernel's name.
    pub kernel: &'static str,
    /// Blocks per grid dimension.
    pub grid: [u32; 3],
    /// Work-items per block dimension.
    pub block: [u32; 3],
}

/// Which operand layout a column-major BLAS call reads (`cublasOperation_t`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlasTranspose {
    /// `CUBLAS_OP_N`: the matrix as stored, column-major.
    None,
    /// `CUBLAS_OP_T`: its transpose.
    Transpose,
}

/// One column-major operand of a strided-batched GEMM: `ld` and the batch stride are in
/// elements, `offset` is the element offset of the first matrix.
#[derive(Clone, Copy, Debug)]
pub struct BlasOperand<'a, B> {
    /// The buffer holding the matrices.
    pub buffer: &'a B,
    /// Element offset of the first matrix.
    pub offset: usize,
    /// Whether the call reads the matrix or its transpose.
    pub transpose: BlasTranspose,
    /// Leading dimension (elements between columns).
    pub ld: usize,
    /// Elements between consecutive matrices of the batch.
    pub batch_stride: usize,
}

/// `C = op(A) op(B)` for `batch` column-major matrices (`C` is `m x n`, contiguous batches of
/// `ldc * n` elements): the arguments of `cublas{S,D}gemmStridedBatched` (or
/// `cublasGemmStridedBatchedEx` for 16-bit and TF32) with alpha 1, beta 0.
#[derive(Clone, Copy, Debug)]
pub struct BlasGemm<'a, B> {
    /// The element type of A, B and C (F32, F64, F16 or BF16; a driver whose BLAS lacks one
    /// answers None and the kernel runs).
    pub dtype: DType,
    /// Whether an f32 product may use TF32 tensor cores ([`crate::GemmOptions::allow_tf32`]).
    pub allow_tf32: bool,
    /// Rows of `op(A)` and `C`.
    pub m: usize,
    /// Columns of `op(B)` and `C`.
    pub n: usize,
    /// Columns of `op(A)`, rows of `op(B)`.
    pub k: usize,
    /// The left operand.
    pub a: BlasOperand<'a, B>,
    /// The right operand.
    pub b: BlasOperand<'a, B>,
    /// The output buffer.
    pub c: &'a B,
    /// Element offset of the first output matrix.
    pub c_offset: usize,
    /// Leading dimension of `C`.
    pub ldc: usize,
    /// Elements between consecutive output matrices.
    pub c_batch_stride: usize,
    /// Number of products.
    pub batch: usize,
}

/// What a driver tells about its device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DriverInfo {
    /// The backend name of errors and devices: `"cuda"`, `"opencl"`.
    pub backend: &'static str,
    /// Device ordinal.
    pub ordinal: usize,
    /// Device name, e.g. `"NVIDIA H200"`.
    pub name: String,
    /// Streaming multiprocessors (compute units).
    pub compute_units: usize,
    /// Global memory in bytes.
    pub memory_bytes: u64,
    /// Largest single buffer the device allocates, in bytes (OpenCL's
    /// `CL_DEVICE_MAX_MEM_ALLOC_SIZE`; CUDA: the device's memory). A larger request is
    /// [`tessera_core::Error::OutOfMemory`] without asking the driver.
    pub max_buffer_bytes: u64,
    /// Most bytes of free buffers the pool keeps for reuse (`usize::MAX`: no limit, like
    /// PyTorch's caching allocator); buffers freed beyond it go back to the device at the next
    /// synchronisation.
    pub pool_limit_bytes: usize,
    /// Whether the device computes in f64 (otherwise every f64 op is
    /// [`tessera_core::Error::UnsupportedDType`]).
    pub supports_f64: bool,
    /// Work-items per block of one-dimensional element-wise launches.
    pub launch_group: u32,
    /// Work-items per block of tree reductions and fused softmax (`TS_REDUCE_WG`): a power of
    /// two the device accepts as a block size.
    pub reduce_group: u32,
    /// Most blocks along a launch's third dimension (CUDA: 65 535); the engine splits longer
    /// batches into several launches.
    pub max_grid_z: usize,
}

impl fmt::Display for DriverInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{} ({})", self.backend, self.ordinal, self.name)
    }
}

/// The raw device operations: what a vendor implements to run every Tessera op on a GPU-like
/// device (see the crate documentation). Every command goes to one in-order stream (queue);
/// only [`Driver::read`] and [`Driver::synchronize`] wait for the device. Kernels are the shared
/// sources of [`crate::kernels`], built by the driver for each [`ModuleKey`].
pub trait Driver: Send + Sync + Sized + 'static {
    /// One device allocation.
    type Buffer: Send + Sync + fmt::Debug;

    /// The device's description.
    fn info(&self) -> &DriverInfo;

    /// A new device allocation of exactly `bytes` bytes (> 0, at most
    /// [`DriverInfo::max_buffer_bytes`]) with undefined contents. The engine's buffer pool calls
    /// it (drivers keep no cache of their own): a device out of memory must answer
    /// [`tessera_core::Error::OutOfMemory`], after which the pool frees its cache and asks once
    /// more; any other failure is returned as it is.
    fn allocate(&self, bytes: usize) -> Result<Self::Buffer>;

    /// Gives a buffer from [`Driver::allocate`] back to the device. The engine calls it only
    /// once no queued work can use the buffer any more (after a synchronisation).
    fn free(&self, buffer: Self::Buffer);

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

    /// Queues a vendor BLAS GEMM, or returns `None` when the driver has no BLAS library or none
    /// for this call's dtype (the engine then runs its kernel). A driver may honour
    /// [`BlasGemm::allow_tf32`] for f32 or ignore it (full f32 is always allowed).
    fn blas_gemm(&self, call: &BlasGemm<'_, Self::Buffer>) -> Option<Result<()>>;

    /// Why [`Driver::blas_gemm`] is unavailable (None when it is available).
    fn blas_unavailable(&self) -> Option<String>;

    /// Whether [`crate::GemmEngine::Auto`] tries the BLAS first on this device (default yes).
    /// A driver answers no where its own kernel measured faster than the library (OpenCL on
    /// CPU devices, where CLBlast has no tuned parameters); [`crate::GemmEngine::Blas`] still
    /// asks the BLAS.
    fn blas_by_default(&self) -> bool {
        true
    }

    /// Kernel modules (programs) compiled or loaded so far, for
    /// [`crate::RuntimeStats::modules_built`].
    fn modules_built(&self) -> u64;

    /// Errors unless matrix products with `options` can run on this device. The default
    /// accepts any valid tile configuration ([`crate::kernels::GemmTiles::is_valid`]); CUDA
    /// also bounds the threads and shared memory of a block.
    fn check_gemm_options(&self, options: &GemmOptions) -> Result<()> {
        let tiles = &options.config.tiles;
        if tiles.is_valid() {
            Ok(())
        } else {
            Err(Error::InvalidArgument {
                op: "gemm options",
                msg: format!("{tiles:?} needs positive sizes with tm | bm and tn | bn"),
            })
        }
    }

    /// The GEMM kernel and tiles matrix products of `dtype` use on this device, given the
    /// handle's request. The default keeps the request; a driver that tunes its tiles (timing
    /// candidates through `rt`, see [`crate::tuning`]) answers with its own choice.
    fn gemm_config(
        rt: &Arc<Runtime<Self>>,
        dtype: DType,
        requested: GemmConfig,
    ) -> Result<GemmConfig> {
        let _ = (rt, dtype);
        Ok(requested)
    }
}
