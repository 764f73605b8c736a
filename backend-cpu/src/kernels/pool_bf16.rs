//! Max and average pooling of bf16 tensors and their gradients: each plane is widened (exactly)
//! into an f32 scratch plane, pooled by the f32 plane kernels of [`super::pool`], and its
//! results rounded back once. That is bit for bit the widening path (the whole tensor widened,
//! pooled in f32, rounded), without its whole-tensor f32 buffers and their passes over memory:
//! a bf16 network keeps its activations in bf16 through ReLU and pooling, as PyTorch's autocast
//! does, and these kernels read and write half the bytes of the f32 ones.

use std::mem::MaybeUninit;

use rayon::prelude::*;
use tessera_core::{bf16, Result};

use super::lanes::Lane;
use super::pool::{
    avg_backward_plane, avg_plane, check_avg_backward, check_max_backward, max_backward_plane,
    max_plane, PoolGeometry,
};
use super::wide::map_contiguous;
use crate::alloc::{assume_init, try_uninit, try_zeroed};
use crate::parallel::worth_parallel;

/// The f32 scratch planes of one task: an input plane and an output plane.
struct Scratch {
    input: Vec<f32>,
    output: Vec<f32>,
}

impl Scratch {
    fn new(input: usize, output: usize) -> Result<Scratch> {
        Ok(Scratch {
            input: try_zeroed(input)?,
            output: try_zeroed(output)?,
        })
    }

    /// `src` widened into the input plane.
    fn widen(&mut self, src: &[bf16]) {
        map_contiguous(&mut self.input, src, &|v: bf16| v.load());
    }
}

/// `wide` rounded into `dst`: every element of `dst` is written when the two have one length.
fn narrow(dst: &mut [MaybeUninit<bf16>], wide: &[f32]) {
    debug_assert_eq!(dst.len(), wide.len());
    map_contiguous(dst, wide, &|v: f32| {
        MaybeUninit::new(<bf16 as Lane<f32>>::store(v))
    });
}

/// `planes` planes of `per_plane` bf16 outputs, each computed by `f(scratch, plane)` into the
/// scratch output plane (of `per_plane` elements) and rounded into place: in parallel when
/// `work` is large enough, each task with its own scratch planes of `scratch_in` and
/// `per_plane` elements.
fn planes_through_f32(
    planes: usize,
    per_plane: usize,
    scratch_in: usize,
    work: usize,
    f: impl Fn(&mut Scratch, usize) + Sync,
) -> Result<Vec<bf16>> {
    let mut out = try_uninit::<bf16>(planes * per_plane)?;
    if per_plane > 0 {
        let init = || Scratch::new(scratch_in, per_plane);
        let run = |s: &mut Result<Scratch>,
                   (p, chunk): (usize, &mut [MaybeUninit<bf16>])|
         -> Result<()> {
            let s = s.as_mut().map_err(|e| e.clone())?;
            f(s, p);
            narrow(chunk, &s.output);
            Ok(())
        };
        if worth_parallel(work) {
            out.par_chunks_mut(per_plane)
                .enumerate()
                .try_for_each_init(init, run)?;
        } else {
            let mut s = init();
            out.chunks_mut(per_plane)
                .enumerate()
                .try_for_each(|item| run(&mut s, item))?;
        }
    }
    // SAFETY: `out` is `planes` whole chunks of `per_plane` elements (or empty), and `run`
    // rounded a scratch plane of `per_plane` elements into each chunk, writing all of it; an
    // error returned above, before this point.
    Ok(unsafe { assume_init(out) })
}

/// [`super::pool::max_pool2d`] for a contiguous bf16 `x`.
pub(crate) fn max_pool2d(x: &[bf16], g: &PoolGeometry) -> Result<(Vec<bf16>, Vec<i64>)> {
    let len = g.output_len();
    let mut values = try_uninit::<bf16>(len)?;
    let mut args = try_zeroed::<i64>(len)?;
    let per_plane = g.plane_out();
    if per_plane == 0 {
        // SAFETY: no plane has an output, so `values` is empty.
        return Ok((unsafe { assume_init(values) }, args));
    }
    let init = || Scratch::new(g.plane_in(), per_plane);
    let plane = |s: &mut Result<Scratch>,
                 (p, (vals, idx)): (usize, (&mut [MaybeUninit<bf16>], &mut [i64]))|
     -> Result<()> {
        let s = s.as_mut().map_err(|e| e.clone())?;
        s.widen(g.input_plane(x, p));
        s.output.fill(f32::NEG_INFINITY);
        max_plane(&s.input, g, &mut s.output, idx);
        narrow(vals, &s.output);
        Ok(())
    };
    if worth_parallel(g.max_work()) {
        values
            .par_chunks_mut(per_plane)
            .zip(args.par_chunks_mut(per_plane))
            .enumerate()
            .try_for_each_init(init, plane)?;
    } else {
        let mut s = init();
        values
            .chunks_mut(per_plane)
            .zip(args.chunks_mut(per_plane))
            .enumerate()
            .try_for_each(|item| plane(&mut s, item))?;
    }
    // SAFETY: `values` is whole planes of `per_plane` elements, and `plane` rounded a scratch
    // plane of `per_plane` elements into each, writing all of it (errors returned above).
    Ok((unsafe { assume_init(values) }, args))
}

/// [`super::pool::max_pool2d_backward`] for a contiguous bf16 `grad_out`.
pub(crate) fn max_pool2d_backward(
    grad_out: &[bf16],
    window_argmax: &[i64],
    g: &PoolGeometry,
) -> Result<Vec<bf16>> {
    check_max_backward(grad_out.len(), window_argmax, g)?;
    let (planes, work) = (g.planes(), g.backward_work());
    planes_through_f32(planes, g.plane_in(), g.plane_out(), work, |s, p| {
        s.widen(g.output_plane(grad_out, p));
        s.output.fill(0.0);
        let args = g.output_plane(window_argmax, p);
        max_backward_plane(&s.input, args, g, &mut s.output);
    })
}

/// [`super::pool::avg_pool2d`] for a contiguous bf16 `x` (sums and the division in f32).
pub(crate) fn avg_pool2d(x: &[bf16], g: &PoolGeometry, window: f32) -> Result<Vec<bf16>> {
    let (planes, work) = (g.planes(), g.avg_work());
    planes_through_f32(planes, g.plane_out(), g.plane_in(), work, |s, p| {
        s.widen(g.input_plane(x, p));
        avg_plane(&s.input, g, window, &mut s.output);
    })
}

/// [`super::pool::avg_pool2d_backward`] for a contiguous bf16 `grad_out`.
pub(crate) fn avg_pool2d_backward(
    grad_out: &[bf16],
    g: &PoolGeometry,
    window: f32,
) -> Result<Vec<bf16>> {
    check_avg_backward(grad_out.len(), g)?;
    let (planes, work) = (g.planes(), g.avg_backward_work());
    planes_through_f32(planes, g.plane_in(), g.plane_out(), work, |s, p| {
        s.widen(g.output_plane(grad_out, p));
        s.output.fill(0.0);
        avg_backward_plane(&s.input, g, window, &mut s.output);
    })
}

#[cfg(test)]
mod tests {
    //! Against the widening path written out: the whole input widened, pooled by the f32
    //! kernels, and rounded once.
    use super::*;
    use crate::kernels::cast::f32_to_bf16;
    use crate::kernels::pool;
    use tessera_core::tensor::pool_output_dims;
    use tessera_core::Pool2dParams;

    fn wide(v: &[bf16]) -> Vec<f32> {
        v.iter().map(|x| x.to_f32()).collect()
    }

    fn narrowed(v: &[f32]) -> Vec<bf16> {
        v.iter().map(|&x| f32_to_bf16(x)).collect()
    }

    fn bits(v: &[bf16]) -> Vec<u16> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Values with ties, both zeros, infinities and a NaN now and then.
    fn values(len: usize, seed: usize) -> Vec<bf16> {
        (0..len)
            .map(|i| match (i * 7 + seed) % 23 {
                0 => bf16::NAN,
                1 => bf16::NEG_INFINITY,
                2 => bf16::from_f32(-0.0),
                3 => bf16::INFINITY,
                k => bf16::from_f32((k as f32 - 11.0) * 0.375 + (i % 5) as f32 * 1e-3),
            })
            .collect()
    }

    fn check(dims: [usize; 4], p: Pool2dParams) {
        let out_dims = pool_output_dims("test", &dims, p).unwrap();
        let g = PoolGeometry::new("test", &dims, &out_dims, p).unwrap();
        let x = values(dims.iter().product(), 3);
        let window = (p.kernel.0 * p.kernel.1) as f32;
        let case = format!("{dims:?} {p:?}");

        let (got, got_args) = max_pool2d(&x, &g).unwrap();
        let (want, want_args) = pool::max_pool2d(&wide(&x), &g).unwrap();
        assert_eq!(bits(&got), bits(&narrowed(&want)), "max {case}");
        assert_eq!(got_args, want_args, "max positions {case}");

        let grad = values(g.output_len(), 5);
        let got = max_pool2d_backward(&grad, &got_args, &g).unwrap();
        let want = pool::max_pool2d_backward(&wide(&grad), &want_args, &g).unwrap();
        assert_eq!(bits(&got), bits(&narrowed(&want)), "max gradient {case}");

        let got = avg_pool2d(&x, &g, window).unwrap();
        let want = pool::avg_pool2d(&wide(&x), &g, window).unwrap();
        assert_eq!(bits(&got), bits(&narrowed(&want)), "avg {case}");

        let got = avg_pool2d_backward(&grad, &g, window).unwrap();
        let want = pool::avg_pool2d_backward(&wide(&grad), &g, window).unwrap();
        assert_eq!(bits(&got), bits(&narrowed(&want)), "avg gradient {case}");
    }

    fn params(kernel: usize, stride: usize, padding: usize) -> Pool2dParams {
        Pool2dParams {
            kernel: (kernel, kernel),
            stride: (stride, stride),
            padding: (padding, padding),
        }
    }

    #[test]
    fn miri_bf16_pooling_equals_the_widened_f32_pooling_rounded_once() {
        // Each kernel of `pool` (2x2, unpadded, padded), overlapping windows (sums in the
        // gradients), odd sizes, a window wider than the image.
        check([1, 2, 4, 6], params(2, 2, 0));
        check([2, 1, 5, 5], params(3, 1, 1));
        check([1, 1, 3, 2], params(4, 2, 2));
    }

    #[test]
    fn bf16_pooling_equals_the_widened_f32_pooling_on_large_tensors() {
        // Large enough for the planes to run in parallel.
        check([8, 32, 28, 28], params(2, 2, 0));
        check([4, 16, 15, 17], params(3, 2, 1));
        check([3, 8, 20, 20], params(3, 1, 0));
    }

    #[test]
    fn bf16_pooling_rejects_what_the_f32_kernels_reject() {
        let p = params(2, 2, 0);
        let dims = [1, 1, 4, 4];
        let out_dims = pool_output_dims("test", &dims, p).unwrap();
        let g = PoolGeometry::new("test", &dims, &out_dims, p).unwrap();
        let grad = values(4, 1);
        assert!(max_pool2d_backward(&grad, &[0, 1, 2, 4], &g).is_err());
        assert!(max_pool2d_backward(&grad, &[0, 1, 2], &g).is_err());
        assert!(avg_pool2d_backward(&grad[..3], &g, 4.0).is_err());
    }
}
