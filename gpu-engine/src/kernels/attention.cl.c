/* Fused scaled dot-product attention and its gradient (tessera_core::attention defines it).
 *
 * Operands are contiguous row-major with an element offset: q [rows, E], k [batch, S, E],
 * v [batch, S, EV], the upstream gradient and output [rows, EV], the log-sum-exp [rows], where
 * rows = batch * L. A mask, if any, is [rows, S]: bytes (mask_kind 1: non-zero may attend) or
 * values added to the scores (mask_kind 2). Dropout (has_dropout) keeps probability
 * n = row * S + j when the uniform draw offset + n of Philox stream (key0, key1) is >= p and
 * scales it by `factor`, exactly like tessera_core::composite (random.cl.c's draws).
 *
 * One work-group of TS_REDUCE_WG work-items handles one row (a query for the forward pass and
 * dQ, a key for dK/dV): the other side is visited in chunks of TS_REDUCE_WG, one element per
 * work-item, with work-group reductions for the online softmax; each work-item owns the output
 * features d = lid, lid + TS_REDUCE_WG, ... and accumulates them in global memory (no other
 * work-item touches them). Every BARRIER() is in a kernel body (see mod.rs). */

#if defined(TS_FLOAT)

#define TS_ATT_NEG_INF ((T)(-TS_INF_F32))

/* Combines red[0..TS_REDUCE_WG) into red[0] with COMBINE (a tree of barriers). */
#define ATT_TREE(COMBINE)                                                                      \
    for (i64 st = TS_REDUCE_WG / 2; st > 0; st >>= 1) {                                        \
        if (lid < st) red[lid] = COMBINE(red[lid], red[lid + st]);                             \
        BARRIER();                                                                             \
    }

DEVICE T att_add(T a, T b) { return a + b; }
DEVICE T att_max(T a, T b) { return a > b ? a : b; }

/* The scaled, masked score of query row `row` (query i of its batch element) and key j. */
DEVICE T att_score(GLOBAL const T* q, i64 q_off, GLOBAL const T* k, i64 k_off, i64 row, i64 i,
                   i64 b, i64 j, i64 S, i64 E, T scale, i32 causal, GLOBAL const u8* bmask,
                   GLOBAL const T* fmask, i64 m_off, i32 mask_kind) {
    if (causal && j > i) return TS_ATT_NEG_INF;
    if (mask_kind == 1 && bmask[m_off + row * S + j] == 0) return TS_ATT_NEG_INF;
    GLOBAL const T* qr = q + q_off + row * E;
    GLOBAL const T* kr = k + k_off + (b * S + j) * E;
    T dot = (T)0;
    for (i64 d = 0; d < E; ++d) dot += qr[d] * kr[d];
    T s = dot * scale;
    if (mask_kind == 2) s = s + fmask[m_off + row * S + j];
    return s;
}

/* The dropout factor of probability n: `factor` when kept, 0 when dropped. */
DEVICE T att_keep(i32 has_dropout, T p, T factor, u32 key0, u32 key1, u64 offset, i64 n) {
    if (!has_dropout) return (T)1;
    u32 w[4];
    philox4x32_10(offset + (u64)n, key0, key1, w);
#if defined(TS_F64)
    u64 bits = (((u64)w[0] << 32) | (u64)w[1]) >> 11;
    T u = (T)bits * (T)(1.0 / 9007199254740992.0);
#else
    T u = (T)(w[0] >> 8) * (T)(1.0f / 16777216.0f);
#endif
    return u >= p ? factor : (T)0;
}

/* Forward: out [rows, EV] and lse [rows]; one work-group per query row. */
KERNEL void attention_forward(i64 rows, i64 L, i64 S, i64 E, i64 EV, T scale, i32 causal,
                              GLOBAL const T* q, i64 q_off, GLOBAL const T* k, i64 k_off,
                              GLOBAL const T* v, i64 v_off, GLOBAL const u8* bmask,
                              GLOBAL const T* fmask, i64 m_off, i32 mask_kind, i32 has_dropout,
                              T p, T factor, u32 key0, u32 key1, u64 offset, GLOBAL T* out,
                              GLOBAL T* lse) {
    LOCAL_DECL T red[TS_REDUCE_WG];
    LOCAL_DECL T prob[TS_REDUCE_WG];
    i64 lid = LOCAL_ID(0);
    i64 row = GROUP_ID(0);
    int active = row < rows;
    i64 b = active ? row / L : 0;
    i64 i = active ? row - b * L : 0;
    i64 end = active ? (causal ? (i + 1 < S ? i + 1 : S) : S) : 0;
    for (i64 d = lid; active && d < EV; d += TS_REDUCE_WG) out[row * EV + d] = (T)0;
    T m = TS_ATT_NEG_INF;
    T l = (T)0;
    for (i64 j0 = 0; j0 < end; j0 += TS_REDUCE_WG) {
        i64 j = j0 + lid;
        T s = TS_ATT_NEG_INF;
        if (j < end) {
            s = att_score(q, q_off, k, k_off, row, i, b, j, S, E, scale, causal, bmask, fmask,
                          m_off, mask_kind);
        }
        red[lid] = s;
        BARRIER();
        ATT_TREE(att_max)
        T m_new = att_max(m, red[0]);
        BARRIER();
        T e = (m_new == TS_ATT_NEG_INF || s == TS_ATT_NEG_INF) ? (T)0 : exp(s - m_new);
        red[lid] = e;
        BARRIER();
        ATT_TREE(att_add)
        T block_sum = red[0];
        T alpha = (m_new == TS_ATT_NEG_INF || m == TS_ATT_NEG_INF) ? (T)0 : exp(m - m_new);
        if (m == m_new) alpha = (T)1;
        l = l * alpha + block_sum;
        if (j < end) e = e * att_keep(has_dropout, p, factor, key0, key1, offset, row * S + j);
        prob[lid] = e;
        BARRIER();
        i64 n = end - j0 < TS_REDUCE_WG ? end - j0 : TS_REDUCE_WG;
        for (i64 d = lid; d < EV; d += TS_REDUCE_WG) {
            T acc = out[row * EV + d] * alpha;
            GLOBAL const T* vc = v + v_off + (b * S + j0) * EV + d;
            for (i64 c = 0; c < n; ++c) acc += prob[c] * vc[c * EV];
            out[row * EV + d] = acc;
        }
        m = m_new;
        BARRIER();
    }
    if (!active) return;
    for (i64 d = lid; d < EV; d += TS_REDUCE_WG) {
        out[row * EV + d] = l == (T)0 ? (T)0 : out[row * EV + d] / l;
    }
    if (lid == 0) lse[row] = l == (T)0 ? TS_ATT_NEG_INF : m + log(l);
}

/* Backward, first pass: dq [rows, E] and delta [rows] = rowsum(dO * O); one work-group per
 * query row. */
KERNEL void attention_backward_dq(i64 rows, i64 L, i64 S, i64 E, i64 EV, T scale, i32 causal,
                                  GLOBAL const T* q, i64 q_off, GLOBAL const T* k, i64 k_off,
                                  GLOBAL const T* v, i64 v_off, GLOBAL const u8* bmask,
                                  GLOBAL const T* fmask, i64 m_off, i32 mask_kind,
                                  i32 has_dropout, T p, T factor, u32 key0, u32 key1,
                                  u64 offset, GLOBAL const T* dout, i64 g_off,
                                  GLOBAL const T* out, i64 o_off, GLOBAL const T* lse,
                                  i64 l_off, GLOBAL T* delta, GLOBAL T* dq) {
    LOCAL_DECL T red[TS_REDUCE_WG];
    LOCAL_DECL T dsc[TS_REDUCE_WG];
    i64 lid = LOCAL_ID(0);
    i64 row = GROUP_ID(0);
    int active = row < rows;
    i64 b = active ? row / L : 0;
    i64 i = active ? row - b * L : 0;
    i64 end = active ? (causal ? (i + 1 < S ? i + 1 : S) : S) : 0;
    GLOBAL const T* go = dout + g_off + row * EV;
    T part = (T)0;
    for (i64 d = lid; active && d < EV; d += TS_REDUCE_WG) part += go[d] * out[o_off + row * EV + d];
    red[lid] = part;
    BARRIER();
    ATT_TREE(att_add)
    T dsum = red[0];
    BARRIER();
    if (active && lid == 0) delta[row] = dsum;
    for (i64 d = lid; active && d < E; d += TS_REDUCE_WG) dq[row * E + d] = (T)0;
    T shift = active ? lse[l_off + row] : (T)0;
    for (i64 j0 = 0; j0 < end; j0 += TS_REDUCE_WG) {
        i64 j = j0 + lid;
        T ds = (T)0;
        if (j < end && shift != TS_ATT_NEG_INF) {
            T s = att_score(q, q_off, k, k_off, row, i, b, j, S, E, scale, causal, bmask, fmask,
                            m_off, mask_kind);
            T pr = s == TS_ATT_NEG_INF ? (T)0 : exp(s - shift);
            GLOBAL const T* vr = v + v_off + (b * S + j) * EV;
            T dp = (T)0;
            for (i64 d = 0; d < EV; ++d) dp += go[d] * vr[d];
            dp = dp * att_keep(has_dropout, p, factor, key0, key1, offset, row * S + j);
            ds = pr * (dp - dsum) * scale;
        }
        dsc[lid] = ds;
        BARRIER();
        i64 n = end - j0 < TS_REDUCE_WG ? end - j0 : TS_REDUCE_WG;
        for (i64 d = lid; d < E; d += TS_REDUCE_WG) {
            T acc = dq[row * E + d];
            GLOBAL const T* kc = k + k_off + (b * S + j0) * E + d;
            for (i64 c = 0; c < n; ++c) acc += dsc[c] * kc[c * E];
            dq[row * E + d] = acc;
        }
        BARRIER();
    }
}

/* Backward, second pass (after the first, which wrote delta): dk [batch * S, E] and
 * dv [batch * S, EV]; one work-group per key row. */
KERNEL void attention_backward_dkdv(i64 keys, i64 L, i64 S, i64 E, i64 EV, T scale,
                                    i32 causal, GLOBAL const T* q, i64 q_off,
                                    GLOBAL const T* k, i64 k_off, GLOBAL const T* v, i64 v_off,
                                    GLOBAL const u8* bmask, GLOBAL const T* fmask, i64 m_off,
                                    i32 mask_kind, i32 has_dropout, T p, T factor, u32 key0,
                                    u32 key1, u64 offset, GLOBAL const T* dout, i64 g_off,
                                    GLOBAL const T* lse, i64 l_off, GLOBAL const T* delta,
                                    GLOBAL T* dk, GLOBAL T* dv) {
    LOCAL_DECL T pdrop[TS_REDUCE_WG];
    LOCAL_DECL T dsc[TS_REDUCE_WG];
    i64 lid = LOCAL_ID(0);
    i64 key = GROUP_ID(0);
    int active = key < keys;
    i64 b = active ? key / S : 0;
    i64 j = active ? key - b * S : 0;
    i64 start = causal ? j : 0;
    i64 end = active ? L : 0;
    for (i64 d = lid; active && d < E; d += TS_REDUCE_WG) dk[key * E + d] = (T)0;
    for (i64 d = lid; active && d < EV; d += TS_REDUCE_WG) dv[key * EV + d] = (T)0;
    GLOBAL const T* vr = v + v_off + key * EV;
    for (i64 i0 = start; i0 < end; i0 += TS_REDUCE_WG) {
        i64 i = i0 + lid;
        T pd = (T)0;
        T ds = (T)0;
        if (i < end) {
            i64 row = b * L + i;
            T shift = lse[l_off + row];
            T s = att_score(q, q_off, k, k_off, row, i, b, j, S, E, scale, causal, bmask, fmask,
                            m_off, mask_kind);
            if (shift != TS_ATT_NEG_INF && s != TS_ATT_NEG_INF) {
                T pr = exp(s - shift);
                T keep = att_keep(has_dropout, p, factor, key0, key1, offset, row * S + j);
                GLOBAL const T* go = dout + g_off + row * EV;
                T dp = (T)0;
                for (i64 d = 0; d < EV; ++d) dp += go[d] * vr[d];
                pd = pr * keep;
                ds = pr * (dp * keep - delta[row]) * scale;
            }
        }
        pdrop[lid] = pd;
        dsc[lid] = ds;
        BARRIER();
        i64 n = end - i0 < TS_REDUCE_WG ? end - i0 : TS_REDUCE_WG;
        GLOBAL const T* go0 = dout + g_off + (b * L + i0) * EV;
        GLOBAL const T* q0 = q + q_off + (b * L + i0) * E;
        for (i64 d = lid; d < EV; d += TS_REDUCE_WG) {
            T acc = dv[key * EV + d];
            for (i64 c = 0; c < n; ++c) acc += pdrop[c] * go0[c * EV + d];
            dv[key * EV + d] = acc;
        }
        for (i64 d = lid; d < E; d += TS_REDUCE_WG) {
            T acc = dk[key * E + d];
            for (i64 c = 0; c < n; ++c) acc += dsc[c] * q0[c * E + d];
            dk[key * E + d] = acc;
        }
        BARRIER();
    }
}

#endif
