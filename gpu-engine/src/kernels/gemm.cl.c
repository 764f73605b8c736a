/* Batched GEMM C = A B with local-memory tiles and register blocking.
 *
 * Built per element type (f32, f64, or a 16-bit type stored as STORE_T and accumulated in f32,
 * see half.cl.c) and per tile configuration:
 *   TS_BM x TS_BN  output tile of one work-group,
 *   TS_BK          depth of the A and B tiles staged in local memory per step,
 *   TS_TM x TS_TN  outputs accumulated in registers by one work-item.
 * Work-group: (TS_BN / TS_TN, TS_BM / TS_TM, 1); grid dimension 2 is the batch.
 * A is m x k and B is k x n with arbitrary row, column and batch strides (transposed and
 * broadcast operands need no copy); C is contiguous, batch after batch. Work-item (tx, ty) owns
 * rows ty + i * WY and columns tx + j * WX of the tile, so neighbouring work-items touch
 * neighbouring columns (coalesced stores, conflict-free local reads). */

#define TS_WX (TS_BN / TS_TN)
#define TS_WY (TS_BM / TS_TM)
#define TS_THREADS (TS_WX * TS_WY)

KERNEL void gemm(i64 m, i64 n, i64 k,
                 GLOBAL const STORE_T* a, i64 a_offset, i64 a_row, i64 a_col, i64 a_batch,
                 GLOBAL const STORE_T* b, i64 b_offset, i64 b_row, i64 b_col, i64 b_batch,
                 GLOBAL STORE_T* c, i64 c_offset) {
    LOCAL_DECL T a_tile[TS_BK][TS_BM];
    LOCAL_DECL T b_tile[TS_BK][TS_BN];
    const i64 tx = LOCAL_ID(0);
    const i64 ty = LOCAL_ID(1);
    const i64 tid = ty * TS_WX + tx;
    const i64 batch = GROUP_ID(2);
    const i64 row0 = GROUP_ID(1) * TS_BM;
    const i64 col0 = GROUP_ID(0) * TS_BN;
    const i64 a_base = a_offset + batch * a_batch;
    const i64 b_base = b_offset + batch * b_batch;

    T acc[TS_TM][TS_TN];
    for (int i = 0; i < TS_TM; ++i)
        for (int j = 0; j < TS_TN; ++j) acc[i][j] = (T)0;

    for (i64 k0 = 0; k0 < k; k0 += TS_BK) {
        for (i64 e = tid; e < TS_BM * TS_BK; e += TS_THREADS) {
            i64 r = e / TS_BK, q = e - (e / TS_BK) * TS_BK;
            i64 gr = row0 + r, gq = k0 + q;
            a_tile[q][r] = (gr < m && gq < k) ? LOAD(a[a_base + gr * a_row + gq * a_col]) : (T)0;
        }
        for (i64 e = tid; e < TS_BK * TS_BN; e += TS_THREADS) {
            i64 q = e / TS_BN, col = e - (e / TS_BN) * TS_BN;
            i64 gq = k0 + q, gc = col0 + col;
            b_tile[q][col] = (gq < k && gc < n) ? LOAD(b[b_base + gq * b_row + gc * b_col]) : (T)0;
        }
        BARRIER();
        for (int q = 0; q < TS_BK; ++q) {
            T av[TS_TM];
            T bv[TS_TN];
            for (int i = 0; i < TS_TM; ++i) av[i] = a_tile[q][ty + i * TS_WY];
            for (int j = 0; j < TS_TN; ++j) bv[j] = b_tile[q][tx + j * TS_WX];
            for (int i = 0; i < TS_TM; ++i)
                for (int j = 0; j < TS_TN; ++j) acc[i][j] = MAD(av[i], bv[j], acc[i][j]);
        }
        BARRIER();
    }

    const i64 c_base = c_offset + batch * m * n;
    for (int i = 0; i < TS_TM; ++i) {
        i64 gr = row0 + ty + i * TS_WY;
        if (gr >= m) continue;
        for (int j = 0; j < TS_TN; ++j) {
            i64 gc = col0 + tx + j * TS_WX;
            if (gc < n) c[c_base + gr * n + gc] = STORE(acc[i][j]);
        }
    }
}

/* The same product without local memory or barriers, for devices where caches do the staging
 * (CPUs: PoCL turns each work-group into loops, and barriers force private state to memory).
 * Work-item (tx, ty) owns the TS_TM x TS_TN block at rows ty * TS_TM + i and columns
 * tx * TS_TN + j of the work-group's TS_BM x TS_BN tile: consecutive columns, so that with a
 * unit column stride in B the inner loop is a run of contiguous loads the compiler vectorises.
 * TS_BK is not used. Loads are clamped into the matrices; stores are bounds-checked. */
KERNEL void gemm_direct(i64 m, i64 n, i64 k,
                        GLOBAL const STORE_T* a, i64 a_offset, i64 a_row, i64 a_col, i64 a_batch,
                        GLOBAL const STORE_T* b, i64 b_offset, i64 b_row, i64 b_col, i64 b_batch,
                        GLOBAL STORE_T* c, i64 c_offset) {
    const i64 batch = GROUP_ID(2);
    const i64 row0 = GROUP_ID(1) * TS_BM + LOCAL_ID(1) * TS_TM;
    const i64 col0 = GROUP_ID(0) * TS_BN + LOCAL_ID(0) * TS_TN;
    if (row0 >= m || col0 >= n) return;
    const i64 a_base = a_offset + batch * a_batch;
    const i64 b_base = b_offset + batch * b_batch;

    i64 a_rows[TS_TM];
    for (int i = 0; i < TS_TM; ++i) {
        i64 r = row0 + i < m ? row0 + i : m - 1;
        a_rows[i] = a_base + r * a_row;
    }
    T acc[TS_TM][TS_TN];
    for (int i = 0; i < TS_TM; ++i)
        for (int j = 0; j < TS_TN; ++j) acc[i][j] = (T)0;

    if (b_col == 1 && col0 + TS_TN <= n) {
        for (i64 q = 0; q < k; ++q) {
            GLOBAL const STORE_T* b_run = b + b_base + q * b_row + col0;
            T bv[TS_TN];
            for (int j = 0; j < TS_TN; ++j) bv[j] = LOAD(b_run[j]);
            for (int i = 0; i < TS_TM; ++i) {
                T av = LOAD(a[a_rows[i] + q * a_col]);
                for (int j = 0; j < TS_TN; ++j) acc[i][j] = MAD(av, bv[j], acc[i][j]);
            }
        }
    } else {
        i64 b_cols[TS_TN];
        for (int j = 0; j < TS_TN; ++j) {
            i64 col = col0 + j < n ? col0 + j : n - 1;
            b_cols[j] = b_base + col * b_col;
        }
        for (i64 q = 0; q < k; ++q) {
            T bv[TS_TN];
            for (int j = 0; j < TS_TN; ++j) bv[j] = LOAD(b[b_cols[j] + q * b_row]);
            for (int i = 0; i < TS_TM; ++i) {
                T av = LOAD(a[a_rows[i] + q * a_col]);
                for (int j = 0; j < TS_TN; ++j) acc[i][j] = MAD(av, bv[j], acc[i][j]);
            }
        }
    }

    const i64 c_base = c_offset + batch * m * n;
    for (int i = 0; i < TS_TM; ++i) {
        if (row0 + i >= m) break;
        for (int j = 0; j < TS_TN; ++j) {
            if (col0 + j < n) c[c_base + (row0 + i) * n + col0 + j] = STORE(acc[i][j]);
        }
    }
}
