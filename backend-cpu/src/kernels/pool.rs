//! Direct max and average pooling over `[n, c, h, w]` and their gradients, one `(n, c)` plane
//! per task: each output reads its window in place (no window copy), max pooling records the
//! window position of its maximum, and the gradients scatter into their own plane only.

use std::ops::Range;

use rayon::prelude::*;
use tessera_core::{Error, Pool2dParams, Result};

use super::num::Num;
use crate::alloc::{checked_len, try_filled, try_zeroed};
use crate::parallel::worth_parallel;

/// The sizes of one pooling: input `[n, c, h, w]`, output `[n, c, oh, ow]`, and the window.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PoolGeometry {
    planes: usize,
    h: usize,
    w: usize,
    oh: usize,
    ow: usize,
    p: Pool2dParams,
}

impl PoolGeometry {
    /// The geometry of pooling `input_dims` into `out_dims`, which the caller has checked with
    /// `tessera_core::tensor::pool_output_dims` (rank 4, a window that fits); the element counts
    /// of input and output are checked here, so no later product overflows.
    pub(crate) fn new(
        op: &'static str,
        input_dims: &[usize],
        out_dims: &[usize],
        p: Pool2dParams,
    ) -> Result<Self> {
        let g = PoolGeometry {
            planes: checked_len(op, &input_dims[..2])?,
            h: input_dims[2],
            w: input_dims[3],
            oh: out_dims[2],
            ow: out_dims[3],
            p,
        };
        checked_len(op, &[g.planes, g.h, g.w])?;
        checked_len(op, &[g.planes, g.oh, g.ow])?;
        Ok(g)
    }

    /// The window rows (`i`) of output row `y` that lie inside the image, not in the padding.
    #[inline(always)]
    fn rows_inside(&self, y: usize) -> Range<usize> {
        inside(
            y * self.p.stride.0,
            self.p.padding.0,
            self.h,
            self.p.kernel.0,
        )
    }

    /// The window columns (`j`) of output column `x` that lie inside the image.
    #[inline(always)]
    fn cols_inside(&self, x: usize) -> Range<usize> {
        inside(
            x * self.p.stride.1,
            self.p.padding.1,
            self.w,
            self.p.kernel.1,
        )
    }

    /// The input position `(row, col)` of window tap `(i, j)` of output `(y, x)`, if it is
    /// inside the image rather than in the padding.
    #[inline(always)]
    fn tap(&self, (y, x): (usize, usize), (i, j): (usize, usize)) -> Option<usize> {
        let iy = (y * self.p.stride.0 + i) as isize - self.p.padding.0 as isize;
        let ix = (x * self.p.stride.1 + j) as isize - self.p.padding.1 as isize;
        let inside = iy >= 0 && ix >= 0 && (iy as usize) < self.h && (ix as usize) < self.w;
        inside.then(|| iy as usize * self.w + ix as usize)
    }

    /// Elements of one input plane.
    pub(super) fn plane_in(&self) -> usize {
        self.h * self.w
    }

    /// Elements of one output plane.
    pub(super) fn plane_out(&self) -> usize {
        self.oh * self.ow
    }

    /// Input plane `p` of `x`.
    pub(super) fn input_plane<'a, T>(&self, x: &'a [T], p: usize) -> &'a [T] {
        &x[p * self.plane_in()..(p + 1) * self.plane_in()]
    }

    /// Output plane `p` of `y` (outputs, gradients or window positions).
    pub(super) fn output_plane<'a, T>(&self, y: &'a [T], p: usize) -> &'a [T] {
        &y[p * self.plane_out()..(p + 1) * self.plane_out()]
    }

    /// The work of max pooling (for the parallel split): each output reads its window.
    pub(super) fn max_work(&self) -> usize {
        (self.planes * self.plane_out())
            .saturating_mul(self.p.kernel.0)
            .saturating_mul(self.p.kernel.1)
    }

    /// The work of a max-pooling gradient: each input written, each output read once.
    pub(super) fn backward_work(&self) -> usize {
        self.planes * (self.plane_in() + self.plane_out())
    }

    /// The work of average pooling: each output sums the taps of its window inside the image.
    pub(super) fn avg_work(&self) -> usize {
        (self.planes * self.plane_out())
            .saturating_mul(self.p.kernel.0.min(self.h + 1))
            .saturating_mul(self.p.kernel.1.min(self.w + 1))
    }

    /// The work of an average-pooling gradient.
    pub(super) fn avg_backward_work(&self) -> usize {
        let taps = self
            .p
            .kernel
            .0
            .min(self.h + 1)
            .saturating_mul(self.p.kernel.1.min(self.w + 1));
        self.planes.saturating_mul(
            self.plane_in()
                .saturating_add(self.plane_out().saturating_mul(taps)),
        )
    }

    /// The number of `(n, c)` planes.
    pub(super) fn planes(&self) -> usize {
        self.planes
    }

    /// Elements of all output planes.
    pub(super) fn output_len(&self) -> usize {
        self.planes * self.plane_out()
    }
}

/// The taps `i` of a window starting at padded position `start` whose input position
/// `start + i - padding` is in `0..len`. Skipping the others keeps pooling proportional to the
/// image, however large the kernel and its padding.
#[inline(always)]
fn inside(start: usize, padding: usize, len: usize, kernel: usize) -> Range<usize> {
    let first = padding.saturating_sub(start);
    let end = (padding + len).saturating_sub(start).min(kernel);
    first..end.max(first)
}

/// Runs `f(plane_index, out_chunk)` over consecutive planes of `out` (`per_plane` elements
/// each), in parallel when the work is large enough.
fn for_each_plane<U: Send>(
    out: &mut [U],
    per_plane: usize,
    work: usize,
    f: impl Fn(usize, &mut [U]) + Sync,
) {
    if per_plane == 0 {
        return;
    }
    if worth_parallel(work) {
        out.par_chunks_mut(per_plane)
            .enumerate()
            .for_each(|(p, chunk)| f(p, chunk));
    } else {
        for (p, chunk) in out.chunks_mut(per_plane).enumerate() {
            f(p, chunk);
        }
    }
}

/// Max pooling of a contiguous `x`: the maxima and the `kh_index * kw + kw_index` window
/// position of each (padding reads as -inf; ties go to the first position; a NaN wins, the
/// first one, as `argmax` rules; a window where nothing beats -inf points at its first
/// position inside the input, as PyTorch).
pub(crate) fn max_pool2d<T: Num>(x: &[T], g: &PoolGeometry) -> Result<(Vec<T>, Vec<i64>)> {
    let len = g.output_len();
    let mut values = try_filled(len, T::LOWEST)?;
    let mut args = try_zeroed::<i64>(len)?;
    let per_plane = g.plane_out();
    if per_plane == 0 {
        return Ok((values, args));
    }
    let plane =
        |p: usize, vals: &mut [T], idx: &mut [i64]| max_plane(g.input_plane(x, p), g, vals, idx);
    if worth_parallel(g.max_work()) {
        values
            .par_chunks_mut(per_plane)
            .zip(args.par_chunks_mut(per_plane))
            .enumerate()
            .for_each(|(p, (vals, idx))| plane(p, vals, idx));
    } else {
        for (p, (vals, idx)) in values
            .chunks_mut(per_plane)
            .zip(args.chunks_mut(per_plane))
            .enumerate()
        {
            plane(p, vals, idx);
        }
    }
    Ok((values, args))
}

/// One plane of max pooling: `src` is the input plane, `vals` and `idx` the output plane's
/// maxima and window positions.
pub(super) fn max_plane<T: Num>(src: &[T], g: &PoolGeometry, vals: &mut [T], idx: &mut [i64]) {
    if g.p.padding == (0, 0) && g.p.kernel == (2, 2) && g.p.stride == (2, 2) {
        max_plane_2x2_dispatch(src, g, vals, idx);
    } else if g.p.padding == (0, 0) {
        max_plane_unpadded(src, g, vals, idx);
    } else {
        max_plane_padded(src, g, vals, idx);
    }
}

/// Whether `v` replaces the running maximum `best` (argmax's rule: strictly greater, or the
/// first NaN).
#[inline(always)]
fn beats<T: Num>(v: T, best: T) -> bool {
    // Non-short-circuit `&` and `|`: compare-and-select code the compiler can vectorise, where
    // `&&`/`||` compiled to a branch per comparison.
    !best.num_is_nan() & ((v > best) | v.num_is_nan())
}

/// One plane of max pooling without padding: every window lies inside the image, so each
/// output row is built tap by tap from whole input rows.
fn max_plane_unpadded<T: Num>(src: &[T], g: &PoolGeometry, vals: &mut [T], idx: &mut [i64]) {
    let (kh, kw) = g.p.kernel;
    let (sh, sw) = g.p.stride;
    for (y, (vrow, irow)) in vals
        .chunks_exact_mut(g.ow)
        .zip(idx.chunks_exact_mut(g.ow))
        .enumerate()
    {
        for i in 0..kh {
            let row = &src[(y * sh + i) * g.w..(y * sh + i + 1) * g.w];
            for j in 0..kw {
                let t = (i * kw + j) as i64;
                if t == 0 {
                    for (x, (v, a)) in vrow.iter_mut().zip(irow.iter_mut()).enumerate() {
                        *v = row[x * sw];
                        *a = 0;
                    }
                    continue;
                }
                for (x, (v, a)) in vrow.iter_mut().zip(irow.iter_mut()).enumerate() {
                    let candidate = row[x * sw + j];
                    if beats(candidate, *v) {
                        *v = candidate;
                        *a = t;
                    }
                }
            }
        }
    }
}

/// [`max_plane_2x2`] compiled for AVX2 where the CPU has it (four outputs per vector instead of
/// SSE2's two: the window positions are i64), else for the baseline.
fn max_plane_2x2_dispatch<T: Num>(src: &[T], g: &PoolGeometry, vals: &mut [T], idx: &mut [i64]) {
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    if std::is_x86_feature_detected!("avx2") {
        /// [`max_plane_2x2`] with AVX2 enabled.
        ///
        /// # Safety
        /// The CPU must have AVX2.
        #[target_feature(enable = "avx2")]
        unsafe fn avx2<T: Num>(src: &[T], g: &PoolGeometry, vals: &mut [T], idx: &mut [i64]) {
            max_plane_2x2(src, g, vals, idx)
        }
        // SAFETY: AVX2 was detected just above; the function is otherwise safe code.
        unsafe { avx2(src, g, vals, idx) };
        return;
    }
    max_plane_2x2(src, g, vals, idx)
}

/// Outputs per group of [`max_plane_2x2`]: a fixed-size block the compiler turns into vector
/// code whole (its de-interleaving loads included).
const GROUP: usize = 8;

/// One plane of the most common pooling, 2x2 windows with stride 2 and no padding, in a single
/// pass per output row (the general loops pass over the row once per window tap). Same rules
/// as the general case: taps in row-major order, strictly greater or first NaN wins.
///
/// Each row runs in groups of [`GROUP`] outputs over fixed-size arrays; the last, partial
/// group is copied into arrays padded with `-inf` (whose outputs are dropped), so no output
/// takes a scalar path.
#[inline(always)]
fn max_plane_2x2<T: Num>(src: &[T], g: &PoolGeometry, vals: &mut [T], idx: &mut [i64]) {
    let width = 2 * g.ow;
    for (y, (vrow, irow)) in vals
        .chunks_exact_mut(g.ow)
        .zip(idx.chunks_exact_mut(g.ow))
        .enumerate()
    {
        let top = &src[2 * y * g.w..][..width];
        let bottom = &src[(2 * y + 1) * g.w..][..width];
        let full = g.ow / GROUP * GROUP;
        for x in (0..full).step_by(GROUP) {
            let (t, b) = (
                &top[2 * x..2 * (x + GROUP)],
                &bottom[2 * x..2 * (x + GROUP)],
            );
            let (v, i) = (&mut vrow[x..x + GROUP], &mut irow[x..x + GROUP]);
            max_group_2x2(
                t.try_into().expect("a whole group"),
                b.try_into().expect("a whole group"),
                v.try_into().expect("a whole group"),
                i.try_into().expect("a whole group"),
            );
        }
        let rest = g.ow - full;
        if rest > 0 {
            let (mut t, mut b) = ([T::LOWEST; 2 * GROUP], [T::LOWEST; 2 * GROUP]);
            t[..2 * rest].copy_from_slice(&top[2 * full..]);
            b[..2 * rest].copy_from_slice(&bottom[2 * full..]);
            let (mut v, mut i) = ([T::LOWEST; GROUP], [0i64; GROUP]);
            max_group_2x2(&t, &b, &mut v, &mut i);
            vrow[full..].copy_from_slice(&v[..rest]);
            irow[full..].copy_from_slice(&i[..rest]);
        }
    }
}

/// [`GROUP`] outputs of [`max_plane_2x2`] from their top and bottom input rows.
#[inline(always)]
fn max_group_2x2<T: Num>(
    top: &[T; 2 * GROUP],
    bottom: &[T; 2 * GROUP],
    vals: &mut [T; GROUP],
    idx: &mut [i64; GROUP],
) {
    // Branch-free selects over fixed-length arrays, so the compiler vectorises the group.
    for x in 0..GROUP {
        let (mut best, mut arg) = (top[2 * x], 0);
        for (tap, candidate) in [
            (1, top[2 * x + 1]),
            (2, bottom[2 * x]),
            (3, bottom[2 * x + 1]),
        ] {
            let take = beats(candidate, best);
            best = if take { candidate } else { best };
            arg = if take { tap } else { arg };
        }
        vals[x] = best;
        idx[x] = arg;
    }
}

/// One plane of max pooling with padding. Taps in the padding read as -inf, so they never
/// beat an image tap: the scan visits only the taps inside the image, starting from the first
/// of them, so a window whose image taps are all -inf points at its first image tap (as
/// PyTorch's); a window with no image tap at all is -inf at position 0.
fn max_plane_padded<T: Num>(src: &[T], g: &PoolGeometry, vals: &mut [T], idx: &mut [i64]) {
    let kw = g.p.kernel.1;
    let (sh, sw) = g.p.stride;
    let (ph, pw) = g.p.padding;
    for y in 0..g.oh {
        let rows = g.rows_inside(y);
        for xx in 0..g.ow {
            // Padding reads as -inf, so it never beats a position inside the input: the scan
            // visits only those, and the first of them is the start (PyTorch's index when every
            // value is -inf).
            let cols = g.cols_inside(xx);
            let mut best = T::LOWEST;
            let mut arg = 0i64;
            let mut started = false;
            for i in rows.clone() {
                let row = (y * sh + i - ph) * g.w;
                for j in cols.clone() {
                    let v = src[row + xx * sw + j - pw];
                    if !started || beats(v, best) {
                        best = v;
                        arg = (i * kw + j) as i64;
                        started = true;
                    }
                }
            }
            vals[y * g.ow + xx] = best;
            idx[y * g.ow + xx] = arg;
        }
    }
}

/// Gradient of max pooling: each output's gradient added at its window's recorded maximum
/// (positions in the padding get nothing). `grad_out` and `window_argmax` are contiguous, of
/// the output's size; a position outside the window is [`Error::IndexOutOfRange`].
pub(crate) fn max_pool2d_backward<T: Num>(
    grad_out: &[T],
    window_argmax: &[i64],
    g: &PoolGeometry,
) -> Result<Vec<T>> {
    check_max_backward(grad_out.len(), window_argmax, g)?;
    let mut dx = try_zeroed::<T>(g.planes * g.plane_in())?;
    for_each_plane(&mut dx, g.plane_in(), g.backward_work(), |plane, dst| {
        max_backward_plane(
            g.output_plane(grad_out, plane),
            g.output_plane(window_argmax, plane),
            g,
            dst,
        )
    });
    Ok(dx)
}

/// Checks the operands of a max-pooling gradient: `grad_out` and `window_argmax` of the
/// output's size, and every window position inside the window.
pub(super) fn check_max_backward(
    grad_out: usize,
    window_argmax: &[i64],
    g: &PoolGeometry,
) -> Result<()> {
    const OP: &str = "max_pool2d_backward";
    let taps = g.p.kernel.0.saturating_mul(g.p.kernel.1);
    let out_len = g.output_len();
    if grad_out != out_len || window_argmax.len() != out_len {
        return Err(Error::InvalidArgument {
            op: OP,
            msg: format!(
                "grad_out ({grad_out}) and window_argmax ({}) must have the output's {out_len} \
                 elements",
                window_argmax.len()
            ),
        });
    }
    if let Some(&bad) = window_argmax
        .iter()
        .find(|&&t| usize::try_from(t).map_or(true, |t| t >= taps))
    {
        return Err(Error::IndexOutOfRange {
            op: OP,
            index: bad,
            size: taps,
        });
    }
    Ok(())
}

/// One plane of the max-pooling gradient: each output's gradient `grad` added into the input
/// plane `dst` (zeroed) at its recorded window position `args` (checked to be inside the
/// window by [`check_max_backward`]).
pub(super) fn max_backward_plane<T: Num>(
    grad: &[T],
    args: &[i64],
    g: &PoolGeometry,
    dst: &mut [T],
) {
    if g.p.padding == (0, 0) && g.p.kernel == (2, 2) && g.p.stride == (2, 2) {
        max_backward_plane_2x2(grad, args, g, dst);
    } else {
        max_backward_plane_any(grad, args, g, dst);
    }
}

/// [`max_backward_plane`] for any window: each gradient added at its recorded position.
fn max_backward_plane_any<T: Num>(grad: &[T], args: &[i64], g: &PoolGeometry, dst: &mut [T]) {
    let kw = g.p.kernel.1;
    let unpadded = g.p.padding == (0, 0);
    for y in 0..g.oh {
        for xx in 0..g.ow {
            let o = y * g.ow + xx;
            let t = args[o] as usize;
            let at = if unpadded {
                Some((y * g.p.stride.0 + t / kw) * g.w + xx * g.p.stride.1 + t % kw)
            } else {
                g.tap((y, xx), (t / kw, t % kw))
            };
            if let Some(at) = at {
                dst[at] = dst[at].num_add(grad[o]);
            }
        }
    }
}

/// [`max_backward_plane`] for 2x2 windows with stride 2 and no padding: the windows do not
/// overlap, so each output writes its window's four positions (its gradient added to zero at
/// the recorded one, zero at the others) in groups of [`GROUP`] outputs, as [`max_plane_2x2`]
/// reads them.
fn max_backward_plane_2x2<T: Num>(grad: &[T], args: &[i64], g: &PoolGeometry, dst: &mut [T]) {
    let width = 2 * g.ow;
    for y in 0..g.oh {
        let (grow, arow) = (&grad[y * g.ow..][..g.ow], &args[y * g.ow..][..g.ow]);
        let (upper, lower) = dst[2 * y * g.w..].split_at_mut(g.w);
        let (top, bottom) = (&mut upper[..width], &mut lower[..width]);
        let full = g.ow / GROUP * GROUP;
        for x in (0..full).step_by(GROUP) {
            let (t, b) = (
                &mut top[2 * x..2 * (x + GROUP)],
                &mut bottom[2 * x..2 * (x + GROUP)],
            );
            scatter_group_2x2(
                grow[x..x + GROUP].try_into().expect("a whole group"),
                arow[x..x + GROUP].try_into().expect("a whole group"),
                t.try_into().expect("a whole group"),
                b.try_into().expect("a whole group"),
            );
        }
        let rest = g.ow - full;
        if rest > 0 {
            let (mut gr, mut ar) = ([T::ZERO; GROUP], [0i64; GROUP]);
            gr[..rest].copy_from_slice(&grow[full..]);
            ar[..rest].copy_from_slice(&arow[full..]);
            let (mut t, mut b) = ([T::ZERO; 2 * GROUP], [T::ZERO; 2 * GROUP]);
            scatter_group_2x2(&gr, &ar, &mut t, &mut b);
            top[2 * full..].copy_from_slice(&t[..2 * rest]);
            bottom[2 * full..].copy_from_slice(&b[..2 * rest]);
        }
    }
}

/// [`GROUP`] outputs of [`max_backward_plane_2x2`]: their window positions in the top and
/// bottom input rows.
#[inline(always)]
fn scatter_group_2x2<T: Num>(
    grad: &[T; GROUP],
    args: &[i64; GROUP],
    top: &mut [T; 2 * GROUP],
    bottom: &mut [T; 2 * GROUP],
) {
    for x in 0..GROUP {
        // `0 + g`, as the general scatter adds into a zeroed plane (a -0 gradient lands as +0).
        let v = T::ZERO.num_add(grad[x]);
        let at = |tap: i64| if args[x] == tap { v } else { T::ZERO };
        top[2 * x] = at(0);
        top[2 * x + 1] = at(1);
        bottom[2 * x] = at(2);
        bottom[2 * x + 1] = at(3);
    }
}

/// Average pooling of a contiguous `x` (padding counts as zeros; the divisor is the window
/// size).
pub(crate) fn avg_pool2d<T: Num + std::ops::Div<Output = T>>(
    x: &[T],
    g: &PoolGeometry,
    window: T,
) -> Result<Vec<T>> {
    let mut out = try_zeroed::<T>(g.output_len())?;
    for_each_plane(&mut out, g.plane_out(), g.avg_work(), |plane, dst| {
        avg_plane(g.input_plane(x, plane), g, window, dst)
    });
    Ok(out)
}

/// One plane of average pooling: the input plane `src` into the output plane `dst`.
pub(super) fn avg_plane<T: Num + std::ops::Div<Output = T>>(
    src: &[T],
    g: &PoolGeometry,
    window: T,
    dst: &mut [T],
) {
    for y in 0..g.oh {
        let rows = g.rows_inside(y);
        for xx in 0..g.ow {
            let mut sum = T::ZERO;
            for i in rows.clone() {
                for j in g.cols_inside(xx) {
                    if let Some(at) = g.tap((y, xx), (i, j)) {
                        sum = sum.num_add(src[at]);
                    }
                }
            }
            dst[y * g.ow + xx] = sum / window;
        }
    }
}

/// Checks that an average-pooling gradient `grad_out` of `len` elements has the output's size.
pub(super) fn check_avg_backward(len: usize, g: &PoolGeometry) -> Result<()> {
    if len != g.output_len() {
        return Err(Error::InvalidArgument {
            op: "avg_pool2d_backward",
            msg: format!(
                "grad_out has {len} elements, not the output's {}",
                g.output_len()
            ),
        });
    }
    Ok(())
}

/// Gradient of average pooling: each output's gradient divided by the window size and added
/// at every window position inside the image.
pub(crate) fn avg_pool2d_backward<T: Num + std::ops::Div<Output = T>>(
    grad_out: &[T],
    g: &PoolGeometry,
    window: T,
) -> Result<Vec<T>> {
    check_avg_backward(grad_out.len(), g)?;
    let mut dx = try_zeroed::<T>(g.planes * g.plane_in())?;
    for_each_plane(
        &mut dx,
        g.plane_in(),
        g.avg_backward_work(),
        |plane, dst| avg_backward_plane(g.output_plane(grad_out, plane), g, window, dst),
    );
    Ok(dx)
}

/// One plane of the average-pooling gradient: the output plane's gradients `grad` added into
/// the input plane `dst` (zeroed).
pub(super) fn avg_backward_plane<T: Num + std::ops::Div<Output = T>>(
    grad: &[T],
    g: &PoolGeometry,
    window: T,
    dst: &mut [T],
) {
    for y in 0..g.oh {
        let rows = g.rows_inside(y);
        for xx in 0..g.ow {
            let share = grad[y * g.ow + xx] / window;
            for i in rows.clone() {
                for j in g.cols_inside(xx) {
                    if let Some(at) = g.tap((y, xx), (i, j)) {
                        dst[at] = dst[at].num_add(share);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! The 2x2 kernels against the general ones on the same planes.
    use super::*;

    /// Values with ties, both zeros, infinities and NaNs.
    fn values(len: usize, seed: usize) -> Vec<f32> {
        (0..len)
            .map(|i| match (i * 5 + seed) % 19 {
                0 => f32::NAN,
                1 => f32::NEG_INFINITY,
                2 => -0.0,
                3 => 0.0,
                k => ((k % 4) as f32 - 1.5) * 0.5,
            })
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    #[test]
    fn miri_the_2x2_kernels_equal_the_general_ones() {
        // Partial groups, whole groups, both, and odd sizes with a column and row left over.
        for (h, w) in [(2, 2), (4, 6), (2, 16), (4, 18), (3, 35), (5, 33)] {
            let p = Pool2dParams {
                kernel: (2, 2),
                stride: (2, 2),
                padding: (0, 0),
            };
            let g = PoolGeometry::new("test", &[1, 1, h, w], &[1, 1, h / 2, w / 2], p).unwrap();
            for seed in 0..4 {
                let x = values(h * w, seed);
                let n = g.plane_out();
                let (mut v1, mut i1) = (vec![f32::LOWEST; n], vec![0i64; n]);
                let (mut v2, mut i2) = (vec![f32::LOWEST; n], vec![7i64; n]);
                max_plane_2x2(&x, &g, &mut v1, &mut i1);
                max_plane_unpadded(&x, &g, &mut v2, &mut i2);
                assert_eq!(bits(&v1), bits(&v2), "{h}x{w} seed {seed}");
                assert_eq!(i1, i2, "{h}x{w} seed {seed}");

                let grad = values(n, seed + 7);
                let (mut d1, mut d2) = (vec![0.0f32; h * w], vec![0.0f32; h * w]);
                max_backward_plane_2x2(&grad, &i1, &g, &mut d1);
                max_backward_plane_any(&grad, &i1, &g, &mut d2);
                assert_eq!(bits(&d1), bits(&d2), "gradient {h}x{w} seed {seed}");
            }
        }
    }
}
