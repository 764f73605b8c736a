/* im2col for 2-d convolution: the columns [n, c * kh * kw, oh * ow] of an input [n, c, h, w]
 * read through its view `xv` (rank 4, not simplified), zero outside the input (padding).
 * cols[b][(ch * kh + i) * kw + j][oy * ow + ox] = x[b][ch][oy*sh - ph + i*dh][ox*sw - pw + j*dw] */

#if defined(TS_FLOAT)
KERNEL void im2col(i64 total, GLOBAL const STORE_T* x, View xv, i64 kh, i64 kw, i64 sh, i64 sw,
                   i64 ph, i64 pw, i64 dh, i64 dw, i64 oh, i64 ow, GLOBAL STORE_T* cols) {
    i64 idx = GLOBAL_ID(0);
    if (idx >= total) return;
    i64 positions = oh * ow;
    i64 taps = xv.dims[1] * kh * kw;
    i64 p = idx % positions;
    i64 t = idx / positions;
    i64 r = t % taps;
    i64 b = t / taps;
    i64 j = r % kw;
    i64 i = (r / kw) % kh;
    i64 ch = r / (kw * kh);
    i64 y = (p / ow) * sh - ph + i * dh;
    i64 xx = (p % ow) * sw - pw + j * dw;
    STORE_T v = STORE((T)0);
    if (y >= 0 && y < xv.dims[2] && xx >= 0 && xx < xv.dims[3]) {
        v = x[xv.offset + b * xv.strides[0] + ch * xv.strides[1] + y * xv.strides[2] +
              xx * xv.strides[3]];
    }
    cols[idx] = v;
}
#endif
