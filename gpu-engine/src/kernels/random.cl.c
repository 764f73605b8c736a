/* Counter-based random numbers: Philox4x32-10, element i of a draw (seed, offset) computed from
 * the counter offset + i alone, exactly as tessera_core::random::sample_f32 / sample_f64. */

#if defined(TS_FLOAT)

#define PHILOX_M0 0xD2511F53u
#define PHILOX_M1 0xCD9E8D57u
#define PHILOX_W0 0x9E3779B9u
#define PHILOX_W1 0xBB67AE85u

/* The four random words of counter `index` in stream (key0, key1). */
DEVICE void philox4x32_10(u64 index, u32 key0, u32 key1, u32* w) {
    u32 c0 = (u32)index, c1 = (u32)(index >> 32), c2 = 0, c3 = 0;
    u32 k0 = key0, k1 = key1;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += PHILOX_W0;
            k1 += PHILOX_W1;
        }
        u64 p0 = (u64)PHILOX_M0 * (u64)c0;
        u64 p1 = (u64)PHILOX_M1 * (u64)c2;
        u32 hi0 = (u32)(p0 >> 32), lo0 = (u32)p0;
        u32 hi1 = (u32)(p1 >> 32), lo1 = (u32)p1;
        u32 n0 = hi1 ^ c1 ^ k0;
        u32 n2 = hi0 ^ c3 ^ k1;
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    w[0] = c0;
    w[1] = c1;
    w[2] = c2;
    w[3] = c3;
}

/* `a` and `b` are (low, high - low) for uniform, (mean, std) for normal, already rounded to T
 * by the host (f32 draws round them to f32 like sample_f32). Separate statements keep every
 * product and sum rounded on its own (FP_CONTRACT OFF, --fmad=false on CUDA).
 * 16-bit draws are the f32 draw rounded to nearest even; a uniform value that rounded up to
 * `bound` (the least f32 >= high, or +inf when high <= low) steps down to the next smaller
 * 16-bit value, as in backend-cpu's sample_half, so that high stays excluded. */
KERNEL void random_uniform(i64 n, u32 key0, u32 key1, u64 offset, T a, T b, T bound,
                           GLOBAL STORE_T* out) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    u32 w[4];
    philox4x32_10(offset + (u64)i, key0, key1, w);
#if defined(TS_F64)
    u64 bits = (((u64)w[0] << 32) | (u64)w[1]) >> 11;
    T u = (T)bits * (T)(1.0 / 9007199254740992.0);
#else
    T u = (T)(w[0] >> 8) * (T)(1.0f / 16777216.0f);
#endif
    T scaled = b * u;
#if defined(TS_HALF)
    STORE_T h = STORE(a + scaled);
    T x = LOAD(h);
    if (x >= bound) h = x > (T)0 ? (STORE_T)(h - 1) : (x == (T)0 ? (STORE_T)0x8001 : (STORE_T)(h + 1));
    out[i] = h;
#else
    (void)bound;
    out[i] = a + scaled;
#endif
}

KERNEL void random_normal(i64 n, u32 key0, u32 key1, u64 offset, T a, T b,
                          GLOBAL STORE_T* out) {
    i64 i = GLOBAL_ID(0);
    if (i >= n) return;
    u32 w[4];
    philox4x32_10(offset + (u64)i, key0, key1, w);
#if defined(TS_F64)
    T scale = (T)(1.0 / 9007199254740992.0);
    u64 bits1 = (((u64)w[0] << 32) | (u64)w[1]) >> 11;
    u64 bits2 = (((u64)w[2] << 32) | (u64)w[3]) >> 11;
    T u1 = (T)(bits1 + 1) * scale;
    T u2 = (T)bits2 * scale;
    T two_pi = (T)6.283185307179586;
#else
    T scale = (T)(1.0f / 16777216.0f);
    T u1 = (T)((w[0] >> 8) + 1) * scale;
    T u2 = (T)(w[1] >> 8) * scale;
    T two_pi = (T)6.2831855f;
#endif
    T radius = sqrt((T)-2 * log(u1));
    T angle = two_pi * u2;
    T z = radius * cos(angle);
    T scaled = b * z;
    out[i] = STORE(a + scaled);
}

#endif
