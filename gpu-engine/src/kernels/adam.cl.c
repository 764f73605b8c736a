/* One Adam/AdamW step of one parameter over contiguous operands (with element offsets): the
 * operations of tessera_core::composite::adam_update, in its order, in one pass. `flags`:
 * bit 0 coupled weight decay (g += decay * p), bit 1 decoupled factor (p *= factor), bit 2
 * AMSGrad (the running maximum `vmax` is read and written). */

#if defined(TS_FLOAT)
KERNEL void adam_update(i64 n, GLOBAL const STORE_T* p, i64 p_off, GLOBAL const STORE_T* g,
                        i64 g_off, GLOBAL const STORE_T* m, i64 m_off,
                        GLOBAL const STORE_T* v, i64 v_off, GLOBAL const STORE_T* vmax,
                        i64 vmax_off, i32 flags, T beta1, T one_minus_beta1, T beta2,
                        T one_minus_beta2, T decay, T factor, T bias_correction2_sqrt, T eps,
                        T step_size, GLOBAL STORE_T* p_out, GLOBAL STORE_T* m_out,
                        GLOBAL STORE_T* v_out, GLOBAL STORE_T* vmax_out) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    T param = LOAD(p[p_off + i]);
    T grad = LOAD(g[g_off + i]);
    if (flags & 1) grad = grad + param * decay;
    if (flags & 2) param = param * factor;
    T first = LOAD(m[m_off + i]) * beta1 + grad * one_minus_beta1;
    T second = LOAD(v[v_off + i]) * beta2 + (grad * grad) * one_minus_beta2;
    T used = second;
    if (flags & 4) {
        used = t_max(LOAD(vmax[vmax_off + i]), second);
        vmax_out[i] = STORE(used);
    }
    T denom = sqrt(used) / bias_correction2_sqrt + eps;
    p_out[i] = STORE(param - (first / denom) * step_size);
    m_out[i] = STORE(first);
    v_out[i] = STORE(second);
}
#endif
