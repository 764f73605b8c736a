//! Kernel sources shared by the GPU backends, written once for OpenCL C and CUDA C.
//!
//! The sources are plain C files next to this module, compiled at run time by the backends
//! (`clBuildProgram` for OpenCL, NVRTC for CUDA). Each starts from a small *prelude* that gives
//! both languages the same vocabulary (`prelude_opencl.h`, `prelude_cuda.h`):
//!
//! | name | OpenCL C | CUDA C++ |
//! | --- | --- | --- |
//! | `KERNEL` | `__kernel` | `extern "C" __global__` |
//! | `DEVICE` (helpers) | `static inline` | `static __device__ __forceinline__` |
//! | `GLOBAL` (buffer pointers) | `__global` | nothing |
//! | `LOCAL_DECL` / `LOCAL_PTR` | `__local` / `__local` | `__shared__` / nothing |
//! | `GLOBAL_ID(d)`, `LOCAL_ID(d)`, `GROUP_ID(d)`, `LOCAL_SIZE(d)`, `NUM_GROUPS(d)` | `get_*_id(d)` | from `blockIdx`, `blockDim`, `threadIdx` |
//! | `BARRIER()` | `barrier(CLK_LOCAL_MEM_FENCE)` | `__syncthreads()` |
//! | `ATOMIC_CAS_I32` | `atomic_cmpxchg` | `atomicCAS` |
//! | `i64`, `u64`, `u32`, `u8`, `f32`, `f64` | `long`, `ulong`, ... | `long long`, ... |
//!
//! Kernels use only what both accept: no vector types, no templates, no address-space casts.
//! `BARRIER()` appears only in kernel bodies, never in helper functions (PoCL, which runs
//! OpenCL on CPUs, miscompiles barriers inside called functions).
//! Element types come from build-time defines ([`Program::defines`]): a program is built once per
//! dtype with `-D T=f32` (or `f64`, `i64`, `u8`) plus a dtype-class macro. The 16-bit floats
//! are stored as `u16` and computed in f32: `-D T=f32 -D STORE_T=u16` plus `TS_F16` or
//! `TS_BF16`; kernels read elements with `LOAD(..)` and write them with `STORE(..)`, which
//! `half.cl.c` defines as correctly rounded conversions (the identity for other dtypes). No
//! device extension is needed (`cl_khr_fp16` computes in half precision, which Tessera does not).
//!
//! # Programs
//! * [`Program::Tensor`]: everything but matrix products, per dtype: strided copy and assign,
//!   unary and binary maps, comparisons, where, casts, reductions, arg-reductions, indexing,
//!   random numbers, fused row softmax, im2col and the one-pass Adam step (float dtypes).
//! * [`Program::Attention`]: fused scaled dot-product attention (forward, and the gradient in
//!   two kernels), per float dtype.
//! * [`Program::Gemm`]: the matrix product, per float dtype and tile configuration: `gemm`
//!   (local-memory tiles plus register blocking, for GPUs) and `gemm_direct` (register blocks
//!   over contiguous columns without local memory, for CPU devices).
//!
//! # Strided operands
//! Kernels receive each strided operand as a `View` struct passed by value: `offset`, `rank`,
//! then `dims` and `strides`, each an array of [`MAX_RANK`] `i64` (see `common.cl.c`). Backends
//! coalesce dimensions first and split anything still above [`MAX_RANK`] into several launches.
//!
//! # Dialect requirements
//! OpenCL: OpenCL C 1.2; `f64` programs need `cl_khr_fp64` and the define `TS_HAS_FP64`.
//! CUDA: NVRTC with `--fmad=false` (random numbers must be bit-exact, see `random.cl.c`).

use crate::DType;

/// The C dialect a program is generated for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// OpenCL C 1.2.
    OpenCl,
    /// CUDA C++ as compiled by NVRTC.
    Cuda,
}

/// The programs a backend builds (each once per dtype, see [`Program::defines`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Program {
    /// All kernels but GEMM: element-wise, casts, reductions, indexing, random, softmax, im2col.
    Tensor,
    /// The tiled batched matrix product (needs the tile defines of [`GemmTiles::defines`]).
    Gemm,
    /// Fused scaled dot-product attention and its gradient (float dtypes; `attention.cl.c`).
    Attention,
}

/// Highest rank of a `View` kernel argument.
pub const MAX_RANK: usize = 8;

const PRELUDE_OPENCL: &str = include_str!("prelude_opencl.h");
const PRELUDE_CUDA: &str = include_str!("prelude_cuda.h");
const HALF: &str = include_str!("half.cl.c");
const COMMON: &str = include_str!("common.cl.c");
const ELEMENTWISE: &str = include_str!("elementwise.cl.c");
const CAST: &str = include_str!("cast.cl.c");
const REDUCE: &str = include_str!("reduce.cl.c");
const INDEXING: &str = include_str!("indexing.cl.c");
const RANDOM: &str = include_str!("random.cl.c");
const SOFTMAX: &str = include_str!("softmax.cl.c");
const CONV: &str = include_str!("conv.cl.c");
const GEMM: &str = include_str!("gemm.cl.c");
const ATTENTION: &str = include_str!("attention.cl.c");
const ADAM: &str = include_str!("adam.cl.c");

impl Program {
    /// The source files of the program, in order, after the prelude.
    fn parts(self) -> &'static [&'static str] {
        match self {
            Program::Tensor => &[
                HALF,
                COMMON,
                ELEMENTWISE,
                CAST,
                REDUCE,
                INDEXING,
                RANDOM,
                SOFTMAX,
                CONV,
                ADAM,
            ],
            Program::Gemm => &[HALF, COMMON, GEMM],
            Program::Attention => &[HALF, COMMON, RANDOM, ATTENTION],
        }
    }

    /// A short name for caches and messages.
    pub fn name(self) -> &'static str {
        match self {
            Program::Tensor => "tensor",
            Program::Gemm => "gemm",
            Program::Attention => "attention",
        }
    }

    /// The `NAME=VALUE` defines that build the program for elements of `dtype`: `T` (the type
    /// kernels compute in), the dtype class (`TS_FLOAT`, `TS_INT` or `TS_BOOL`) and `TS_F64`
    /// for f64. The 16-bit floats compute in f32 over `u16` storage: `T=f32`,
    /// `STORE_T=u16` and `TS_F16` or `TS_BF16` (see `half.cl.c`). The backend adds
    /// `TS_HAS_FP64` when the device supports f64 (always, for CUDA).
    pub fn defines(self, dtype: DType) -> Vec<String> {
        let (ty, class) = match dtype {
            DType::F32 | DType::F16 | DType::BF16 => ("f32", "TS_FLOAT"),
            DType::F64 => ("f64", "TS_FLOAT"),
            DType::I64 => ("i64", "TS_INT"),
            DType::Bool => ("u8", "TS_BOOL"),
            // Unreachable: `Runtime::alloc` refuses dtypes without kernels, so no storage of
            // one reaches a program. No class define is set, so a build for one fails (an
            // error) rather than running f32 code on its data.
            other => (other.name(), "TS_UNSUPPORTED"),
        };
        let mut defines = vec![format!("T={ty}"), format!("{class}=1")];
        match dtype {
            DType::F64 => defines.push("TS_F64=1".into()),
            DType::F16 => defines.extend(["STORE_T=u16".into(), "TS_F16=1".into()]),
            DType::BF16 => defines.extend(["STORE_T=u16".into(), "TS_BF16=1".into()]),
            _ => {}
        }
        defines
    }

    /// Whether the program has kernels for `dtype`. Attention has none for the 16-bit floats
    /// (its kernels accumulate in their output buffers): the backend runs it in f32 between
    /// casts.
    pub fn has_dtype(self, dtype: DType) -> bool {
        match self {
            Program::Tensor => true,
            Program::Gemm => dtype.is_float(),
            Program::Attention => dtype.is_float() && !dtype.is_half(),
        }
    }
}

/// The complete source of `program` in `dialect`: the prelude followed by the program's files.
pub fn program_source(dialect: Dialect, program: Program) -> String {
    let prelude = match dialect {
        Dialect::OpenCl => PRELUDE_OPENCL,
        Dialect::Cuda => PRELUDE_CUDA,
    };
    let mut source = String::from(prelude);
    for part in program.parts() {
        source.push('\n');
        source.push_str(part);
    }
    source
}

/// Bytes of the type kernels compute `dtype` in (what local-memory tiles hold): 4 for the
/// 16-bit floats, which compute in f32, the element size otherwise.
pub fn compute_size(dtype: DType) -> usize {
    if dtype.is_half() {
        4
    } else {
        dtype.size_in_bytes()
    }
}

/// A tile configuration of [`Program::Gemm`]: see `gemm.cl.c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmTiles {
    /// Rows of C per work-group.
    pub bm: usize,
    /// Columns of C per work-group.
    pub bn: usize,
    /// Depth of the local-memory tiles.
    pub bk: usize,
    /// Rows of C per work-item.
    pub tm: usize,
    /// Columns of C per work-item.
    pub tn: usize,
}

impl GemmTiles {
    /// The candidate configurations an autotuner times, smallest work-groups first.
    pub const CANDIDATES: [GemmTiles; 5] = [
        GemmTiles::new(32, 32, 16, 4, 4),
        GemmTiles::new(64, 64, 8, 8, 8),
        GemmTiles::new(64, 64, 16, 4, 4),
        GemmTiles::new(128, 128, 8, 8, 8),
        GemmTiles::new(64, 128, 16, 8, 8),
    ];

    /// A configuration (no checks; see [`GemmTiles::is_valid`]).
    pub const fn new(bm: usize, bn: usize, bk: usize, tm: usize, tn: usize) -> Self {
        GemmTiles { bm, bn, bk, tm, tn }
    }

    /// Whether the tile sizes divide evenly into work-items.
    pub fn is_valid(&self) -> bool {
        [self.bm, self.bn, self.bk, self.tm, self.tn]
            .iter()
            .all(|&v| v > 0)
            && self.bm % self.tm == 0
            && self.bn % self.tn == 0
    }

    /// Work-group size `(x, y)`: `(bn / tn, bm / tm)`.
    pub fn work_group(&self) -> (usize, usize) {
        (self.bn / self.tn, self.bm / self.tm)
    }

    /// Bytes of local memory used for elements of `element_size` bytes.
    pub fn local_bytes(&self, element_size: usize) -> usize {
        (self.bm + self.bn) * self.bk * element_size
    }

    /// The `NAME=VALUE` defines of the configuration.
    pub fn defines(&self) -> Vec<String> {
        vec![
            format!("TS_BM={}", self.bm),
            format!("TS_BN={}", self.bn),
            format!("TS_BK={}", self.bk),
            format!("TS_TM={}", self.tm),
            format!("TS_TN={}", self.tn),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_start_with_their_dialect_prelude() {
        let cl = program_source(Dialect::OpenCl, Program::Tensor);
        let cuda = program_source(Dialect::Cuda, Program::Tensor);
        assert!(cl.contains("#define TS_OPENCL 1") && !cl.contains("TS_CUDA"));
        assert!(cuda.contains("#define TS_CUDA 1") && !cuda.contains("TS_OPENCL"));
        assert!(cl.contains("KERNEL void copy("));
        assert!(program_source(Dialect::OpenCl, Program::Gemm).contains("KERNEL void gemm("));
        assert!(program_source(Dialect::Cuda, Program::Attention)
            .contains("KERNEL void attention_forward("));
    }

    #[test]
    fn sources_avoid_dialect_specific_spellings() {
        // Everything dialect-specific must go through the prelude's macros.
        for program in [Program::Tensor, Program::Gemm, Program::Attention] {
            for part in program.parts() {
                for word in [
                    "__kernel",
                    "__global",
                    "__local",
                    "__shared__",
                    "get_global_id",
                    "threadIdx",
                    "barrier(",
                    "__syncthreads",
                    "float4",
                    "template",
                ] {
                    assert!(!part.contains(word), "kernel source uses `{word}`");
                }
            }
        }
    }

    #[test]
    fn defines_name_the_element_type() {
        assert_eq!(Program::Tensor.defines(DType::F32), ["T=f32", "TS_FLOAT=1"]);
        assert_eq!(
            Program::Tensor.defines(DType::F64),
            ["T=f64", "TS_FLOAT=1", "TS_F64=1"]
        );
        assert_eq!(Program::Tensor.defines(DType::Bool), ["T=u8", "TS_BOOL=1"]);
        assert_eq!(
            Program::Gemm.defines(DType::BF16),
            ["T=f32", "TS_FLOAT=1", "STORE_T=u16", "TS_BF16=1"]
        );
        assert_eq!(
            Program::Tensor.defines(DType::F16),
            ["T=f32", "TS_FLOAT=1", "STORE_T=u16", "TS_F16=1"]
        );
        assert!(GemmTiles::CANDIDATES.iter().all(GemmTiles::is_valid));
        assert_eq!(GemmTiles::new(64, 64, 16, 4, 4).work_group(), (16, 16));
    }
}
