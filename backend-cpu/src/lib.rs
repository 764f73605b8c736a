//! # backend-cpu
//!
//! Tessera's CPU backend, [`Cpu`]: the reference every other backend is checked against, and a
//! fast one.
//!
//! * **Element-wise ops, casts and copies** walk arbitrary strided layouts through a small
//!   strided-iteration engine (`strided`): dimensions that are jointly contiguous across all
//!   operands are merged, size-1 dimensions dropped, and the innermost run is processed by a
//!   monomorphised loop per op (contiguous slices, broadcast scalars or stepped access).
//! * **Reductions** split kept and reduced axes into two plans and pick a slice, row-wise or
//!   strided inner loop; f32 sums are pairwise (see `kernels::reducer`).
//! * **Matrix products** run one strided GEMM per batch element: BLIS-style blocking and
//!   packing around AVX-512 or AVX2+FMA micro-kernels chosen at run time, a GEMV for one row
//!   or column, and `matrixmultiply` as the portable path ([`GEMM_ENV_VAR`] chooses). bf16
//!   products (2-D and batched) run on AMX tiles where the CPU and kernel give them
//!   (`kernels::gemm_amx`), else on a `vdpbf16ps` kernel on CPUs with AVX-512 BF16
//!   (`kernels::gemm_bf16`; [`BF16_GEMM_ENV_VAR`] chooses); every other 16-bit op widens to
//!   f32.
//! * **Parallelism**: outputs above 32768 elements are split across `rayon`'s pool; below that
//!   everything runs on the calling thread. A training program makes its own thread one of
//!   the pool's ([`join_thread_pool`], an explicit opt-in), so that `N` threads compute in all.
//! * **Memory**: freed tensor memory stays in the process for the next tensor of that size
//!   (glibc `mallopt` tuning, an explicit opt-in: [`tune_allocator`]).
//!
//! ## What is guaranteed
//! Every `Backend` method of [`Cpu`] may be called directly, with any storages, layouts and
//! arguments (not only through `tessera_core::Tensor`, which validates first), in debug and
//! release builds alike:
//! * **No panic**: every primitive receives operand types whose layouts were checked against
//!   their storages and whose shapes agree (`tessera_core::operand`), and checks its dtypes
//!   and axes at entry; the convolution and
//!   pooling overrides run `tensor-core`'s checks again (the channel count of the GEMMs comes
//!   from the weight and must agree with the input); sizes combined from several operands are
//!   checked products. Bad input is a typed error.
//! * **No abort on allocation**: every buffer of tensor size (outputs, copies, im2col columns,
//!   partial sums) is allocated fallibly (`alloc.rs`); a request the host cannot meet is
//!   `Error::OutOfMemory { requested_bytes, .. }`.
//! * **No undefined behaviour**: the `unsafe` code is
//!   - the f32/f64 GEMM (`kernels/gemm/`): raw strided operand views, the dispatch and the
//!     split over rayon (`mod.rs`), the BLIS-style blocked driver (`blocked.rs`), packing
//!     (`pack/`, with AVX-512 transposing packers), the AVX-512F and AVX2+FMA micro-kernels
//!     (`microkernel/`), the GEMV and its SIMD dot kernels (`gemv.rs`, `dot.rs`),
//!     `matrixmultiply` (`portable.rs`), the per-thread packing buffers (`scratch.rs`) and the
//!     blocks of a split product shared with rayon workers (`team.rs`);
//!   - the GEMM calls of the batched product (`kernels/matmul.rs`, into uninitialised output
//!     capacity), of convolution and its gradients (`kernels/conv.rs`) and of fused attention
//!     (`kernels/attention.rs`);
//!   - the `vdpbf16ps` micro-kernel of the bf16 GEMM (`kernels/gemm_bf16.rs`);
//!   - the `MaybeUninit` outputs of the fused Adam step (`kernels/adam.rs`);
//!   - calls of safe loops compiled for AVX2, after run-time detection (`kernels/wide.rs`,
//!     `kernels/pool.rs`);
//!   - the zeroed allocation (`alloc.rs`) and three `mallopt` calls (`malloc_tuning.rs`).
//!
//!   Each block states the invariant it relies on (`SAFETY:`) and checks it first (operands
//!   inside their storages, output lengths against the inputs, CPU features before
//!   intrinsics). Miri runs the unit tests named `miri_` (`MIRIFLAGS="-Zmiri-tree-borrows
//!   -Zmiri-ignore-leaks" cargo +nightly miri test -p tessera-cpu --lib miri_`: no undefined
//!   behaviour reported) and those of `kernels::gemm` (`... --lib kernels::gemm`); Tree
//!   Borrows because rayon's crossbeam-epoch trips Stacked Borrows, the leak check off for
//!   rayon's threads. Miri cannot run the `core::arch` intrinsics (their tests compare them
//!   with f64 references natively); under it the AVX2 copies are never taken and `mallopt` is
//!   not called; attention's GEMM calls are tested natively only. `docs/SOUNDNESS.md` lists
//!   every `unsafe` place with its tests.
//! * **Data-dependent errors**: out-of-range indices of `index_select`, `gather` and
//!   `scatter_add`, and max-pooling window positions outside the window, are
//!   `Error::IndexOutOfRange`.
//!
//! ```
//! use tessera_cpu::{Cpu, CpuTensor};
//! # fn main() -> tessera_core::Result<()> {
//! let a = CpuTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], [2, 2], &Cpu::new())?;
//! let b = a.matmul(&a.t()?)?;
//! assert_eq!(b.to_vec::<f32>()?, vec![5.0, 11.0, 11.0, 25.0]);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod alloc;
mod attention_ops;
mod backend;
mod calling_thread;
mod checks;
mod cpu_caches;
mod cross_entropy_ops;
mod fused_ops;
mod kernels;
mod layer_norm_ops;
mod malloc_tuning;
mod matmul_bias_ops;
mod nn_ops;
mod parallel;
mod storage;
mod strided;

pub use backend::Cpu;
pub use calling_thread::{
    default_pool_threads, join_thread_pool, PoolJoin, CALLING_THREAD_ENV_VAR,
};
pub use kernels::gemm::{BLOCKING_ENV_VAR, GEMM_ENV_VAR};
pub use kernels::gemm_bf16::BF16_GEMM_ENV_VAR;
pub use malloc_tuning::{tune_allocator, MALLOC_TUNING_ENV_VAR};
pub use storage::{CpuElement, CpuStorage};

/// Which GEMM path this process uses and its micro-kernels, for reports: e.g.
/// `"avx512 (avx512 f32 12x32, avx512 f64 12x16); bf16: avx512-bf16 dot 12x32"` or
/// `"portable (matrixmultiply); bf16: widened to f32"`.
pub fn gemm_description() -> String {
    format!(
        "{}; bf16: {}",
        kernels::gemm::description(),
        kernels::gemm_bf16::description()
    )
}

/// A tensor on the CPU backend.
pub type CpuTensor = tessera_core::Tensor<Cpu>;
