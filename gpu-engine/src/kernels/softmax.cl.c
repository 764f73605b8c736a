/* Fused softmax, log-softmax and log-sum-exp along a row: one work-group of TS_REDUCE_WG
 * work-items per row, row r starting at view_at(outer, r) with element stride `stride`.
 * The arithmetic is tessera_core::composite::softmax's: shift = row maximum (NaN-propagating),
 * which log-sum-exp alone replaces by 0 when infinite (so softmax and log-softmax of a row with
 * +inf, or of only -inf, are NaN, as in PyTorch); e = exp(x - shift); softmax = e / sum(e);
 * log_softmax = (x - shift) - log(sum(e)); logsumexp = log(sum(e)) + shift (one per row). */

#if defined(TS_FLOAT)

#define TS_SOFTMAX 0
#define TS_LOG_SOFTMAX 1
#define TS_LOGSUMEXP 2

DEVICE T softmax_add(T a, T b) { return a + b; }

/* Combines scratch[0..TS_REDUCE_WG) into scratch[0] with COMBINE (a tree of barriers; written
 * as a macro so that every barrier stays in the kernel body). */
#define SOFTMAX_TREE(COMBINE)                                                                  \
    for (i64 s = TS_REDUCE_WG / 2; s > 0; s >>= 1) {                                           \
        if (lid < s) scratch[lid] = COMBINE(scratch[lid], scratch[lid + s]);                   \
        BARRIER();                                                                             \
    }

/* Every work-item's VALUE combined over the group with COMBINE into OUT (a macro for the same
 * reason as SOFTMAX_TREE). Ends with a barrier, so scratch may be reused at once. */
#define GROUP_REDUCE(VALUE, COMBINE, OUT)                                                      \
    scratch[lid] = VALUE;                                                                      \
    BARRIER();                                                                                 \
    SOFTMAX_TREE(COMBINE)                                                                      \
    OUT = scratch[0];                                                                          \
    BARRIER();

/* The row's maximum (NaN-propagating) into OUT, every work-item of the group taking part.
 * Reads the kernel's x, base, stride, len, lid and scratch. */
#define ROW_MAX(OUT)                                                                           \
    {                                                                                          \
        T m_ = T_LOWEST;                                                                       \
        for (i64 r = lid; r < len; r += TS_REDUCE_WG) m_ = t_max(m_, LOAD(x[base + r * stride])); \
        GROUP_REDUCE(m_, t_max, OUT)                                                           \
    }

KERNEL void softmax_rows(i64 rows, i64 k, GLOBAL const STORE_T* x, View outer, i64 stride,
                         GLOBAL STORE_T* out, i32 mode) {
    LOCAL_DECL T scratch[TS_REDUCE_WG];
    i64 lid = LOCAL_ID(0);
    i64 row = GROUP_ID(0);
    /* The grid has exactly `rows` groups; `active` only guards against a larger one. */
    int active = row < rows;
    i64 base = active ? view_at(outer, row) : 0;
    i64 len = active ? k : 0;

    T shift;
    ROW_MAX(shift)
    if (mode == TS_LOGSUMEXP && (shift == T_HIGHEST || shift == T_LOWEST)) shift = (T)0;

    T s = (T)0;
    for (i64 r = lid; r < len; r += TS_REDUCE_WG) s += exp(LOAD(x[base + r * stride]) - shift);
    T total;
    GROUP_REDUCE(s, softmax_add, total)
    if (!active) return;

    if (mode == TS_LOGSUMEXP) {
        if (lid == 0) out[row] = STORE(log(total) + shift);
        return;
    }
    T log_total = log(total);
    for (i64 r = lid; r < k; r += TS_REDUCE_WG) {
        T v = LOAD(x[base + r * stride]) - shift;
        out[row * k + r] = STORE(mode == TS_SOFTMAX ? exp(v) / total : v - log_total);
    }
}


/* Softmax cross-entropy of each row against a class index (tessera_core::cross_entropy), one
 * work-group per row as softmax_rows: with m the row maximum (NaN-propagating), S = sum of
 * exp(x - m) and t the row's target,
 *     loss = log(S) + keep (m - x_t) - spread sum(x - m)        (keep = 1 - s, spread = s / c)
 *     dx_j = g ((exp(x_j - m) / S - keep [j = t]) - spread).
 * A target outside 0..k is recorded in the error flag (read at the next synchronisation) and
 * its row written as 0. */
KERNEL void cross_entropy_rows(i64 rows, i64 k, GLOBAL const STORE_T* x, View outer, i64 stride,
                               GLOBAL const i64* targets, View tv, T keep, T spread,
                               GLOBAL STORE_T* out, GLOBAL i32* flag) {
    LOCAL_DECL T scratch[TS_REDUCE_WG];
    i64 lid = LOCAL_ID(0);
    i64 row = GROUP_ID(0);
    int active = row < rows;
    i64 base = active ? view_at(outer, row) : 0;
    i64 len = active ? k : 0;

    T shift;
    ROW_MAX(shift)

    T s = (T)0;
    T shifted = (T)0;
    for (i64 r = lid; r < len; r += TS_REDUCE_WG) {
        T v = LOAD(x[base + r * stride]) - shift;
        s += exp(v);
        shifted += v;
    }
    T total, shifted_total;
    GROUP_REDUCE(s, softmax_add, total)
    GROUP_REDUCE(shifted, softmax_add, shifted_total)
    if (!active || lid != 0) return;

    i64 t = targets[view_at(tv, row)];
    if (t < 0 || t >= k) {
        report_index_error(flag, TS_ERR_CROSS_ENTROPY, t, k);
        out[row] = STORE((T)0);
        return;
    }
    T picked = LOAD(x[base + t * stride]);
    T loss = log(total) + keep * (shift - picked);
    /* Without smoothing the spread term is left out (0 * inf would be NaN). */
    if (spread != (T)0) loss = loss - spread * shifted_total;
    out[row] = STORE(loss);
}

KERNEL void cross_entropy_grad_rows(i64 rows, i64 k, GLOBAL const STORE_T* x, View outer,
                                    i64 stride, GLOBAL const i64* targets, View tv,
                                    GLOBAL const STORE_T* g, View gv, T keep, T spread,
                                    GLOBAL STORE_T* out, GLOBAL i32* flag) {
    LOCAL_DECL T scratch[TS_REDUCE_WG];
    i64 lid = LOCAL_ID(0);
    i64 row = GROUP_ID(0);
    int active = row < rows;
    i64 base = active ? view_at(outer, row) : 0;
    i64 len = active ? k : 0;

    T shift;
    ROW_MAX(shift)

    T s = (T)0;
    for (i64 r = lid; r < len; r += TS_REDUCE_WG) s += exp(LOAD(x[base + r * stride]) - shift);
    T total;
    GROUP_REDUCE(s, softmax_add, total)
    if (!active) return;

    i64 t = targets[view_at(tv, row)];
    int bad = t < 0 || t >= k;
    if (bad && lid == 0) report_index_error(flag, TS_ERR_CROSS_ENTROPY_BACKWARD, t, k);
    T grad = LOAD(g[view_at(gv, row)]);
    for (i64 r = lid; r < k; r += TS_REDUCE_WG) {
        T p = exp(LOAD(x[base + r * stride]) - shift) / total;
        T hot = r == t ? keep : (T)0;
        out[row * k + r] = STORE(bad ? (T)0 : ((p - hot) - spread) * grad);
    }
}

#endif
