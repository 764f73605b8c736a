/* 16-bit floats as storage: f16 (IEEE binary16) and bf16 (bfloat16) live in memory as u16 bit
 * patterns and are computed with in f32, written once with integer operations so that every
 * device (with or without cl_khr_fp16, any CUDA architecture) gives the same bits.
 *
 * A program is built for a 16-bit dtype with -D T=f32 (the compute type), -D STORE_T=u16, TS_FLOAT
 * and one of TS_F16 / TS_BF16. Kernels read elements with LOAD(x[i]) and write them with
 * x[i] = STORE(v); for every other dtype STORE_T is T and both are the identity.
 *
 * Conversions to 16 bits round once to nearest, ties to even, exactly as tessera_core's
 * dtype::rounding (the `half` crate's from_f32): from f32 directly; from f64 and i64 through
 * an f32 rounded *to odd*, which makes the two roundings one (Boldo and Melquiond, 2005).
 * NaN keeps its sign and top payload bits and becomes quiet, as in `half`. */

/* f32 -> bf16 bits, rounded to nearest even (overflow rounds to infinity). */
DEVICE u16 ts_f32_to_bf16(f32 x) {
    u32 u = TS_F32_TO_BITS(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u16)((u >> 16) | 0x0040u);
    return (u16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* bf16 bits -> f32 (exact). */
DEVICE f32 ts_bf16_to_f32(u16 h) { return TS_BITS_TO_F32((u32)h << 16); }

/* f32 -> f16 bits, rounded to nearest even: infinity from 65520 up, subnormals below 2^-14. */
DEVICE u16 ts_f32_to_f16(f32 x) {
    u32 u = TS_F32_TO_BITS(x);
    u32 sign = (u >> 16) & 0x8000u;
    u32 a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (u16)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (u16)(sign | 0x7c00u);
    if (a >= 0x38800000u) {
        /* Normal: rebias the exponent by 127 - 15, then round the 13 dropped bits. */
        u32 r = a - 0x38000000u;
        return (u16)(sign | ((r + 0x0fffu + ((r >> 13) & 1u)) >> 13));
    }
    if (a < 0x33000000u) return (u16)sign; /* below half the smallest subnormal */
    /* Subnormal: the 24-bit significand shifted right by 14..24, rounded; a carry into bit 10
     * gives the smallest normal, which is the right encoding. */
    u32 m = (a & 0x7fffffu) | 0x800000u;
    u32 shift = 126u - (a >> 23);
    u32 q = m >> shift;
    u32 rem = m & ((1u << shift) - 1u);
    u32 halfway = 1u << (shift - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u) != 0u)) q += 1u;
    return (u16)(sign | q);
}

/* f16 bits -> f32 (exact). */
DEVICE f32 ts_f16_to_f32(u16 h) {
    u32 sign = ((u32)h & 0x8000u) << 16;
    u32 e = ((u32)h >> 10) & 0x1fu;
    u32 m = (u32)h & 0x3ffu;
    if (e == 0x1fu) return TS_BITS_TO_F32(sign | 0x7f800000u | (m != 0u ? 0x400000u : 0u) | (m << 13));
    if (e != 0u) return TS_BITS_TO_F32(sign | ((e + 112u) << 23) | (m << 13));
    /* Zero or subnormal: m * 2^-24, exact in f32. */
    f32 v = (f32)m * 5.9604644775390625e-8f;
    return sign != 0u ? -v : v;
}

#if defined(TS_HAS_FP64)
/* f64 -> f32 rounded to odd: truncated toward zero, last bit set when inexact (NaN stays NaN;
 * beyond f32's range, f32's largest value with its odd last bit). */
DEVICE f32 ts_f64_to_f32_odd(f64 x) {
    f32 nearest = (f32)x;
    if (x != x || (f64)nearest == x) return nearest;
    u32 bits = TS_F32_TO_BITS(nearest);
    if (fabs((f64)nearest) > fabs(x)) bits -= 1u;
    return TS_BITS_TO_F32(bits | 1u);
}
#endif

/* i64 -> f32 rounded to odd, exactly from the integer. */
DEVICE f32 ts_i64_to_f32_odd(i64 x) {
    u64 magnitude = x < 0 ? (u64)0 - (u64)x : (u64)x;
    int bits = 0;
    while (bits < 64 && (magnitude >> bits) != 0) ++bits;
    f32 value;
    if (bits <= 24) {
        value = (f32)magnitude;
    } else {
        int shift = bits - 24;
        u64 kept = magnitude >> shift;
        if ((magnitude & (((u64)1 << shift) - 1)) != 0) kept |= 1;
        /* Exact: 24 significant bits times a power of two (shift <= 40). */
        value = (f32)kept * TS_BITS_TO_F32((u32)(127 + shift) << 23);
    }
    return x < 0 ? -value : value;
}

#ifndef STORE_T
#define STORE_T T
#endif

#if defined(TS_F16) || defined(TS_BF16)
#define TS_HALF 1
#endif

#if defined(TS_F16)
#define LOAD(v) ts_f16_to_f32(v)
#define STORE(v) ts_f32_to_f16(v)
#elif defined(TS_BF16)
#define LOAD(v) ts_bf16_to_f32(v)
#define STORE(v) ts_f32_to_bf16(v)
#else
#define LOAD(v) (v)
#define STORE(v) (v)
#endif
