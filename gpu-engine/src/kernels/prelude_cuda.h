/* Tessera kernel prelude for CUDA C++ (NVRTC).
 *
 * Defines the same names as prelude_opencl.h so that the kernel sources compile unchanged.
 * NVRTC must be invoked with --fmad=false: the kernels rely on a*b+c not being fused outside
 * MAD() (random numbers are bit-exact across backends). */
#define TS_CUDA 1
#define TS_HAS_FP64 1

typedef signed char i8;
typedef unsigned char u8;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;
typedef float f32;
typedef double f64;

/* Function qualifiers. */
#define KERNEL extern "C" __global__
#define DEVICE static __device__ __forceinline__

/* Address spaces: CUDA pointers are generic; shared arrays are declared __shared__. */
#define GLOBAL
#define LOCAL_DECL __shared__
#define LOCAL_PTR

DEVICE i64 ts_dim3_get(dim3 v, int d) { return d == 0 ? (i64)v.x : d == 1 ? (i64)v.y : (i64)v.z; }
DEVICE i64 ts_uint3_get(uint3 v, int d) { return d == 0 ? (i64)v.x : d == 1 ? (i64)v.y : (i64)v.z; }

/* Work-item geometry, as i64, with OpenCL's meaning (a CUDA block is an OpenCL work-group). */
#define LOCAL_ID(d) ts_uint3_get(threadIdx, (d))
#define GROUP_ID(d) ts_uint3_get(blockIdx, (d))
#define LOCAL_SIZE(d) ts_dim3_get(blockDim, (d))
#define NUM_GROUPS(d) ts_dim3_get(gridDim, (d))
#define GLOBAL_ID(d) (GROUP_ID(d) * LOCAL_SIZE(d) + LOCAL_ID(d))

/* Synchronises the block and makes its shared-memory writes visible. */
#define BARRIER() __syncthreads()

/* 32-bit compare-and-swap on global memory; returns the old value. */
#define ATOMIC_CAS_I32(ptr, expected, desired) atomicCAS((ptr), (expected), (desired))

/* Multiply-add that may use a fused instruction (GEMM inner loops only). */
#define MAD(a, b, c) fma((a), (b), (c))

/* Positive infinity as f32 (cast to f64 where needed). */
#define TS_INF_F32 __int_as_float(0x7f800000)

/* The bits of an f32 as u32 and back. */
#define TS_F32_TO_BITS(x) __float_as_uint(x)
#define TS_BITS_TO_F32(u) __uint_as_float(u)
