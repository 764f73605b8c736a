/* Shared definitions of the tensor program: strided views, per-dtype constants and helpers.
 *
 * The program is built once per element type with -D T=<f32|f64|i64|u8> and exactly one of
 * TS_FLOAT, TS_INT or TS_BOOL defined (TS_F64 additionally marks T = f64).
 * Element indices and storage offsets are i64 throughout. */

#define TS_MAX_RANK 8

/* The storage offsets of a strided operand: element i (row-major over dims) lives at
 * offset + sum(index[d] * strides[d]). Host side: backend-opencl's `View` (same layout). */
typedef struct {
    i64 offset;
    i64 rank;
    i64 dims[TS_MAX_RANK];
    i64 strides[TS_MAX_RANK];
} View;

/* Storage offset of logical element i of v (i < numel). */
DEVICE i64 view_at(View v, i64 i) {
    if (v.rank == 1) {
        return v.offset + i * v.strides[0];
    }
    i64 off = v.offset;
    for (i64 d = v.rank - 1; d >= 0; --d) {
        i64 n = v.dims[d];
        i64 q = i / n;
        off += (i - q * n) * v.strides[d];
        i = q;
    }
    return off;
}

#define TS_I64_MAX ((i64)0x7fffffffffffffff)
#define TS_I64_MIN (-TS_I64_MAX - 1)

/* NaN test that is valid (and false) for integer types too. */
#define TS_ISNAN(x) ((x) != (x))

#if defined(TS_FLOAT)
#define T_LOWEST ((T)(-TS_INF_F32))
#define T_HIGHEST ((T)TS_INF_F32)
#elif defined(TS_INT)
#define T_LOWEST TS_I64_MIN
#define T_HIGHEST TS_I64_MAX
#endif

/* Sum, product, max and min with Tessera's semantics: integers wrap, max/min propagate NaN. */
#if defined(TS_INT)
DEVICE T t_add(T a, T b) { return (T)((u64)a + (u64)b); }
DEVICE T t_sub(T a, T b) { return (T)((u64)a - (u64)b); }
DEVICE T t_mul(T a, T b) { return (T)((u64)a * (u64)b); }
#elif defined(TS_FLOAT)
DEVICE T t_add(T a, T b) { return a + b; }
DEVICE T t_sub(T a, T b) { return a - b; }
DEVICE T t_mul(T a, T b) { return a * b; }
#endif
#if !defined(TS_BOOL)
DEVICE T t_max(T a, T b) { return (a > b || TS_ISNAN(a)) ? a : b; }
DEVICE T t_min(T a, T b) { return (a < b || TS_ISNAN(a)) ? a : b; }
#endif

/* The error flag: word 0 holds the first error code (0 = none), words 2..3 and 4..5 the
 * offending index and the dimension size as two 32-bit halves (low, high). */
#define TS_ERR_INDEX_SELECT 1
#define TS_ERR_GATHER 2
#define TS_ERR_SCATTER_ADD 3
#define TS_ERR_CROSS_ENTROPY 4
#define TS_ERR_CROSS_ENTROPY_BACKWARD 5

/* Records an out-of-range index unless an earlier error is already recorded. */
DEVICE void report_index_error(GLOBAL i32* flag, i32 code, i64 index, i64 size) {
    if (ATOMIC_CAS_I32(flag, 0, code) == 0) {
        flag[2] = (i32)(u32)((u64)index & 0xffffffff);
        flag[3] = (i32)(u32)((u64)index >> 32);
        flag[4] = (i32)(u32)((u64)size & 0xffffffff);
        flag[5] = (i32)(u32)((u64)size >> 32);
    }
}
