/* Element-wise kernels over strided operands: copy, assign, unary and binary maps, comparisons
 * and where. One work-item per output element; operand element i is read at view_at(view, i);
 * outputs are contiguous and written at out_offset + i (the host splits layouts of rank above
 * TS_MAX_RANK into chunks, each with its own out_offset). */

#if defined(TS_FLOAT)
#if defined(TS_F64)
#define LIT(x) ((T)(x))
#else
#define LIT(x) ((T)(x##f))
#endif
#endif

/* out = x (any dtype; 16-bit elements are copied as bits). */
KERNEL void copy(i64 n, GLOBAL const STORE_T* x, View xv, GLOBAL STORE_T* out, i64 out_offset) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    out[out_offset + i] = x[view_at(xv, i)];
}

/* dst[dv] = src[sv]; dv never maps two indices to one element. */
KERNEL void assign_set(i64 n, GLOBAL STORE_T* dst, View dv, GLOBAL const STORE_T* src, View sv) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    dst[view_at(dv, i)] = src[view_at(sv, i)];
}

/* dst[dv] += src[sv] (wrapping for i64, logical or for bool). */
KERNEL void assign_add(i64 n, GLOBAL STORE_T* dst, View dv, GLOBAL const STORE_T* src, View sv) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    i64 d = view_at(dv, i);
#if defined(TS_BOOL)
    dst[d] = (u8)(dst[d] != 0 || src[view_at(sv, i)] != 0);
#else
    dst[d] = STORE(t_add(LOAD(dst[d]), LOAD(src[view_at(sv, i)])));
#endif
}

/* cond ? on_true : on_false, cond being bool (u8). */
KERNEL void where_select(i64 n, GLOBAL const u8* c, View cv, GLOBAL const STORE_T* t, View tv,
                         GLOBAL const STORE_T* f, View fv, GLOBAL STORE_T* out, i64 out_offset) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    out[out_offset + i] = c[view_at(cv, i)] != 0 ? t[view_at(tv, i)] : f[view_at(fv, i)];
}

/* ----- unary maps: out[i] = EXPR(v) with v = x[i] ----- */

#define UNARY_KERNEL(NAME, EXPR)                                                               \
    KERNEL void unary_##NAME(i64 n, GLOBAL const STORE_T* x, View xv, GLOBAL STORE_T* out,     \
                             i64 out_offset) {                                                 \
        i64 i = GLOBAL_ID(0);                                                                  \
        if (i >= n) return;                                                                    \
        T v = LOAD(x[view_at(xv, i)]);                                                         \
        out[out_offset + i] = STORE(EXPR);                                                     \
    }

#if defined(TS_FLOAT)
/* 1 / (1 + e^-v), evaluated as e^v / (1 + e^v) for negative v so that nothing overflows. */
DEVICE T t_sigmoid(T v) {
    if (v >= LIT(0.0)) {
        return LIT(1.0) / (LIT(1.0) + exp(-v));
    }
    T e = exp(v);
    return e / (LIT(1.0) + e);
}

UNARY_KERNEL(neg, -v)
UNARY_KERNEL(abs, fabs(v))
UNARY_KERNEL(sign, v > LIT(0.0) ? LIT(1.0) : (v < LIT(0.0) ? LIT(-1.0) : v))
UNARY_KERNEL(square, v * v)
UNARY_KERNEL(recip, LIT(1.0) / v)
UNARY_KERNEL(sqrt, sqrt(v))
UNARY_KERNEL(exp, exp(v))
UNARY_KERNEL(log, log(v))
UNARY_KERNEL(sin, sin(v))
UNARY_KERNEL(cos, cos(v))
UNARY_KERNEL(tanh, tanh(v))
UNARY_KERNEL(sigmoid, t_sigmoid(v))
UNARY_KERNEL(relu, (v > LIT(0.0) || TS_ISNAN(v)) ? v : LIT(0.0))
UNARY_KERNEL(gelu, (LIT(0.5) * v) * (LIT(1.0) + erf(v * LIT(0.70710678118654752440))))
UNARY_KERNEL(erf, erf(v))
UNARY_KERNEL(floor, floor(v))
UNARY_KERNEL(ceil, ceil(v))
#elif defined(TS_INT)
UNARY_KERNEL(neg, (T)((u64)0 - (u64)v))
UNARY_KERNEL(abs, v < 0 ? (T)((u64)0 - (u64)v) : v)
UNARY_KERNEL(sign, (T)((v > 0) - (v < 0)))
UNARY_KERNEL(square, t_mul(v, v))
#elif defined(TS_BOOL)
UNARY_KERNEL(not, (u8)(v == 0))
#endif

/* ----- binary maps: out[i] = EXPR(a, b) ----- */

#define BINARY_KERNEL(NAME, EXPR)                                                              \
    KERNEL void binary_##NAME(i64 n, GLOBAL const STORE_T* x, View xv, GLOBAL const STORE_T* y,\
                              View yv, GLOBAL STORE_T* out, i64 out_offset) {                  \
        i64 i = GLOBAL_ID(0);                                                                  \
        if (i >= n) return;                                                                    \
        T a = LOAD(x[view_at(xv, i)]);                                                         \
        T b = LOAD(y[view_at(yv, i)]);                                                         \
        out[out_offset + i] = STORE(EXPR);                                                     \
    }

#if defined(TS_FLOAT)
BINARY_KERNEL(add, a + b)
BINARY_KERNEL(sub, a - b)
BINARY_KERNEL(mul, a * b)
BINARY_KERNEL(div, a / b)
BINARY_KERNEL(pow, pow(a, b))
BINARY_KERNEL(maximum, t_max(a, b))
BINARY_KERNEL(minimum, t_min(a, b))
#elif defined(TS_INT)
BINARY_KERNEL(add, t_add(a, b))
BINARY_KERNEL(sub, t_sub(a, b))
BINARY_KERNEL(mul, t_mul(a, b))
BINARY_KERNEL(maximum, a > b ? a : b)
BINARY_KERNEL(minimum, a < b ? a : b)
#elif defined(TS_BOOL)
BINARY_KERNEL(mul, (u8)(a != 0 && b != 0))
BINARY_KERNEL(maximum, (u8)(a != 0 || b != 0))
BINARY_KERNEL(minimum, (u8)(a != 0 && b != 0))
#endif

/* ----- comparisons: bool output, IEEE semantics (NaN compares false except with !=) ----- */

#if defined(TS_BOOL)
#define CMP_KEY(v) ((v) != 0)
#else
#define CMP_KEY(v) (v)
#endif

#define COMPARE_KERNEL(NAME, OP)                                                               \
    KERNEL void cmp_##NAME(i64 n, GLOBAL const STORE_T* x, View xv, GLOBAL const STORE_T* y,   \
                           View yv,                                                            \
                           GLOBAL u8* out, i64 out_offset) {                                   \
        i64 i = GLOBAL_ID(0);                                                                  \
        if (i >= n) return;                                                                    \
        T a = LOAD(x[view_at(xv, i)]);                                                         \
        T b = LOAD(y[view_at(yv, i)]);                                                         \
        out[out_offset + i] = (u8)(CMP_KEY(a) OP CMP_KEY(b));                                  \
    }

COMPARE_KERNEL(eq, ==)
COMPARE_KERNEL(ne, !=)
COMPARE_KERNEL(lt, <)
COMPARE_KERNEL(le, <=)
COMPARE_KERNEL(gt, >)
COMPARE_KERNEL(ge, >=)
