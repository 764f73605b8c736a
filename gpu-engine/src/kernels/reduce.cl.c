/* Reductions of rows: output o (o < m) combines the k elements x[view_at(kept, o) +
 * view_at(red, r)], r < k (the host permutes kept axes before reduced ones and gives `red`
 * offset 0). Two shapes:
 *   *_seq:  one work-item per output, a sequential loop (short rows, or many outputs whose
 *           kept stride is 1 so that neighbouring work-items read neighbouring elements);
 *   *_tree: `chunks` work-groups of TS_REDUCE_WG (a power of two) work-items per output, each
 *           work-item striding over its chunk, then a tree in local memory. With chunks > 1 the
 *           partials go to `out[o * chunks + chunk]` and a second *_seq pass combines them.
 * Argmax/argmin carry (value, index) pairs: ties go to the lower index and the first NaN wins.
 * Accumulators are T (f32 for the 16-bit dtypes, rounded once when stored); the host never
 * splits a 16-bit reduction into chunks, whose partials would be rounded to 16 bits. */

#if !defined(TS_BOOL)

#ifndef TS_REDUCE_WG
#define TS_REDUCE_WG 64
#endif

#define REDUCE_KERNELS(NAME, COMBINE, IDENTITY)                                                \
    KERNEL void reduce_##NAME##_seq(i64 m, i64 k, GLOBAL const STORE_T* x, View kept,          \
                                    View red, GLOBAL STORE_T* out) {                           \
        i64 o = GLOBAL_ID(0);                                                                  \
        if (o >= m) return;                                                                    \
        i64 base = view_at(kept, o);                                                           \
        T acc = (IDENTITY);                                                                    \
        for (i64 r = 0; r < k; ++r) {                                                          \
            acc = COMBINE(acc, LOAD(x[base + view_at(red, r)]));                               \
        }                                                                                      \
        out[o] = STORE(acc);                                                                   \
    }                                                                                          \
    KERNEL void reduce_##NAME##_tree(i64 m, i64 k, GLOBAL const STORE_T* x, View kept,         \
                                     View red, GLOBAL STORE_T* out, i64 chunks) {              \
        LOCAL_DECL T scratch[TS_REDUCE_WG];                                                    \
        i64 lid = LOCAL_ID(0);                                                                 \
        i64 group = GROUP_ID(0);                                                               \
        i64 o = group / chunks;                                                                \
        i64 chunk = group - o * chunks;                                                        \
        i64 per_chunk = (k + chunks - 1) / chunks;                                             \
        i64 start = chunk * per_chunk;                                                         \
        i64 end = start + per_chunk < k ? start + per_chunk : k;                               \
        T acc = (IDENTITY);                                                                    \
        if (o < m) {                                                                           \
            i64 base = view_at(kept, o);                                                       \
            for (i64 r = start + lid; r < end; r += TS_REDUCE_WG) {                            \
                acc = COMBINE(acc, LOAD(x[base + view_at(red, r)]));                           \
            }                                                                                  \
        }                                                                                      \
        scratch[lid] = acc;                                                                    \
        BARRIER();                                                                             \
        for (i64 s = TS_REDUCE_WG / 2; s > 0; s >>= 1) {                                       \
            if (lid < s) scratch[lid] = COMBINE(scratch[lid], scratch[lid + s]);               \
            BARRIER();                                                                         \
        }                                                                                      \
        if (lid == 0 && o < m) out[group] = STORE(scratch[0]);                                 \
    }

REDUCE_KERNELS(sum, t_add, (T)0)
REDUCE_KERNELS(prod, t_mul, (T)1)
REDUCE_KERNELS(max, t_max, T_LOWEST)
REDUCE_KERNELS(min, t_min, T_HIGHEST)

/* Whether (a, ia) beats (b, ib); index -1 marks "no element yet" and always loses. */
#define ARG_BETTER(NAME, CMP)                                                                  \
    DEVICE int arg_better_##NAME(T a, i64 ia, T b, i64 ib) {                                   \
        if (ia < 0) return 0;                                                                  \
        if (ib < 0) return 1;                                                                  \
        if (TS_ISNAN(a)) return !TS_ISNAN(b) || ia < ib;                                       \
        if (TS_ISNAN(b)) return 0;                                                             \
        if (a CMP b) return 1;                                                                 \
        return a == b && ia < ib;                                                              \
    }

#define ARG_KERNELS(NAME)                                                                      \
    KERNEL void arg##NAME##_seq(i64 m, i64 k, GLOBAL const STORE_T* x, View kept, View red,    \
                                GLOBAL i64* out) {                                             \
        i64 o = GLOBAL_ID(0);                                                                  \
        if (o >= m) return;                                                                    \
        i64 base = view_at(kept, o);                                                           \
        T best = (T)0;                                                                         \
        i64 at = -1;                                                                           \
        for (i64 r = 0; r < k; ++r) {                                                          \
            T v = LOAD(x[base + view_at(red, r)]);                                             \
            if (arg_better_##NAME(v, r, best, at)) {                                           \
                best = v;                                                                      \
                at = r;                                                                        \
            }                                                                                  \
        }                                                                                      \
        out[o] = at < 0 ? 0 : at;                                                              \
    }                                                                                          \
    KERNEL void arg##NAME##_tree(i64 m, i64 k, GLOBAL const STORE_T* x, View kept, View red,   \
                                 GLOBAL i64* out) {                                            \
        LOCAL_DECL T values[TS_REDUCE_WG];                                                     \
        LOCAL_DECL i64 indices[TS_REDUCE_WG];                                                  \
        i64 lid = LOCAL_ID(0);                                                                 \
        i64 o = GROUP_ID(0);                                                                   \
        T best = (T)0;                                                                         \
        i64 at = -1;                                                                           \
        if (o < m) {                                                                           \
            i64 base = view_at(kept, o);                                                       \
            for (i64 r = lid; r < k; r += TS_REDUCE_WG) {                                      \
                T v = LOAD(x[base + view_at(red, r)]);                                         \
                if (arg_better_##NAME(v, r, best, at)) {                                       \
                    best = v;                                                                  \
                    at = r;                                                                    \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
        values[lid] = best;                                                                    \
        indices[lid] = at;                                                                     \
        BARRIER();                                                                             \
        for (i64 s = TS_REDUCE_WG / 2; s > 0; s >>= 1) {                                       \
            if (lid < s && arg_better_##NAME(values[lid + s], indices[lid + s], values[lid],   \
                                             indices[lid])) {                                  \
                values[lid] = values[lid + s];                                                 \
                indices[lid] = indices[lid + s];                                               \
            }                                                                                  \
            BARRIER();                                                                         \
        }                                                                                      \
        if (lid == 0 && o < m) out[o] = indices[0] < 0 ? 0 : indices[0];                       \
    }

ARG_BETTER(max, >)
ARG_BETTER(min, <)
ARG_KERNELS(max)
ARG_KERNELS(min)

#endif
