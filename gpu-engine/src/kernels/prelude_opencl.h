/* Tessera kernel prelude for OpenCL C 1.2.
 *
 * Every kernel source under gpu-engine/src/kernels/ is written against the macros and typedefs
 * below; prelude_cuda.h defines the same names for CUDA C++. Kernels use only C that both
 * languages accept: no vector types, no templates, no address-space casts. */
#define TS_OPENCL 1

#ifdef TS_HAS_FP64
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#endif

/* Results must not depend on whether the compiler fuses a*b+c (random numbers are bit-exact). */
#pragma OPENCL FP_CONTRACT OFF

typedef char i8;
typedef uchar u8;
typedef ushort u16;
typedef int i32;
typedef uint u32;
typedef long i64;
typedef ulong u64;
typedef float f32;
#ifdef TS_HAS_FP64
typedef double f64;
#endif

/* Function qualifiers. */
#define KERNEL __kernel
#define DEVICE static inline

/* Address spaces: GLOBAL qualifies pointers to device buffers, LOCAL_DECL declares work-group
 * shared arrays (at kernel scope), LOCAL_PTR qualifies pointers to them. */
#define GLOBAL __global
#define LOCAL_DECL __local
#define LOCAL_PTR __local

/* Work-item geometry, as i64. */
#define GLOBAL_ID(d) ((i64)get_global_id(d))
#define LOCAL_ID(d) ((i64)get_local_id(d))
#define GROUP_ID(d) ((i64)get_group_id(d))
#define LOCAL_SIZE(d) ((i64)get_local_size(d))
#define NUM_GROUPS(d) ((i64)get_num_groups(d))

/* Synchronises the work-group and makes its local-memory writes visible. */
#define BARRIER() barrier(CLK_LOCAL_MEM_FENCE)

/* 32-bit compare-and-swap on global memory; returns the old value. */
#define ATOMIC_CAS_I32(ptr, expected, desired) atomic_cmpxchg((ptr), (expected), (desired))

/* Multiply-add that may use a fused instruction (GEMM inner loops only). */
#define MAD(a, b, c) mad((a), (b), (c))

/* Positive infinity as f32 (cast to f64 where needed). */
#define TS_INF_F32 INFINITY

/* The bits of an f32 as u32 and back. */
#define TS_F32_TO_BITS(x) as_uint(x)
#define TS_BITS_TO_F32(u) as_float(u)
