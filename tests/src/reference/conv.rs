//! Reference 2-D convolution (groups = 1) and its two gradients, as direct nested loops.

use super::{elementwise::round_to, RefArray};
use tessera_core::{Conv2dParams, DType};

/// Output length of a sliding window over `input` elements, or `None` when it does not fit.
pub fn window_len(
    input: usize,
    kernel: usize,
    stride: usize,
    pad: usize,
    dil: usize,
) -> Option<usize> {
    if kernel == 0 || stride == 0 || dil == 0 {
        return None;
    }
    let span = dil * (kernel - 1) + 1;
    let padded = input + 2 * pad;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// The input coordinate read by output position `o` and kernel tap `k`, if inside the input.
fn source(o: usize, k: usize, stride: usize, pad: usize, dil: usize, size: usize) -> Option<usize> {
    let pos = (o * stride + k * dil) as isize - pad as isize;
    (pos >= 0 && (pos as usize) < size).then_some(pos as usize)
}

/// A kernel tap of one output position: `[n, o, c, oy, ox, ky, kx]` and the input position
/// `(y, x)` it reads, `None` inside the zero padding.
type Tap = ([usize; 7], Option<(usize, usize)>);

/// Calls `f` for every (output position, input channel, kernel tap) triple, padding taps
/// included: zero padding means the padded input is 0 there, so a tap still multiplies a 0
/// (which matters under IEEE: `0 * inf` is NaN).
fn for_each_tap(input: &[usize], weight: &[usize], p: Conv2dParams, mut f: impl FnMut(Tap)) {
    let (n, c, h, w) = (input[0], input[1], input[2], input[3]);
    let (o, kh, kw) = (weight[0], weight[2], weight[3]);
    let [oh, ow] = conv_out_hw(input, weight, p);
    for b in 0..n {
        for oc in 0..o {
            for ic in 0..c {
                for oy in 0..oh {
                    for ox in 0..ow {
                        for ky in 0..kh {
                            let y = source(oy, ky, p.stride.0, p.padding.0, p.dilation.0, h);
                            for kx in 0..kw {
                                let x = source(ox, kx, p.stride.1, p.padding.1, p.dilation.1, w);
                                f(([b, oc, ic, oy, ox, ky, kx], y.zip(x)));
                            }
                        }
                    }
                }
            }
        }
    }
}

/// `out[n, o, i, j] = sum_{c, a, b} xpad[n, c, i*s + a*d, j*s + b*d] * w[o, c, a, b]`, where
/// `xpad` is `x` with `padding` zeros on each side.
pub fn conv2d(dtype: DType, x: &RefArray, w: &RefArray, p: Conv2dParams) -> RefArray {
    let [oh, ow] = conv_out_hw(&x.shape, &w.shape, p);
    let mut out = RefArray::full(vec![x.shape[0], w.shape[0], oh, ow], 0.0);
    for_each_tap(
        &x.shape,
        &w.shape,
        p,
        |([b, oc, ic, oy, ox, ky, kx], pos)| {
            let xv = pos.map_or(0.0, |(y, xx)| x.at(&[b, ic, y, xx]));
            *out.at_mut(&[b, oc, oy, ox]) += xv * w.at(&[oc, ic, ky, kx]);
        },
    );
    out.map(|v| round_to(dtype, v))
}

/// `[oh, ow]` of a convolution (panics when the window does not fit).
pub fn conv_out_hw(input: &[usize], weight: &[usize], p: Conv2dParams) -> [usize; 2] {
    [
        window_len(input[2], weight[2], p.stride.0, p.padding.0, p.dilation.0).expect("fits"),
        window_len(input[3], weight[3], p.stride.1, p.padding.1, p.dilation.1).expect("fits"),
    ]
}

/// d(sum(grad_out * conv2d(x, w))) / dx for an input of `input_dims`.
pub fn conv2d_backward_input(
    dtype: DType,
    grad_out: &RefArray,
    w: &RefArray,
    input_dims: &[usize],
    p: Conv2dParams,
) -> RefArray {
    let mut gx = RefArray::full(input_dims.to_vec(), 0.0);
    for_each_tap(
        input_dims,
        &w.shape,
        p,
        |([b, oc, ic, oy, ox, ky, kx], pos)| {
            // Gradients reaching the padding are dropped.
            if let Some((y, xx)) = pos {
                *gx.at_mut(&[b, ic, y, xx]) +=
                    grad_out.at(&[b, oc, oy, ox]) * w.at(&[oc, ic, ky, kx]);
            }
        },
    );
    gx.map(|v| round_to(dtype, v))
}

/// d(sum(grad_out * conv2d(x, w))) / dw for a weight of `weight_dims`.
pub fn conv2d_backward_weight(
    dtype: DType,
    x: &RefArray,
    grad_out: &RefArray,
    weight_dims: &[usize],
    p: Conv2dParams,
) -> RefArray {
    let mut gw = RefArray::full(weight_dims.to_vec(), 0.0);
    for_each_tap(
        &x.shape,
        weight_dims,
        p,
        |([b, oc, ic, oy, ox, ky, kx], pos)| {
            let xv = pos.map_or(0.0, |(y, xx)| x.at(&[b, ic, y, xx]));
            *gw.at_mut(&[oc, ic, ky, kx]) += grad_out.at(&[b, oc, oy, ox]) * xv;
        },
    );
    gw.map(|v| round_to(dtype, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // 1x1x3x3 input, 1x1x2x2 kernel of ones, padding 1: sums of 2x2 windows of the padded input.
        let x = RefArray::new(vec![1, 1, 3, 3], (1..=9).map(f64::from).collect());
        let w = RefArray::full(vec![1, 1, 2, 2], 1.0);
        let p = Conv2dParams {
            stride: (2, 2),
            padding: (1, 1),
            dilation: (1, 1),
        };
        let y = conv2d(DType::F64, &x, &w, p);
        assert_eq!(y.shape, vec![1, 1, 2, 2]);
        assert_eq!(
            y.data,
            vec![1.0, 2.0 + 3.0, 4.0 + 7.0, 5.0 + 6.0 + 8.0 + 9.0]
        );
        assert_eq!(window_len(5, 3, 1, 0, 2), Some(1));
        assert_eq!(window_len(4, 3, 1, 0, 2), None);
    }
}
