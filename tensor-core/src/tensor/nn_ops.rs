//! Convolution and pooling, validated here (see [`super::window_shapes`]) and dispatched to the
//! backend (which may override the composite defaults in [`crate::composite`]).

use super::window_shapes::{
    check_conv2d, check_conv2d_backward_input, check_conv2d_backward_weight, check_pool2d_backward,
    pool_output_dims,
};
use super::{check_output, Tensor};
use crate::dispatch;
use crate::{Backend, Conv2dParams, DType, Error, Pool2dParams, Result, Shape};

impl<B: Backend> Tensor<B> {
    /// Errors unless `other` is on this tensor's device with its (float) dtype.
    fn check_float_pair(&self, op: &'static str, other: &Self) -> Result<()> {
        self.check_float(op)?;
        self.check_same_device(op, other)?;
        self.check_same_dtype(op, other)
    }

    /// 2-D convolution: `self: [n, c, h, w]`, `weight: [o, c, kh, kw]`, optional `bias: [o]`.
    pub fn conv2d(&self, weight: &Self, bias: Option<&Self>, params: Conv2dParams) -> Result<Self> {
        const OP: &str = "conv2d";
        let out = check_conv2d(self.dims(), weight.dims(), params)?;
        self.check_float_pair(OP, weight)?;
        check_output(OP, &Shape::new(out), self.dtype())?;
        if let Some(b) = bias {
            if b.dims() != [weight.dims()[0]] {
                return Err(Error::ShapeMismatch {
                    op: OP,
                    lhs: b.shape().clone(),
                    rhs: [weight.dims()[0]].into(),
                });
            }
            self.check_float_pair(OP, b)?;
        }
        let out = dispatch::conv2d(self, weight, params)?;
        match bias {
            None => Ok(out),
            Some(b) => out.add(&b.reshape([1, weight.dims()[0], 1, 1])?),
        }
    }

    /// Gradient of [`Tensor::conv2d`] with respect to its input of dims `input_dims`, given
    /// `self` (the gradient of the output) and the weight. `self` must have exactly the shape
    /// the forward pass produces.
    pub fn conv2d_backward_input(
        &self,
        weight: &Self,
        input_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Self> {
        const OP: &str = "conv2d_backward_input";
        check_conv2d_backward_input(self.dims(), weight.dims(), input_dims, params)?;
        self.check_float_pair(OP, weight)?;
        check_output(OP, &Shape::new(input_dims), self.dtype())?;
        dispatch::conv2d_backward_input(self, weight, input_dims, params)
    }

    /// Gradient of [`Tensor::conv2d`] with respect to its weight of dims `weight_dims`, given
    /// `self` (the gradient of the output) and the input `x`. `self` must have exactly the shape
    /// the forward pass produces.
    pub fn conv2d_backward_weight(
        &self,
        x: &Self,
        weight_dims: &[usize],
        params: Conv2dParams,
    ) -> Result<Self> {
        const OP: &str = "conv2d_backward_weight";
        check_conv2d_backward_weight(x.dims(), self.dims(), weight_dims, params)?;
        self.check_float_pair(OP, x)?;
        check_output(OP, &Shape::new(weight_dims), self.dtype())?;
        dispatch::conv2d_backward_weight(x, self, weight_dims, params)
    }

    /// Max pooling over `[n, c, h, w]`; returns the pooled tensor and the `i64` position of each
    /// maximum inside its window (for the gradient).
    pub fn max_pool2d_with_indices(&self, params: Pool2dParams) -> Result<(Self, Self)> {
        const OP: &str = "max_pool2d";
        let out = Shape::new(pool_output_dims(OP, self.dims(), params)?);
        self.check_float(OP)?;
        check_output(OP, &out, self.dtype())?;
        check_output(OP, &out, DType::I64)?;
        dispatch::max_pool2d(self, params)
    }

    /// Max pooling over `[n, c, h, w]`.
    pub fn max_pool2d(&self, params: Pool2dParams) -> Result<Self> {
        Ok(self.max_pool2d_with_indices(params)?.0)
    }

    /// Gradient of max pooling with respect to its input of dims `input_dims`, given `self`
    /// (the gradient of the output) and the window positions of the maxima from
    /// [`Tensor::max_pool2d_with_indices`] (`i64`, the shape of `self`). A position outside
    /// `0..kh * kw` is [`Error::IndexOutOfRange`] (reported by the backend, which reads them;
    /// asynchronously on GPU backends, like every index error).
    pub fn max_pool2d_backward(
        &self,
        window_argmax: &Self,
        input_dims: &[usize],
        params: Pool2dParams,
    ) -> Result<Self> {
        const OP: &str = "max_pool2d_backward";
        check_pool2d_backward(OP, self.dims(), input_dims, params)?;
        self.check_float(OP)?;
        self.check_same_device(OP, window_argmax)?;
        if window_argmax.dtype() != DType::I64 {
            return Err(Error::DTypeMismatch {
                op: OP,
                lhs: window_argmax.dtype(),
                rhs: DType::I64,
            });
        }
        if window_argmax.shape() != self.shape() {
            return Err(Error::ShapeMismatch {
                op: OP,
                lhs: self.shape().clone(),
                rhs: window_argmax.shape().clone(),
            });
        }
        check_output(OP, &Shape::new(input_dims), self.dtype())?;
        dispatch::max_pool2d_backward(self, window_argmax, input_dims, params)
    }

    /// Average pooling over `[n, c, h, w]` (padding counts as zeros).
    pub fn avg_pool2d(&self, params: Pool2dParams) -> Result<Self> {
        const OP: &str = "avg_pool2d";
        let out = Shape::new(pool_output_dims(OP, self.dims(), params)?);
        self.check_float(OP)?;
        check_output(OP, &out, self.dtype())?;
        dispatch::avg_pool2d(self, params)
    }

    /// Gradient of average pooling with respect to its input of dims `input_dims`, given `self`
    /// (the gradient of the output, of exactly the shape the forward pass produces).
    pub fn avg_pool2d_backward(&self, input_dims: &[usize], params: Pool2dParams) -> Result<Self> {
        const OP: &str = "avg_pool2d_backward";
        check_pool2d_backward(OP, self.dims(), input_dims, params)?;
        self.check_float(OP)?;
        check_output(OP, &Shape::new(input_dims), self.dtype())?;
        dispatch::avg_pool2d_backward(self, input_dims, params)
    }
}
