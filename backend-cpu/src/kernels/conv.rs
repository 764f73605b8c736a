//! 2-D convolution and its two gradients as one im2col and one GEMM per sample, with the
//! samples spread over rayon (each task keeps its own column buffer, so nothing is shared and
//! the columns of one sample stay in cache for the GEMM that reads them).
//!
//! For sample `b`, `cols_b: [c*kh*kw, oh*ow]` holds the input value each kernel tap sees at each
//! output position (0 in the padding):
//!
//! ```text
//! forward          out_b  [o, oh*ow]   = W [o, c*kh*kw] · cols_b
//! input gradient   dx_b   = col2im(Wᵀ · g_b)
//! weight gradient  dW     = Σ_b g_b [o, oh*ow] · cols_bᵀ
//! ```
//!
//! With fewer samples than threads (batch-1 inference) the samples run in turn and each GEMM is
//! split over the threads instead.

use rayon::prelude::*;
use tessera_core::{Conv2dParams, Error, Result};

use super::gemm::{try_gemm, try_split_gemm, GemmElement, MatMut, MatRef};
use crate::alloc::{checked_len, try_resize, try_zeroed};
use crate::parallel::Parallelism;

/// The sizes of one convolution: input `[n, c, h, w]`, weight `[o, c, kh, kw]`, output
/// `[n, o, oh, ow]`, and the parameters.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvGeometry {
    pub(super) n: usize,
    c: usize,
    h: usize,
    w: usize,
    pub(super) o: usize,
    kh: usize,
    kw: usize,
    oh: usize,
    ow: usize,
    p: Conv2dParams,
    /// When the samples or the GEMMs are spread over rayon.
    pub(super) split: Parallelism,
}

impl ConvGeometry {
    /// The geometry of `input_dims` convolved with `weight_dims` into `out_dims`, which the
    /// caller has checked with `tessera_core::tensor::check_conv2d` (rank 4, equal channel
    /// counts, a window that fits). The channel count is the weight's (a mismatch with the
    /// input is an error here too), and every buffer size the kernels use is checked, so no
    /// later product overflows and every GEMM operand has exactly the size of its slice.
    pub(crate) fn new(
        op: &'static str,
        input_dims: &[usize],
        weight_dims: &[usize],
        out_dims: &[usize],
        p: Conv2dParams,
    ) -> Result<Self> {
        if input_dims.len() != 4 || weight_dims.len() != 4 || out_dims.len() != 4 {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("dims {input_dims:?}, {weight_dims:?}, {out_dims:?} must be rank 4"),
            });
        }
        if input_dims[1] != weight_dims[1] {
            return Err(Error::InvalidArgument {
                op,
                msg: format!(
                    "input {input_dims:?} has {} channels but weight {weight_dims:?} expects {}",
                    input_dims[1], weight_dims[1]
                ),
            });
        }
        let g = ConvGeometry {
            n: input_dims[0],
            c: weight_dims[1],
            h: input_dims[2],
            w: input_dims[3],
            o: weight_dims[0],
            kh: weight_dims[2],
            kw: weight_dims[3],
            oh: out_dims[2],
            ow: out_dims[3],
            p,
            split: Parallelism::current(),
        };
        checked_len(op, &[g.n, g.c, g.h, g.w])?;
        checked_len(op, &[g.o, g.c, g.kh, g.kw])?;
        checked_len(op, &[g.n, g.o, g.oh, g.ow])?;
        checked_len(op, &[g.c, g.kh, g.kw, g.oh, g.ow])?;
        Ok(g)
    }

    /// The same geometry with other parallelism thresholds.
    #[cfg(test)]
    pub(crate) fn with_split(self, split: Parallelism) -> Self {
        ConvGeometry { split, ..self }
    }

    /// Errors unless `values` has the `expected` length of the operand `what`.
    pub(super) fn check_len(
        op: &'static str,
        what: &str,
        values: usize,
        expected: usize,
    ) -> Result<()> {
        if values != expected {
            return Err(Error::InvalidArgument {
                op,
                msg: format!("{what} has {values} elements, not the {expected} its dims need"),
            });
        }
        Ok(())
    }

    /// Rows of a column buffer: `c * kh * kw`.
    pub(super) fn patch(&self) -> usize {
        self.c * self.kh * self.kw
    }

    /// Output positions per channel: `oh * ow`.
    pub(super) fn positions(&self) -> usize {
        self.oh * self.ow
    }

    /// Elements of one input sample.
    pub(super) fn image(&self) -> usize {
        self.c * self.h * self.w
    }

    /// For kernel column `j`, the output columns whose input column is inside the image, and
    /// the input column of output column 0 (`x * stride + shift`).
    fn valid_cols(&self, j: usize) -> (std::ops::Range<usize>, isize) {
        let (sw, pw, dw) = (self.p.stride.1, self.p.padding.1, self.p.dilation.1);
        let shift = (j * dw) as isize - pw as isize;
        // ix = x * sw + shift must lie in [0, w).
        let first = if shift >= 0 {
            0
        } else {
            (-shift as usize).div_ceil(sw)
        };
        let end = if (self.w as isize) <= shift {
            0
        } else {
            ((self.w as isize - shift) as usize).div_ceil(sw)
        };
        (
            first.min(self.ow)..end.min(self.ow).max(first.min(self.ow)),
            shift,
        )
    }

    /// The input row of output row `y` for kernel row `i`, if inside the image.
    fn input_row(&self, y: usize, i: usize) -> Option<usize> {
        let iy = (y * self.p.stride.0 + i * self.p.dilation.0) as isize - self.p.padding.0 as isize;
        (iy >= 0 && (iy as usize) < self.h).then_some(iy as usize)
    }
}

/// An element of a column matrix: copied, with a zero for the padding.
pub(crate) trait ColumnElement: Copy {
    /// The padding value: zero.
    const PAD: Self;
}

impl ColumnElement for f32 {
    const PAD: Self = 0.0;
}

impl ColumnElement for f64 {
    const PAD: Self = 0.0;
}

impl ColumnElement for tessera_core::bf16 {
    const PAD: Self = tessera_core::bf16::ZERO;
}

/// Replaces the contents of `cols` with the column matrix `[c*kh*kw, oh*ow]` of one input
/// sample `x: [c, h, w]`, appended row by row: every element is written once (zeros only
/// where a tap falls in the padding), so the buffer needs no zero-filling first and one
/// buffer serves every sample. Errors only when `cols` cannot grow to hold the matrix.
pub(super) fn im2col_into<T: ColumnElement>(
    x: &[T],
    g: &ConvGeometry,
    cols: &mut Vec<T>,
) -> Result<()> {
    let len = g.patch() * g.positions();
    cols.clear();
    cols.try_reserve_exact(len)
        .map_err(|_| crate::alloc::out_of_memory::<T>(len))?;
    let sw = g.p.stride.1;
    let zeros = |cols: &mut Vec<T>, n: usize| cols.resize(cols.len() + n, T::PAD);
    for ci in 0..g.c {
        let plane = &x[ci * g.h * g.w..(ci + 1) * g.h * g.w];
        for i in 0..g.kh {
            for j in 0..g.kw {
                let (valid, shift) = g.valid_cols(j);
                if g.p.stride == (1, 1) && g.ow == g.w && !valid.is_empty() {
                    append_row_shifted(plane, g, i, (valid, shift), cols);
                    continue;
                }
                for y in 0..g.oh {
                    let Some(iy) = g.input_row(y, i) else {
                        zeros(cols, g.ow);
                        continue;
                    };
                    let src = &plane[iy * g.w..(iy + 1) * g.w];
                    zeros(cols, valid.start);
                    if !valid.is_empty() {
                        let base = (valid.start as isize * sw as isize + shift) as usize;
                        if sw == 1 {
                            cols.extend_from_slice(&src[base..base + valid.len()]);
                        } else {
                            cols.extend((0..valid.len()).map(|k| src[base + k * sw]));
                        }
                    }
                    zeros(cols, g.ow - valid.end);
                }
            }
        }
    }
    debug_assert_eq!(cols.len(), len);
    Ok(())
}

/// One row of the column matrix (kernel row `i`, kernel column with `(valid, shift)`) when
/// both strides are 1 and output rows are as wide as input rows (a "same" convolution): the
/// row is then the image plane shifted by a constant offset, so the rows of input that the
/// row sees are appended as one contiguous block, and the few elements of each line that came
/// from the neighbouring line (the columns outside `valid`) are zeroed afterwards. One copy
/// per row of the matrix instead of one per image line.
fn append_row_shifted<T: ColumnElement>(
    plane: &[T],
    g: &ConvGeometry,
    i: usize,
    (valid, shift): (std::ops::Range<usize>, isize),
    cols: &mut Vec<T>,
) {
    let ow = g.ow;
    let row_start = cols.len();
    // With unit stride the output lines whose input line is inside the image are consecutive.
    let first = (0..g.oh).find_map(|y| g.input_row(y, i).map(|iy| (y, iy)));
    let last = (0..g.oh).rev().find(|&y| g.input_row(y, i).is_some());
    let (Some((y0, iy0)), Some(y_last)) = (first, last) else {
        cols.resize(row_start + g.oh * ow, T::PAD);
        return;
    };
    cols.resize(row_start + y0 * ow + valid.start, T::PAD);
    // From (y0, valid.start) to (y_last, valid.end - 1): inside the plane, as each end is.
    let start = iy0 * g.w + (valid.start as isize + shift) as usize;
    let len = (y_last - y0) * ow + valid.len();
    cols.extend_from_slice(&plane[start..start + len]);
    cols.resize(row_start + g.oh * ow, T::PAD);
    for y in y0..=y_last {
        let line = &mut cols[row_start + y * ow..row_start + (y + 1) * ow];
        line[..valid.start].fill(T::PAD);
        line[valid.end..].fill(T::PAD);
    }
}

/// Adds the columns `cols: [c*kh*kw, oh*ow]` back into one input-gradient sample `dx: [c, h, w]`.
pub(super) fn col2im_sample<T: GemmElement + std::ops::AddAssign>(
    cols: &[T],
    g: &ConvGeometry,
    dx: &mut [T],
) {
    let (positions, sw) = (g.positions(), g.p.stride.1);
    let mut rows = cols.chunks_exact(positions);
    for ci in 0..g.c {
        let plane = &mut dx[ci * g.h * g.w..(ci + 1) * g.h * g.w];
        for i in 0..g.kh {
            for j in 0..g.kw {
                let src = rows.next().expect("cols has c*kh*kw rows");
                let (valid, shift) = g.valid_cols(j);
                for (y, col_row) in src.chunks_exact(g.ow).enumerate() {
                    let Some(iy) = g.input_row(y, i) else {
                        continue;
                    };
                    if valid.is_empty() {
                        continue;
                    }
                    let dst = &mut plane[iy * g.w..(iy + 1) * g.w];
                    let base = (valid.start as isize * sw as isize + shift) as usize;
                    for (k, &v) in col_row[valid.clone()].iter().enumerate() {
                        dst[base + k * sw] += v;
                    }
                }
            }
        }
    }
}

/// True when the samples should be spread over rayon (else each GEMM is split instead).
pub(super) fn per_sample_tasks(g: &ConvGeometry) -> bool {
    g.n >= 2 && g.split.threads >= 2
}

/// `x: [n, c, h, w]` (contiguous) convolved with `weight: [o, c, kh, kw]` (contiguous):
/// the contiguous output `[n, o, oh, ow]`.
pub(crate) fn conv2d<T: GemmElement + ColumnElement>(
    x: &[T],
    weight: &[T],
    g: &ConvGeometry,
) -> Result<Vec<T>> {
    const OP: &str = "conv2d";
    let (patch, positions) = (g.patch(), g.positions());
    ConvGeometry::check_len(OP, "input", x.len(), g.n * g.image())?;
    ConvGeometry::check_len(OP, "weight", weight.len(), g.o * patch)?;
    let mut out = try_zeroed::<T>(g.n * g.o * positions)?;
    if out.is_empty() {
        return Ok(out);
    }
    let w_mat = MatRef::row_major(weight, patch);
    let sample = |b: usize, out_b: &mut [T], cols: &mut Vec<T>, split: bool| -> Result<()> {
        im2col_into(&x[b * g.image()..(b + 1) * g.image()], g, cols)?;
        let dims = (g.o, patch, positions);
        let (b_mat, c_mat) = (
            MatRef::row_major(cols, positions),
            MatMut::row_major(out_b, positions),
        );
        // SAFETY: W is [o, patch] (its length checked above), cols [patch, positions] and
        // out_b [o, positions], all row-major slices of exactly those sizes; out_b is this
        // task's own.
        unsafe {
            if split {
                try_split_gemm(g.split, dims, w_mat, b_mat, T::ZERO, c_mat)
            } else {
                try_gemm(dims, w_mat, b_mat, T::ZERO, c_mat)
            }
        }
    };
    if per_sample_tasks(g) {
        out.par_chunks_mut(g.o * positions)
            .enumerate()
            .try_for_each_init(Vec::new, |cols, (b, out_b)| sample(b, out_b, cols, false))?;
    } else {
        let mut cols = Vec::new();
        for (b, out_b) in out.chunks_mut(g.o * positions).enumerate() {
            sample(b, out_b, &mut cols, true)?;
        }
    }
    Ok(out)
}

/// The input gradient `[n, c, h, w]` of a convolution, from `grad_out: [n, o, oh, ow]` and the
/// weight (both contiguous).
pub(crate) fn conv2d_backward_input<T: GemmElement + std::ops::AddAssign>(
    grad_out: &[T],
    weight: &[T],
    g: &ConvGeometry,
) -> Result<Vec<T>> {
    const OP: &str = "conv2d_backward_input";
    let (patch, positions) = (g.patch(), g.positions());
    ConvGeometry::check_len(OP, "grad_out", grad_out.len(), g.n * g.o * positions)?;
    ConvGeometry::check_len(OP, "weight", weight.len(), g.o * patch)?;
    let mut dx = try_zeroed::<T>(g.n * g.image())?;
    if dx.is_empty() || positions == 0 {
        return Ok(dx);
    }
    let w_t = MatRef::row_major(weight, patch).t();
    let sample = |b: usize, dx_b: &mut [T], cols: &mut Vec<T>, split: bool| -> Result<()> {
        try_resize(cols, patch * positions, T::ZERO)?;
        let g_b = &grad_out[b * g.o * positions..(b + 1) * g.o * positions];
        let dims = (patch, g.o, positions);
        let (b_mat, c_mat) = (
            MatRef::row_major(g_b, positions),
            MatMut::row_major(cols, positions),
        );
        // SAFETY: Wᵀ is [patch, o] (strides swapped over the [o, patch] weight, whose length
        // is checked above, with the channel count taken from the weight), g_b [o, positions]
        // and cols [patch, positions], all inside their slices; cols is this task's own.
        unsafe {
            if split {
                try_split_gemm(g.split, dims, w_t, b_mat, T::ZERO, c_mat)?
            } else {
                try_gemm(dims, w_t, b_mat, T::ZERO, c_mat)?
            }
        }
        col2im_sample(cols, g, dx_b);
        Ok(())
    };
    if per_sample_tasks(g) {
        dx.par_chunks_mut(g.image())
            .enumerate()
            .try_for_each_init(Vec::new, |cols, (b, dx_b)| sample(b, dx_b, cols, false))?;
    } else {
        let mut cols = Vec::new();
        for (b, dx_b) in dx.chunks_mut(g.image()).enumerate() {
            sample(b, dx_b, &mut cols, true)?;
        }
    }
    Ok(dx)
}

/// The weight gradient `[o, c, kh, kw]` of a convolution, from the input `x: [n, c, h, w]` and
/// `grad_out: [n, o, oh, ow]` (both contiguous). The batch is cut into one run of consecutive
/// samples per thread; each run accumulates its own partial sum, and the partials are added in
/// run order, so the result does not depend on scheduling.
pub(crate) fn conv2d_backward_weight<T: GemmElement + ColumnElement + std::ops::AddAssign>(
    x: &[T],
    grad_out: &[T],
    g: &ConvGeometry,
) -> Result<Vec<T>> {
    const OP: &str = "conv2d_backward_weight";
    let (patch, positions) = (g.patch(), g.positions());
    ConvGeometry::check_len(OP, "input", x.len(), g.n * g.image())?;
    ConvGeometry::check_len(OP, "grad_out", grad_out.len(), g.n * g.o * positions)?;
    let len = g.o * patch;
    if len == 0 || g.n == 0 || positions == 0 {
        return try_zeroed(len);
    }
    let accumulate = |samples: std::ops::Range<usize>, split: bool| -> Result<Vec<T>> {
        let mut acc = try_zeroed::<T>(len)?;
        let mut cols = Vec::new();
        for b in samples {
            im2col_into(&x[b * g.image()..(b + 1) * g.image()], g, &mut cols)?;
            let g_b = &grad_out[b * g.o * positions..(b + 1) * g.o * positions];
            let dims = (g.o, positions, patch);
            let a_mat = MatRef::row_major(g_b, positions);
            let b_mat = MatRef::row_major(&cols, positions).t();
            let c_mat = MatMut::row_major(&mut acc, patch);
            // SAFETY: g_b is [o, positions] (grad_out's length checked above), colsᵀ
            // [positions, patch] (strides swapped) and acc [o, patch], all inside their own
            // buffers; acc belongs to this run.
            unsafe {
                if split {
                    try_split_gemm(g.split, dims, a_mat, b_mat, T::ONE, c_mat)?
                } else {
                    try_gemm(dims, a_mat, b_mat, T::ONE, c_mat)?
                }
            }
        }
        Ok(acc)
    };
    sum_over_sample_runs(g, len, accumulate)
}

/// The sum over the batch of `accumulate(samples, split)`, each call summing `len` values over
/// a run of consecutive samples: one call over the whole batch with its GEMMs split
/// (`split = true`) when the samples are not the parallel tasks, else one run per thread
/// (`split = false`), the partials added in run order so that the result does not depend on
/// scheduling.
pub(super) fn sum_over_sample_runs<
    T: Copy + Send + std::ops::AddAssign + crate::alloc::Zeroable,
>(
    g: &ConvGeometry,
    len: usize,
    accumulate: impl Fn(std::ops::Range<usize>, bool) -> Result<Vec<T>> + Sync,
) -> Result<Vec<T>> {
    if !per_sample_tasks(g) {
        return accumulate(0..g.n, true);
    }
    let runs = g.split.threads.min(g.n);
    let per_run = g.n.div_ceil(runs);
    let partials: Vec<Vec<T>> = (0..g.n.div_ceil(per_run))
        .into_par_iter()
        .map(|r| accumulate(r * per_run..((r + 1) * per_run).min(g.n), false))
        .collect::<Result<_>>()?;
    let mut partials = partials.into_iter();
    let Some(mut total) = partials.next() else {
        return try_zeroed(len);
    };
    for part in partials {
        for (t, p) in total.iter_mut().zip(part) {
            *t += p;
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    //! Miri-sized tests of the three `unsafe` GEMM calls (forward, input and weight gradients)
    //! on the per-sample and the split paths, against the definitions of the convolution
    //! (`miri_` prefix: see `docs/SOUNDNESS.md`).
    use super::*;

    /// A geometry from dims, with the output dims the forward pass produces.
    fn geometry(x: [usize; 4], w: [usize; 4], p: Conv2dParams) -> ConvGeometry {
        let out = tessera_core::tensor::check_conv2d(&x, &w, p).unwrap();
        ConvGeometry::new("test", &x, &w, &out, p).unwrap()
    }

    /// The input position `(row, col)` tap `(i, j)` of output `(y, x)` reads, if not padding.
    fn tap(g: &ConvGeometry, (y, x): (usize, usize), (i, j): (usize, usize)) -> Option<usize> {
        let iy = (y * g.p.stride.0 + i * g.p.dilation.0) as isize - g.p.padding.0 as isize;
        let ix = (x * g.p.stride.1 + j * g.p.dilation.1) as isize - g.p.padding.1 as isize;
        (iy >= 0 && ix >= 0 && (iy as usize) < g.h && (ix as usize) < g.w)
            .then(|| iy as usize * g.w + ix as usize)
    }

    /// Calls `f(b, o, ci, out_pos, in_pos, w_pos)` for every multiply-add of the convolution.
    fn for_each_mac(g: &ConvGeometry, mut f: impl FnMut(usize, usize, usize)) {
        for b in 0..g.n {
            for o in 0..g.o {
                for ci in 0..g.c {
                    for y in 0..g.oh {
                        for x in 0..g.ow {
                            for i in 0..g.kh {
                                for j in 0..g.kw {
                                    if let Some(at) = tap(g, (y, x), (i, j)) {
                                        let out = ((b * g.o + o) * g.oh + y) * g.ow + x;
                                        let input = (b * g.c + ci) * g.h * g.w + at;
                                        let weight = ((o * g.c + ci) * g.kh + i) * g.kw + j;
                                        f(out, input, weight);
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    fn values(len: usize, seed: usize) -> Vec<f64> {
        (0..len)
            .map(|i| ((i * 3 + seed) % 5) as f64 - 2.0)
            .collect()
    }

    #[test]
    fn miri_convolution_and_its_gradients_match_the_definition() {
        // Strided and dilated (im2col line by line), then a "same" convolution with unit
        // strides (whole shifted blocks, `append_row_shifted`), whose 5x5 kernel on 3 lines
        // also has kernel rows that see no input line at all.
        let cases = [
            (
                [2, 4, 5],
                [3, 2, 2, 2],
                Conv2dParams {
                    stride: (2, 1),
                    padding: (1, 0),
                    dilation: (1, 2),
                },
            ),
            (
                [2, 3, 5],
                [2, 2, 5, 5],
                Conv2dParams {
                    stride: (1, 1),
                    padding: (2, 2),
                    dilation: (1, 1),
                },
            ),
        ];
        for (n, ([c, h, w], wdims, p)) in [1, 3].into_iter().flat_map(|n| cases.map(|k| (n, k))) {
            let base = geometry([n, c, h, w], wdims, p);
            let x = values(base.n * base.image(), 1);
            let w = values(base.o * base.patch(), 2);
            let gy = values(base.n * base.o * base.positions(), 3);
            let (mut y, mut dx, mut dw) =
                (vec![0.0; gy.len()], vec![0.0; x.len()], vec![0.0; w.len()]);
            for_each_mac(&base, |o, i, k| {
                y[o] += x[i] * w[k];
                dx[i] += gy[o] * w[k];
                dw[k] += gy[o] * x[i];
            });
            let serial = Parallelism {
                threads: 1,
                ..Parallelism::eager(1)
            };
            for split in [serial, Parallelism::eager(2), Parallelism::eager(3)] {
                let g = base.with_split(split);
                assert_eq!(conv2d(&x, &w, &g).unwrap(), y, "n={n} {split:?}");
                assert_eq!(conv2d_backward_input(&gy, &w, &g).unwrap(), dx);
                assert_eq!(conv2d_backward_weight(&x, &gy, &g).unwrap(), dw);
            }
        }
    }

    #[test]
    fn miri_operands_of_the_wrong_size_never_reach_the_gemm() {
        let g = geometry([1, 1, 1, 1], [1, 1, 1, 1], Conv2dParams::default());
        assert!(conv2d(&[1.0f32], &[], &g).is_err());
        assert!(conv2d_backward_input(&[1.0f32], &[1.0, 2.0], &g).is_err());
        assert!(conv2d_backward_weight(&[1.0f32, 2.0], &[1.0], &g).is_err());
        // Issue 11's reproducer: input dims with 2 channels, a weight with 1.
        let p = Conv2dParams::default();
        assert!(ConvGeometry::new("t", &[1, 2, 1, 1], &[1, 1, 1, 1], &[1, 1, 1, 1], p).is_err());
    }
}
