//! 2-D convolution and its two gradients for bf16 tensors on the bf16 GEMM (AMX tiles or
//! `vdpbf16ps`, see [`super::gemm_bf16`]): the im2col scheme of [`super::conv`] with bf16
//! column matrices, and f32 wherever that scheme sums more than one product (the input
//! gradient's col2im, the weight gradient's sum over samples), so every output is rounded to
//! bf16 once, as the widening path rounds it.

use super::conv::{
    col2im_sample, im2col_into, per_sample_tasks, sum_over_sample_runs, ConvGeometry,
};
use super::gemm_bf16::{product_into, Bf16Matrix};
use crate::alloc::{try_resize, try_zeroed};
use rayon::prelude::*;
use tessera_core::{bf16, Result};

/// A row-major `rows x cols` matrix over all of `data`.
fn row_major(data: &[bf16], rows: usize, cols: usize) -> Bf16Matrix<'_> {
    Bf16Matrix {
        data,
        offset: 0,
        rows,
        cols,
        rs: cols,
        cs: 1,
    }
}

/// The transpose of `m`, as a view.
fn transposed(m: Bf16Matrix<'_>) -> Bf16Matrix<'_> {
    Bf16Matrix {
        rows: m.cols,
        cols: m.rows,
        rs: m.cs,
        cs: m.rs,
        ..m
    }
}

/// f32 values rounded once to bf16.
fn rounded(values: &[f32]) -> Result<Vec<bf16>> {
    let mut out = try_zeroed::<bf16>(values.len())?;
    super::wide::map_contiguous(&mut out, values, &super::cast::f32_to_bf16);
    Ok(out)
}

/// The threads each GEMM may use: one when the samples are the parallel tasks.
fn gemm_threads(g: &ConvGeometry) -> usize {
    if per_sample_tasks(g) {
        1
    } else {
        g.split.threads
    }
}

/// `x: [n, c, h, w]` convolved with `weight: [o, c, kh, kw]` (both contiguous): the
/// contiguous output `[n, o, oh, ow]`.
pub(crate) fn conv2d(x: &[bf16], weight: &[bf16], g: &ConvGeometry) -> Result<Vec<bf16>> {
    const OP: &str = "conv2d";
    let (patch, positions) = (g.patch(), g.positions());
    ConvGeometry::check_len(OP, "input", x.len(), g.n * g.image())?;
    ConvGeometry::check_len(OP, "weight", weight.len(), g.o * patch)?;
    let mut out = try_zeroed::<bf16>(g.n * g.o * positions)?;
    if out.is_empty() {
        return Ok(out);
    }
    let threads = gemm_threads(g);
    let w_mat = row_major(weight, g.o, patch);
    let sample = |b: usize, out_b: &mut [bf16], cols: &mut Vec<bf16>| -> Result<()> {
        im2col_into(&x[b * g.image()..(b + 1) * g.image()], g, cols)?;
        product_into(&w_mat, &row_major(cols, patch, positions), threads, out_b)
    };
    if per_sample_tasks(g) {
        out.par_chunks_mut(g.o * positions)
            .enumerate()
            .try_for_each_init(Vec::new, |cols, (b, out_b)| sample(b, out_b, cols))?;
    } else {
        let mut cols = Vec::new();
        for (b, out_b) in out.chunks_mut(g.o * positions).enumerate() {
            sample(b, out_b, &mut cols)?;
        }
    }
    Ok(out)
}

/// The input gradient `[n, c, h, w]` of a convolution, from `grad_out: [n, o, oh, ow]` and the
/// weight (both contiguous): `Wᵀ · g_b` in f32 per sample, added back by col2im in f32, then
/// rounded.
pub(crate) fn conv2d_backward_input(
    grad_out: &[bf16],
    weight: &[bf16],
    g: &ConvGeometry,
) -> Result<Vec<bf16>> {
    const OP: &str = "conv2d_backward_input";
    let (patch, positions) = (g.patch(), g.positions());
    ConvGeometry::check_len(OP, "grad_out", grad_out.len(), g.n * g.o * positions)?;
    ConvGeometry::check_len(OP, "weight", weight.len(), g.o * patch)?;
    let mut dx = try_zeroed::<f32>(g.n * g.image())?;
    if dx.is_empty() || positions == 0 {
        return rounded(&dx);
    }
    let threads = gemm_threads(g);
    let w_t = transposed(row_major(weight, g.o, patch));
    let sample = |b: usize, dx_b: &mut [f32], cols: &mut Vec<f32>| -> Result<()> {
        try_resize(cols, patch * positions, 0.0)?;
        let g_b = &grad_out[b * g.o * positions..(b + 1) * g.o * positions];
        product_into(&w_t, &row_major(g_b, g.o, positions), threads, cols)?;
        col2im_sample(cols, g, dx_b);
        Ok(())
    };
    if per_sample_tasks(g) {
        dx.par_chunks_mut(g.image())
            .enumerate()
            .try_for_each_init(Vec::new, |cols, (b, dx_b)| sample(b, dx_b, cols))?;
    } else {
        let mut cols = Vec::new();
        for (b, dx_b) in dx.chunks_mut(g.image()).enumerate() {
            sample(b, dx_b, &mut cols)?;
        }
    }
    rounded(&dx)
}

/// The weight gradient `[o, c, kh, kw]` of a convolution, from the input `x: [n, c, h, w]` and
/// `grad_out: [n, o, oh, ow]` (both contiguous): `g_b · cols_bᵀ` summed over the samples in
/// f32 (as [`sum_over_sample_runs`] orders the sum), then rounded.
pub(crate) fn conv2d_backward_weight(
    x: &[bf16],
    grad_out: &[bf16],
    g: &ConvGeometry,
) -> Result<Vec<bf16>> {
    const OP: &str = "conv2d_backward_weight";
    let (patch, positions) = (g.patch(), g.positions());
    ConvGeometry::check_len(OP, "input", x.len(), g.n * g.image())?;
    ConvGeometry::check_len(OP, "grad_out", grad_out.len(), g.n * g.o * positions)?;
    let len = g.o * patch;
    if len == 0 || g.n == 0 || positions == 0 {
        return try_zeroed(len);
    }
    let accumulate = |samples: std::ops::Range<usize>, split: bool| -> Result<Vec<f32>> {
        let threads = if split { g.split.threads } else { 1 };
        let mut acc = try_zeroed::<f32>(len)?;
        let mut product = try_zeroed::<f32>(len)?;
        let mut cols = Vec::new();
        for b in samples {
            im2col_into(&x[b * g.image()..(b + 1) * g.image()], g, &mut cols)?;
            let g_b = &grad_out[b * g.o * positions..(b + 1) * g.o * positions];
            let cols_t = transposed(row_major(&cols, patch, positions));
            product_into(
                &row_major(g_b, g.o, positions),
                &cols_t,
                threads,
                &mut product,
            )?;
            for (a, p) in acc.iter_mut().zip(&product) {
                *a += p;
            }
        }
        Ok(acc)
    };
    rounded(&sum_over_sample_runs(g, len, accumulate)?)
}

#[cfg(test)]
mod tests {
    //! Against the f32 convolution of [`super::super::conv`] on the same (exactly widened)
    //! values: with small integers and halves every product and sum is exact in f32, so the
    //! bf16 results must equal the f32 results rounded once.
    use super::*;
    use crate::kernels::conv;
    use crate::kernels::gemm_bf16::has_fast_kernel;
    use crate::parallel::Parallelism;
    use tessera_core::Conv2dParams;

    fn values(len: usize, seed: usize) -> Vec<bf16> {
        (0..len)
            .map(|i| bf16::from_f32((((i * 5 + seed * 3) % 9) as f32 - 4.0) * 0.5))
            .collect()
    }

    fn wide(v: &[bf16]) -> Vec<f32> {
        v.iter().map(|x| x.to_f32()).collect()
    }

    fn narrow(v: &[f32]) -> Vec<bf16> {
        v.iter().map(|&x| bf16::from_f32(x)).collect()
    }

    #[test]
    fn bf16_convolutions_equal_the_f32_ones_rounded_once() {
        if !has_fast_kernel() {
            eprintln!("skipped: this CPU has no bf16 GEMM kernel (bf16 convolutions widen)");
            return;
        }
        let cases = [
            // (input, weight, stride, padding, dilation)
            ([2, 3, 7, 6], [4, 3, 3, 3], (1, 1), (1, 1), (1, 1)),
            ([3, 2, 9, 8], [5, 2, 3, 2], (2, 1), (0, 1), (1, 2)),
            ([1, 33, 5, 5], [40, 33, 1, 1], (1, 1), (0, 0), (1, 1)),
        ];
        for (x_dims, w_dims, stride, padding, dilation) in cases {
            let p = Conv2dParams {
                stride,
                padding,
                dilation,
            };
            let out_dims = tessera_core::tensor::check_conv2d(&x_dims, &w_dims, p).unwrap();
            for threads in [1, 2] {
                let split = Parallelism {
                    threads,
                    ..Parallelism::current()
                };
                let g = ConvGeometry::new("test", &x_dims, &w_dims, &out_dims, p)
                    .unwrap()
                    .with_split(split);
                let x = values(x_dims.iter().product(), 1);
                let w = values(w_dims.iter().product(), 2);
                let go = values(out_dims.iter().product(), 3);
                let (xf, wf, gf) = (wide(&x), wide(&w), wide(&go));
                let case = format!("{x_dims:?} * {w_dims:?}, {threads} threads");
                assert_eq!(
                    conv2d(&x, &w, &g).unwrap(),
                    narrow(&conv::conv2d(&xf, &wf, &g).unwrap()),
                    "forward, {case}"
                );
                assert_eq!(
                    conv2d_backward_input(&go, &w, &g).unwrap(),
                    narrow(&conv::conv2d_backward_input(&gf, &wf, &g).unwrap()),
                    "input gradient, {case}"
                );
                assert_eq!(
                    conv2d_backward_weight(&x, &go, &g).unwrap(),
                    narrow(&conv::conv2d_backward_weight(&xf, &gf, &g).unwrap()),
                    "weight gradient, {case}"
                );
            }
        }
    }
}
