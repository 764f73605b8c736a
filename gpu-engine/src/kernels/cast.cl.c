/* Dtype conversions from the program's dtype to each dtype (16-bit sources are read as f32):
 * floats to integers truncate toward zero, saturate and
 * send NaN to 0; anything to bool is x != 0 (NaN is true); bool to numbers is 0 or 1. */

#if defined(TS_BOOL)
#define CAST_SOURCE(v) ((v) != 0 ? 1 : 0)
#else
#define CAST_SOURCE(v) (v)
#endif

/* v converted to i64 with Rust's `as` semantics. */
DEVICE i64 cast_to_i64_value(T v) {
#if defined(TS_FLOAT)
    if (TS_ISNAN(v)) return 0;
    /* 2^63 is exact in both float types; values at or above it saturate. */
    if (v >= (T)9223372036854775808.0f) return TS_I64_MAX;
    if (v < (T)-9223372036854775808.0f) return TS_I64_MIN;
    return (i64)v;
#else
    return (i64)CAST_SOURCE(v);
#endif
}

#define CAST_KERNEL(NAME, D, EXPR)                                                             \
    KERNEL void cast_to_##NAME(i64 n, GLOBAL const STORE_T* x, View xv, GLOBAL D* out,         \
                               i64 out_offset) {                                               \
        i64 i = GLOBAL_ID(0);                                                                  \
        if (i >= n) return;                                                                    \
        T v = LOAD(x[view_at(xv, i)]);                                                         \
        out[out_offset + i] = (EXPR);                                                          \
    }

CAST_KERNEL(f32, f32, (f32)CAST_SOURCE(v))
#if defined(TS_HAS_FP64)
CAST_KERNEL(f64, f64, (f64)CAST_SOURCE(v))
#endif
CAST_KERNEL(i64, i64, cast_to_i64_value(v))
CAST_KERNEL(bool, u8, (u8)(v != 0))

/* v as an f32 that rounds to the 16-bit formats correctly: exact for f32 and the 16-bit
 * dtypes (whose T is f32), rounded to odd from f64 and i64 (see half.cl.c). */
#if defined(TS_F64)
#define CAST_TO_F32_ODD(v) ts_f64_to_f32_odd(v)
#elif defined(TS_INT)
#define CAST_TO_F32_ODD(v) ts_i64_to_f32_odd(v)
#else
#define CAST_TO_F32_ODD(v) ((f32)CAST_SOURCE(v))
#endif
CAST_KERNEL(f16, u16, ts_f32_to_f16(CAST_TO_F32_ODD(v)))
CAST_KERNEL(bf16, u16, ts_f32_to_bf16(CAST_TO_F32_ODD(v)))
