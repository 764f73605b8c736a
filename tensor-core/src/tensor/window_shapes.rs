//! The shape arithmetic and checks of convolution and pooling, forward and backward.
//!
//! One function per entry point checks everything that can be checked from dims and parameters
//! alone: ranks, channel counts, strides and dilations of at least 1, windows that fit, and, for
//! a gradient, that `grad_out` has exactly the shape the forward pass would have produced. The
//! `Tensor` methods call them before any backend runs; the composite defaults and the CPU
//! backend's overrides call them again at their own entry, because `Backend` methods are public
//! too. All arithmetic is checked, so absurd sizes give an error, never a wrapped value.

use crate::{Conv2dParams, Error, Pool2dParams, Result, Shape};

/// Output length of a sliding window, or `None` when the window does not fit (or the stride or
/// dilation is 0, or a size overflows).
///
/// ```
/// use tessera_core::tensor::window_output_len;
/// assert_eq!(window_output_len(5, 3, 1, 0, 1), Some(3));
/// assert_eq!(window_output_len(5, 3, 2, 1, 1), Some(3));
/// assert_eq!(window_output_len(2, 3, 1, 0, 1), None);
/// assert_eq!(window_output_len(5, 3, 0, 0, 1), None);
/// ```
pub fn window_output_len(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Option<usize> {
    if stride == 0 || dilation == 0 {
        return None;
    }
    let span = dilation
        .checked_mul(kernel.checked_sub(1)?)?
        .checked_add(1)?;
    let padded = padding.checked_mul(2)?.checked_add(input)?;
    (padded >= span).then(|| (padded - span) / stride + 1)
}

/// Errors unless `dims` has rank 4 (`what` names it in the message).
fn rank4(op: &'static str, what: &str, dims: &[usize]) -> Result<()> {
    if dims.len() != 4 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "{what} must be [n, c, h, w], got shape {}",
                Shape::new(dims)
            ),
        });
    }
    Ok(())
}

/// Errors unless both members of a (height, width) pair are at least 1.
fn positive_pair(op: &'static str, what: &str, pair: (usize, usize)) -> Result<()> {
    if pair.0 == 0 || pair.1 == 0 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("{what} must be at least 1 in both directions, got {pair:?}"),
        });
    }
    Ok(())
}

/// `[n, o, oh, ow]` of a convolution, reporting problems as `op`.
fn conv_out(
    op: &'static str,
    input: &[usize],
    weight: &[usize],
    p: Conv2dParams,
) -> Result<[usize; 4]> {
    rank4(op, "input", input)?;
    rank4(op, "weight", weight)?;
    positive_pair(op, "stride", p.stride)?;
    positive_pair(op, "dilation", p.dilation)?;
    let bad = || Error::InvalidArgument {
        op,
        msg: format!(
            "kernel {} with {p:?} does not fit input {}",
            Shape::new(weight),
            Shape::new(input)
        ),
    };
    let oh = window_output_len(input[2], weight[2], p.stride.0, p.padding.0, p.dilation.0)
        .ok_or_else(bad)?;
    let ow = window_output_len(input[3], weight[3], p.stride.1, p.padding.1, p.dilation.1)
        .ok_or_else(bad)?;
    Ok([input[0], weight[0], oh, ow])
}

/// `[n, o, oh, ow]` for a convolution of `input: [n, c, h, w]` with `weight: [o, c, kh, kw]`,
/// or an error saying why the window does not fit (ranks, strides and dilations are checked;
/// channel counts are not: see [`check_conv2d`]).
pub fn conv_output_dims(input: &[usize], weight: &[usize], p: Conv2dParams) -> Result<[usize; 4]> {
    conv_out("conv2d", input, weight, p)
}

/// Errors unless `input` and `weight` have the same channel count (axis 1, both rank 4).
fn same_channels(op: &'static str, input: &[usize], weight: &[usize]) -> Result<()> {
    if input[1] != weight[1] {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "input {} has {} channels but weight {} expects {}",
                Shape::new(input),
                input[1],
                Shape::new(weight),
                weight[1]
            ),
        });
    }
    Ok(())
}

/// Errors unless `grad_out` is `expected`, the shape the forward pass produces.
fn check_grad_out(op: &'static str, grad_out: &[usize], expected: &[usize]) -> Result<()> {
    if grad_out != expected {
        return Err(Error::InvalidArgument {
            op,
            msg: format!(
                "grad_out has shape {} but the forward pass produces {}",
                Shape::new(grad_out),
                Shape::new(expected)
            ),
        });
    }
    Ok(())
}

/// Everything [`crate::Tensor::conv2d`] checks from dims: ranks, channels, parameters and the
/// window; returns the output dims.
pub fn check_conv2d(input: &[usize], weight: &[usize], p: Conv2dParams) -> Result<[usize; 4]> {
    let out = conv_out("conv2d", input, weight, p)?;
    same_channels("conv2d", input, weight)?;
    Ok(out)
}

/// Everything [`crate::Tensor::conv2d_backward_input`] checks from dims: `input_dims` and
/// `weight` are a valid convolution (as [`check_conv2d`]) and `grad_out` has its output shape.
pub fn check_conv2d_backward_input(
    grad_out: &[usize],
    weight: &[usize],
    input_dims: &[usize],
    p: Conv2dParams,
) -> Result<()> {
    const OP: &str = "conv2d_backward_input";
    rank4(OP, "grad_out", grad_out)?;
    let out = conv_out(OP, input_dims, weight, p)?;
    same_channels(OP, input_dims, weight)?;
    check_grad_out(OP, grad_out, &out)?;
    Shape::new(input_dims).check_size(OP).map(|_| ())
}

/// Everything [`crate::Tensor::conv2d_backward_weight`] checks from dims: `x` and
/// `weight_dims` are a valid convolution (as [`check_conv2d`]) and `grad_out` has its output
/// shape.
pub fn check_conv2d_backward_weight(
    x: &[usize],
    grad_out: &[usize],
    weight_dims: &[usize],
    p: Conv2dParams,
) -> Result<()> {
    const OP: &str = "conv2d_backward_weight";
    rank4(OP, "grad_out", grad_out)?;
    let out = conv_out(OP, x, weight_dims, p)?;
    same_channels(OP, x, weight_dims)?;
    check_grad_out(OP, grad_out, &out)?;
    Shape::new(weight_dims).check_size(OP).map(|_| ())
}

/// `[n, c, oh, ow]` for a pooling window over `input: [n, c, h, w]`, or an error saying why it
/// does not fit (rank, kernel and stride of at least 1, padding at most half the window, a
/// window whose positions fit an `i64`).
pub fn pool_output_dims(op: &'static str, input: &[usize], p: Pool2dParams) -> Result<[usize; 4]> {
    rank4(op, "input", input)?;
    positive_pair(op, "kernel", p.kernel)?;
    positive_pair(op, "stride", p.stride)?;
    let bad = || Error::InvalidArgument {
        op,
        msg: format!(
            "window {p:?} does not fit input {} (padding must be at most half the window)",
            Shape::new(input)
        ),
    };
    if p.padding.0 > p.kernel.0 / 2 || p.padding.1 > p.kernel.1 / 2 {
        return Err(bad());
    }
    // Max pooling reports window positions `i * kw + j` as i64.
    if p.kernel
        .0
        .checked_mul(p.kernel.1)
        .is_none_or(|taps| i64::try_from(taps).is_err())
    {
        return Err(Error::SizeOverflow {
            op,
            msg: format!(
                "a {:?} window has more positions than an i64 can name",
                p.kernel
            ),
        });
    }
    let oh = window_output_len(input[2], p.kernel.0, p.stride.0, p.padding.0, 1).ok_or_else(bad)?;
    let ow = window_output_len(input[3], p.kernel.1, p.stride.1, p.padding.1, 1).ok_or_else(bad)?;
    Ok([input[0], input[1], oh, ow])
}

/// Everything the pooling gradients check from dims: `input_dims` and `p` are a valid pooling
/// (as [`pool_output_dims`]) and `grad_out` has its output shape.
pub fn check_pool2d_backward(
    op: &'static str,
    grad_out: &[usize],
    input_dims: &[usize],
    p: Pool2dParams,
) -> Result<()> {
    rank4(op, "grad_out", grad_out)?;
    let out = pool_output_dims(op, input_dims, p)?;
    check_grad_out(op, grad_out, &out)?;
    Shape::new(input_dims).check_size(op).map(|_| ())
}

/// The kernel taps along one axis (rows or columns) that reach the interior of the padded
/// input for at least one output position: `i` such that `padding <= i + y * stride <
/// padding + input` for some `y < out`. The other taps only ever see padding, so gradients and
/// pooling may skip them; this keeps the work proportional to the image, not to the kernel.
pub fn interior_taps(
    kernel: usize,
    stride: usize,
    padding: usize,
    input: usize,
    out: usize,
) -> impl Iterator<Item = usize> {
    let reach = out.saturating_sub(1).saturating_mul(stride);
    let first = padding.saturating_sub(reach);
    let end = kernel.min(padding.saturating_add(input));
    (first..end).filter(move |&i| {
        // The first output position whose tap `i` is at or after the interior's start.
        let y = if i >= padding {
            0
        } else {
            (padding - i).div_ceil(stride.max(1))
        };
        y < out
            && y.checked_mul(stride)
                .and_then(|shift| shift.checked_add(i))
                .is_some_and(|row| row < padding + input)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_with_absurd_sizes_do_not_fit_instead_of_wrapping() {
        assert_eq!(window_output_len(usize::MAX, 3, 1, 1, 1), None);
        assert_eq!(window_output_len(1, usize::MAX, 1, 0, 2), None);
        assert_eq!(window_output_len(1, 2, 1, usize::MAX, 1), None);
        assert_eq!(window_output_len(3, 2, 1, 0, 0), None);
    }

    #[test]
    fn short_dims_are_errors_not_panics() {
        let p = Conv2dParams::default();
        assert!(conv_output_dims(&[1, 1], &[1, 1, 1, 1], p).is_err());
        assert!(conv_output_dims(&[1, 1, 1, 1], &[], p).is_err());
        assert!(pool_output_dims("t", &[1, 1, 1], Pool2dParams::square(1)).is_err());
        assert!(pool_output_dims("t", &[1, 1, 1, 1], Pool2dParams::square(0)).is_err());
    }

    #[test]
    fn gradient_checks_want_the_forward_output_shape() {
        let p = Conv2dParams::default();
        assert!(
            check_conv2d_backward_input(&[1, 1, 1, 1], &[1, 1, 1, 1], &[1, 1, 1, 1], p).is_ok()
        );
        // The reproducer of issue 11: input channels 2, weight channels 1.
        assert!(
            check_conv2d_backward_input(&[1, 1, 1, 1], &[1, 1, 1, 1], &[1, 2, 1, 1], p).is_err()
        );
        assert!(
            check_conv2d_backward_input(&[1, 1, 2, 1], &[1, 1, 1, 1], &[1, 1, 1, 1], p).is_err()
        );
        assert!(
            check_conv2d_backward_weight(&[1, 1, 3, 3], &[1, 2, 2, 2], &[2, 1, 2, 2], p).is_ok()
        );
        assert!(
            check_conv2d_backward_weight(&[1, 1, 3, 3], &[1, 2, 2, 2], &[2, 1, 2, 2, 1], p)
                .is_err()
        );
        let pool = Pool2dParams::square(2);
        assert!(check_pool2d_backward("t", &[1, 1, 2, 2], &[1, 1, 4, 4], pool).is_ok());
        assert!(check_pool2d_backward("t", &[1, 1, 3, 2], &[1, 1, 4, 4], pool).is_err());
        let zero_stride = Pool2dParams {
            stride: (0, 1),
            ..pool
        };
        assert!(check_pool2d_backward("t", &[1, 1, 2, 2], &[1, 1, 4, 4], zero_stride).is_err());
    }

    #[test]
    fn interior_taps_are_the_taps_that_see_the_image() {
        // Brute force over small geometries.
        for kernel in 1..7 {
            for stride in 1..4 {
                for padding in 0..=kernel / 2 {
                    for input in 0..6 {
                        let Some(out) = window_output_len(input, kernel, stride, padding, 1) else {
                            continue;
                        };
                        let expected: Vec<usize> = (0..kernel)
                            .filter(|&i| {
                                (0..out).any(|y| {
                                    let row = i + y * stride;
                                    row >= padding && row < padding + input
                                })
                            })
                            .collect();
                        let got: Vec<usize> =
                            interior_taps(kernel, stride, padding, input, out).collect();
                        assert_eq!(got, expected, "{kernel} {stride} {padding} {input}");
                    }
                }
            }
        }
        // A kernel far larger than the image costs only the taps that reach it.
        assert_eq!(interior_taps(1 << 40, 1, 1 << 39, 1, 2).count(), 2);
    }
}
