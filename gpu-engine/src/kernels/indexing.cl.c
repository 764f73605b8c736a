/* index_select, gather and scatter_add. Indices are i64; one out of [0, size) is recorded in
 * the error flag (see report_index_error) and its element is skipped: the output gets 0 for the
 * selections and no contribution for scatter_add. The host reports the flag at read-back. */

/* out[o, j, r] = x[outer(o) + idx[j] * axis_stride + inner(r)], output [outer, n_idx, inner]. */
KERNEL void index_select(i64 n, GLOBAL const STORE_T* x, View outer, View inner, i64 inner_n,
                         i64 axis_stride, i64 axis_size, GLOBAL const i64* idx, View iv,
                         i64 n_idx, GLOBAL STORE_T* out, GLOBAL i32* flag) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    i64 t = i / inner_n;
    i64 r = i - t * inner_n;
    i64 o = t / n_idx;
    i64 j = t - o * n_idx;
    i64 ix = idx[view_at(iv, j)];
    if (ix < 0 || ix >= axis_size) {
        report_index_error(flag, TS_ERR_INDEX_SELECT, ix, axis_size);
        out[i] = STORE((T)0);
        return;
    }
    out[i] = x[view_at(outer, o) + ix * axis_stride + view_at(inner, r)];
}

/* out[p] = x[p with p[axis] = idx[p]]: `xv` walks x over the indices' shape with the axis
 * stride set to 0, `iv` walks the indices. */
KERNEL void gather(i64 n, GLOBAL const STORE_T* x, View xv, i64 axis_stride, i64 axis_size,
                   GLOBAL const i64* idx, View iv, GLOBAL STORE_T* out, i64 out_offset,
                   GLOBAL i32* flag) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    i64 ix = idx[view_at(iv, i)];
    if (ix < 0 || ix >= axis_size) {
        report_index_error(flag, TS_ERR_GATHER, ix, axis_size);
        out[out_offset + i] = STORE((T)0);
        return;
    }
    out[out_offset + i] = x[view_at(xv, i) + ix * axis_stride];
}

#if !defined(TS_BOOL)
/* One work-item per column (a position of the indices' shape with the axis removed): walks the
 * axis in order, adding src into out at the indexed rows. Columns touch disjoint outputs, so the
 * result is deterministic and needs no atomics. `out` already holds the base values. */
KERNEL void scatter_add(i64 n_cols, i64 len, GLOBAL const i64* idx, View iv, i64 idx_step,
                        GLOBAL const STORE_T* src, View sv, i64 src_step, GLOBAL STORE_T* out, View ov,
                        i64 out_step, i64 axis_size, GLOBAL i32* flag) {
    i64 c = GLOBAL_ID(0);
    if (c >= n_cols) return;
    i64 ib = view_at(iv, c);
    i64 sb = view_at(sv, c);
    i64 ob = view_at(ov, c);
    for (i64 j = 0; j < len; ++j) {
        i64 ix = idx[ib + j * idx_step];
        if (ix < 0 || ix >= axis_size) {
            report_index_error(flag, TS_ERR_SCATTER_ADD, ix, axis_size);
            continue;
        }
        i64 d = ob + ix * out_step;
        out[d] = STORE(t_add(LOAD(out[d]), LOAD(src[sb + j * src_step])));
    }
}
#endif
