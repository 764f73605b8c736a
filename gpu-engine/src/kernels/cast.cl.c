/* Dtype conversions from T to each dtype: floats to integers truncate toward zero, saturate and
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
    KERNEL void cast_to_##NAME(i64 n, GLOBAL const T* x, View xv, GLOBAL D* out,               \
                               i64 out_offset) {                                               \
        i64 i = GLOBAL_ID(0);                                                                  \
        if (i >= n) return;                                                                    \
        T v = x[view_at(xv, i)];                                                               \
        out[out_offset + i] = (EXPR);                                                          \
    }

CAST_KERNEL(f32, f32, (f32)CAST_SOURCE(v))
#if defined(TS_HAS_FP64)
CAST_KERNEL(f64, f64, (f64)CAST_SOURCE(v))
#endif
CAST_KERNEL(i64, i64, cast_to_i64_value(v))
CAST_KERNEL(bool, u8, (u8)(v != 0))
