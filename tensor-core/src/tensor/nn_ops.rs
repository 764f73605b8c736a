//! Convolution and pooling, validated here and dispatched to the backend (which may override the
//! composite defaults in [`crate::composite`]).

use super::Tensor;
use crate::{Backend, Conv2dParams, Error, Pool2dParams, Result};

/// Output length of a sliding window, or `None` when the window does not fit.
pub fn window_output_len(
    input: usize,
    kernel: usize,
    stride: usize,
    padding: usize,
    dilation: usize,
) -> Option<usize> {
    let span = dilation * (kernel.checked_sub(1)?) + 1;
    let padded = input + 2 * padding;
    (stride > 0 && padded >= span).then(|| (padded - span) / stride + 1)
}

fn check_rank4<B: Backend>(op: &'static str, what: &str, t: &Tensor<B>) -> Result<()> {
    if t.rank() != 4 {
        return Err(Error::InvalidArgument {
            op,
            msg: format!("{what} must be [n, c, h, w], got shape {}", t.shape()),
        });
    }
    Ok(())
}

impl<B: Backend> Tensor<B> {
    /// 2-D convolution: `self: [n, c, h, w]`, `weight: [o, c, kh, kw]`, optional `bias: [o]`.
    pub fn conv2d(&self, weight: &Self, bias: Option<&Self>, params: Conv2dParams) -> Result<Self> {
        const OP: &str = "conv2d";
        check_rank4(OP, "input", self)?;
        check_rank4(OP, "weight", weight)?;
        self.check_float(OP)?;
        self.check_same_device(OP, weight)?;
        self.check_same_dtype(OP, weight)?;
        if weight.dims()[1] != self.dims()[1] {
            return Err(Error::InvalidArgument {
                op: OP,
                msg: format!(
                    "input {} has {} channels but weight {} expects {}",
                    self.shape(),
                    self.dims()[1],
                    weight.shape(),
                    weight.dims()[1]
                ),
            });
        }
        conv_output_dims(self.dims(), weight.dims(), params)?;
        let out = self.backend.conv2d(self, weight, params)?;
        match bias {
            None => Ok(out),
            Some(b) => {
                if b.dims() != [weight.dims()[0]] {
                    return Err(Error::ShapeMismatch {
                        op: OP,
                        lhs: b.shape().clone(),
                        rhs: [weight.dims()[0]].into(),
                    });
                }
                out.add(&b.reshape([1, weight.dims()[0], 1, 1])?)
            }
        }
    }

    /// Gradient of [`Tensor::conv2d`] with respect to its input of dims `input_dims`.
    pub fn conv2d_backward_input(
        &self,
        weight: &Self,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Self> {
        check_rank4("conv2d_backward_input", "grad_out", self)?;
        self.backend
            .conv2d_backward_input(self, weight, input_dims, params)
    }

    /// Gradient of [`Tensor::conv2d`] with respect to its weight, given the input `x`.
    pub fn conv2d_backward_weight(
        &self,
        x: &Self,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Self> {
        check_rank4("conv2d_backward_weight", "grad_out", self)?;
        self.backend
            .conv2d_backward_weight(x, self, weight_dims, params)
    }

    /// Max pooling over `[n, c, h, w]`; returns the pooled tensor and the `i64` position of each
    /// maximum inside its window (for the gradient).
    pub fn max_pool2d_with_indices(&self, params: Pool2dParams) -> Result<(Self, Self)> {
        check_rank4("max_pool2d", "input", self)?;
        self.check_float("max_pool2d")?;
        pool_output_dims("max_pool2d", self.dims(), params)?;
        self.backend.max_pool2d(self, params)
    }

    /// Max pooling over `[n, c, h, w]`.
    pub fn max_pool2d(&self, params: Pool2dParams) -> Result<Self> {
        Ok(self.max_pool2d_with_indices(params)?.0)
    }

    /// Gradient of max pooling with respect to its input of dims `input_dims`.
    pub fn max_pool2d_backward(
        &self,
        window_argmax: &Self,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Self> {
        self.backend
            .max_pool2d_backward(self, window_argmax, input_dims, params)
    }

    /// Average pooling over `[n, c, h, w]` (padding counts as zeros).
    pub fn avg_pool2d(&self, params: Pool2dParams) -> Result<Self> {
        check_rank4("avg_pool2d", "input", self)?;
        self.check_float("avg_pool2d")?;
        pool_output_dims("avg_pool2d", self.dims(), params)?;
        self.backend.avg_pool2d(self, params)
    }

    /// Gradient of average pooling with respect to its input of dims `input_dims`.
    pub fn avg_pool2d_backward(&self, input_dims: &[usize], params: Pool2dParams) -> Result<Self> {
        self.backend.avg_pool2d_backward(self, input_dims, params)
    }
}

/// `[n, o, oh, ow]` for a convolution, or an error saying why the window does not fit.
pub fn conv_output_dims(input: &[usize], weight: &[usize], p: Conv2dParams) -> Result<[usize; 4]> {
    let bad = || Error::InvalidArgument {
        op: "conv2d",
        msg: format!("kernel {weight:?} with {p:?} does not fit input {input:?}"),
    };
    let oh = window_output_len(input[2], weight[2], p.stride.0, p.padding.0, p.dilation.0)
        .ok_or_else(bad)?;
    let ow = window_output_len(input[3], weight[3], p.stride.1, p.padding.1, p.dilation.1)
        .ok_or_else(bad)?;
    if p.dilation.0 == 0 || p.dilation.1 == 0 {
        return Err(bad());
    }
    Ok([input[0], weight[0], oh, ow])
}

/// `[n, c, oh, ow]` for a pooling window, or an error saying why it does not fit.
pub fn pool_output_dims(op: &'static str, input: &[usize], p: Pool2dParams) -> Result<[usize; 4]> {
    let bad = || Error::InvalidArgument {
        op,
        msg: format!(
            "window {p:?} does not fit input {input:?} (padding must be at most half the window)"
        ),
    };
    if p.padding.0 * 2 > p.kernel.0 || p.padding.1 * 2 > p.kernel.1 {
        return Err(bad());
    }
    let oh = window_output_len(input[2], p.kernel.0, p.stride.0, p.padding.0, 1).ok_or_else(bad)?;
    let ow = window_output_len(input[3], p.kernel.1, p.stride.1, p.padding.1, 1).ok_or_else(bad)?;
    Ok([input[0], input[1], oh, ow])
}
