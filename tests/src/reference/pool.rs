//! Reference max and average pooling over `[n, c, h, w]` and their gradients.

use super::{conv::window_len, elementwise::round_to, RefArray};
use tessera_core::{DType, Pool2dParams};

/// `[oh, ow]` of a pooling window (panics when it does not fit).
pub fn pool_out_hw(input: &[usize], p: Pool2dParams) -> [usize; 2] {
    [
        window_len(input[2], p.kernel.0, p.stride.0, p.padding.0, 1).expect("fits"),
        window_len(input[3], p.kernel.1, p.stride.1, p.padding.1, 1).expect("fits"),
    ]
}

/// The input position of tap `(ky, kx)` of window `(oy, ox)`, or `None` inside the padding.
fn tap_position(
    input: &[usize],
    p: Pool2dParams,
    (oy, ox): (usize, usize),
    (ky, kx): (usize, usize),
) -> Option<(usize, usize)> {
    let y = (oy * p.stride.0 + ky) as isize - p.padding.0 as isize;
    let x = (ox * p.stride.1 + kx) as isize - p.padding.1 as isize;
    let inside = y >= 0 && x >= 0 && (y as usize) < input[2] && (x as usize) < input[3];
    inside.then_some((y as usize, x as usize))
}

/// Calls `f([n, c, oy, ox], tap, position)` for every window tap in row-major tap order;
/// `position` is `None` for a padding tap.
fn for_each_window_tap(
    input: &[usize],
    p: Pool2dParams,
    mut f: impl FnMut([usize; 4], usize, Option<(usize, usize)>),
) {
    let [oh, ow] = pool_out_hw(input, p);
    for n in 0..input[0] {
        for c in 0..input[1] {
            for oy in 0..oh {
                for ox in 0..ow {
                    for ky in 0..p.kernel.0 {
                        for kx in 0..p.kernel.1 {
                            let pos = tap_position(input, p, (oy, ox), (ky, kx));
                            f([n, c, oy, ox], ky * p.kernel.1 + kx, pos);
                        }
                    }
                }
            }
        }
    }
}

/// Max pooling with `-inf` padding: the maxima (NaN-propagating) and the first position of the
/// maximum inside each window (`ky * kw + kx`; a NaN wins, as in argmax).
pub fn max_pool2d(x: &RefArray, p: Pool2dParams) -> (RefArray, RefArray) {
    let [oh, ow] = pool_out_hw(&x.shape, p);
    let shape = vec![x.shape[0], x.shape[1], oh, ow];
    let mut best = RefArray::full(shape.clone(), f64::NAN);
    let mut arg = RefArray::full(shape, -1.0);
    for_each_window_tap(&x.shape, p, |[n, c, oy, ox], tap, pos| {
        let v = match pos {
            Some((y, xx)) => x.at(&[n, c, y, xx]),
            None => f64::NEG_INFINITY,
        };
        let idx = [n, c, oy, ox];
        let (b, a) = (best.at(&idx), arg.at(&idx));
        let take = a < 0.0 || (!b.is_nan() && (v.is_nan() || v > b));
        if take {
            *best.at_mut(&idx) = v;
            *arg.at_mut(&idx) = tap as f64;
        }
    });
    (best, arg)
}

/// Gradient of max pooling: each window's gradient goes to the input position of tap
/// `window_argmax` (dropped when that tap is padding).
pub fn max_pool2d_backward(
    dtype: DType,
    grad_out: &RefArray,
    window_argmax: &RefArray,
    input_dims: &[usize],
    p: Pool2dParams,
) -> RefArray {
    let mut g = RefArray::full(input_dims.to_vec(), 0.0);
    for_each_window_tap(input_dims, p, |[n, c, oy, ox], tap, pos| {
        if let Some((y, x)) = pos {
            if window_argmax.at(&[n, c, oy, ox]) == tap as f64 {
                *g.at_mut(&[n, c, y, x]) += grad_out.at(&[n, c, oy, ox]);
            }
        }
    });
    g.map(|v| round_to(dtype, v))
}

/// Average pooling with zero padding, dividing by the full window size.
pub fn avg_pool2d(dtype: DType, x: &RefArray, p: Pool2dParams) -> RefArray {
    let [oh, ow] = pool_out_hw(&x.shape, p);
    let mut sum = RefArray::full(vec![x.shape[0], x.shape[1], oh, ow], 0.0);
    for_each_window_tap(&x.shape, p, |[n, c, oy, ox], _, pos| {
        if let Some((y, xx)) = pos {
            *sum.at_mut(&[n, c, oy, ox]) += x.at(&[n, c, y, xx]);
        }
    });
    let size = (p.kernel.0 * p.kernel.1) as f64;
    sum.map(|v| round_to(dtype, v / size))
}

/// Gradient of average pooling: each window spreads `grad / window size` over its taps.
pub fn avg_pool2d_backward(
    dtype: DType,
    grad_out: &RefArray,
    input_dims: &[usize],
    p: Pool2dParams,
) -> RefArray {
    let size = (p.kernel.0 * p.kernel.1) as f64;
    let mut g = RefArray::full(input_dims.to_vec(), 0.0);
    for_each_window_tap(input_dims, p, |[n, c, oy, ox], _, pos| {
        if let Some((y, x)) = pos {
            *g.at_mut(&[n, c, y, x]) += grad_out.at(&[n, c, oy, ox]) / size;
        }
    });
    g.map(|v| round_to(dtype, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        let x = RefArray::new(vec![1, 1, 2, 2], vec![1.0, 4.0, 4.0, 2.0]);
        let (m, a) = max_pool2d(&x, Pool2dParams::square(2));
        assert_eq!((m.data, a.data), (vec![4.0], vec![1.0]));
        let avg = avg_pool2d(DType::F64, &x, Pool2dParams::square(2));
        assert_eq!(avg.data, vec![2.75]);
        let padded = Pool2dParams {
            kernel: (2, 2),
            stride: (1, 1),
            padding: (1, 1),
        };
        let (m, a) = max_pool2d(&x, padded);
        assert_eq!(m.shape, vec![1, 1, 3, 3]);
        assert_eq!(m.data[0], 1.0);
        assert_eq!(a.data[0], 3.0);
    }
}
