//! Reductions over axes, statistics and the softmax family.

use super::{check_output, Tensor};
use crate::{ArgReduceOp, Backend, DType, Error, ReduceOp, Result, Shape};

impl<B: Backend> Tensor<B> {
    /// Resolves, sorts and de-duplicates `axes`; an empty list means every axis.
    pub(crate) fn resolve_axes(&self, op: &'static str, axes: &[isize]) -> Result<Vec<usize>> {
        if axes.is_empty() {
            return Ok((0..self.rank()).collect());
        }
        let mut resolved = axes
            .iter()
            .map(|&a| self.shape().axis(op, a))
            .collect::<Result<Vec<_>>>()?;
        resolved.sort_unstable();
        resolved.dedup();
        Ok(resolved)
    }

    /// The shape after reducing `axes`, with or without the reduced axes kept as size 1.
    fn reduced_shape(&self, axes: &[usize], keepdim: bool) -> Shape {
        let dims = self
            .dims()
            .iter()
            .enumerate()
            .filter_map(|(i, &d)| match (axes.contains(&i), keepdim) {
                (false, _) => Some(d),
                (true, true) => Some(1),
                (true, false) => None,
            })
            .collect::<Vec<_>>();
        Shape::new(dims)
    }

    /// Applies a reduction over `axes` (empty: all axes). Bool inputs are summed as `i64`.
    pub fn reduce(&self, op: ReduceOp, axes: &[isize], keepdim: bool) -> Result<Self> {
        if self.dtype() == DType::Bool {
            return self.to_dtype(DType::I64)?.reduce(op, axes, keepdim);
        }
        let axes = self.resolve_axes(op.name(), axes)?;
        if matches!(op, ReduceOp::Max | ReduceOp::Min) {
            if let Some(&axis) = axes.iter().find(|&&a| self.dims()[a] == 0) {
                return Err(Error::InvalidArgument {
                    op: op.name(),
                    msg: format!("axis {axis} of shape {} is empty", self.shape()),
                });
            }
        }
        check_output(op.name(), &self.reduced_shape(&axes, true), self.dtype())?;
        let storage = self
            .backend
            .reduce(op, &self.storage, &self.layout, &axes)?;
        let kept = Self::from_output(&self.backend, storage, self.reduced_shape(&axes, true));
        if keepdim {
            Ok(kept)
        } else {
            kept.reshape(self.reduced_shape(&axes, false))
        }
    }

    /// Sum over `axes` (empty: all).
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Result<Self> {
        self.reduce(ReduceOp::Sum, axes, keepdim)
    }

    /// Sum of every element, as a rank-0 tensor.
    pub fn sum_all(&self) -> Result<Self> {
        self.reduce(ReduceOp::Sum, &[], false)
    }

    /// Product over `axes` (empty: all).
    pub fn prod(&self, axes: &[isize], keepdim: bool) -> Result<Self> {
        self.reduce(ReduceOp::Prod, axes, keepdim)
    }

    /// Maximum over `axes` (empty: all); NaN propagates.
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Result<Self> {
        self.reduce(ReduceOp::Max, axes, keepdim)
    }

    /// Minimum over `axes` (empty: all); NaN propagates.
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Result<Self> {
        self.reduce(ReduceOp::Min, axes, keepdim)
    }

    /// Mean over `axes` (empty: all); float dtypes only. An empty reduction gives NaN.
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Result<Self> {
        self.check_float("mean")?;
        let resolved = self.resolve_axes("mean", axes)?;
        let count: usize = resolved.iter().map(|&a| self.dims()[a]).product();
        self.in_compute_dtype(|x| x.sum(axes, keepdim)?.div_scalar(count as f64))
    }

    /// Mean of every element, as a rank-0 tensor.
    pub fn mean_all(&self) -> Result<Self> {
        self.mean(&[], false)
    }

    /// Variance over `axes` with `correction` subtracted from the count (1: unbiased, 0: biased).
    pub fn var(&self, axes: &[isize], correction: usize, keepdim: bool) -> Result<Self> {
        self.check_float("var")?;
        let resolved = self.resolve_axes("var", axes)?;
        let count: usize = resolved.iter().map(|&a| self.dims()[a]).product();
        self.in_compute_dtype(|x| {
            let centered = x.sub(&x.mean(axes, true)?)?;
            let denom = count.saturating_sub(correction) as f64;
            centered.square()?.sum(axes, keepdim)?.div_scalar(denom)
        })
    }

    fn arg_reduce(&self, op: ArgReduceOp, axis: isize, keepdim: bool) -> Result<Self> {
        let a = self.shape().axis(op.name(), axis)?;
        if self.dtype() == DType::Bool {
            return self.to_dtype(DType::I64)?.arg_reduce(op, axis, keepdim);
        }
        if self.dims()[a] == 0 {
            return Err(Error::InvalidArgument {
                op: op.name(),
                msg: format!("axis {a} of shape {} is empty", self.shape()),
            });
        }
        check_output(op.name(), &self.reduced_shape(&[a], true), DType::I64)?;
        let storage = self
            .backend
            .arg_reduce(op, &self.storage, &self.layout, a)?;
        let kept = Self::from_output(&self.backend, storage, self.reduced_shape(&[a], true));
        if keepdim {
            Ok(kept)
        } else {
            kept.squeeze(a as isize)
        }
    }

    /// Index (`i64`) of the maximum along `axis`; the first wins ties and NaN counts as largest.
    pub fn argmax(&self, axis: isize, keepdim: bool) -> Result<Self> {
        self.arg_reduce(ArgReduceOp::ArgMax, axis, keepdim)
    }

    /// Index (`i64`) of the minimum along `axis`; the first wins ties and NaN counts as smallest.
    pub fn argmin(&self, axis: isize, keepdim: bool) -> Result<Self> {
        self.arg_reduce(ArgReduceOp::ArgMin, axis, keepdim)
    }

    /// Softmax along `axis`. An empty axis gives an empty result of the same shape.
    pub fn softmax(&self, axis: isize) -> Result<Self> {
        self.check_float("softmax")?;
        let a = self.shape().axis("softmax", axis)?;
        if self.dims()[a] == 0 {
            return Ok(self.clone());
        }
        check_output("softmax", self.shape(), self.dtype())?;
        self.backend.softmax(self, a)
    }

    /// Log-softmax along `axis`. An empty axis gives an empty result of the same shape.
    pub fn log_softmax(&self, axis: isize) -> Result<Self> {
        self.check_float("log_softmax")?;
        let a = self.shape().axis("log_softmax", axis)?;
        if self.dims()[a] == 0 {
            return Ok(self.clone());
        }
        check_output("log_softmax", self.shape(), self.dtype())?;
        self.backend.log_softmax(self, a)
    }

    /// `log(sum(exp(x)))` along `axis`, computed stably; `-inf` over an empty axis (the log of
    /// an empty sum).
    pub fn logsumexp(&self, axis: isize, keepdim: bool) -> Result<Self> {
        self.check_float("logsumexp")?;
        let a = self.shape().axis("logsumexp", axis)?;
        let kept = if self.dims()[a] == 0 {
            let shape = self.reduced_shape(&[a], true);
            Self::full(shape, f64::NEG_INFINITY, self.dtype(), &self.backend)?
        } else {
            check_output("logsumexp", &self.reduced_shape(&[a], true), self.dtype())?;
            self.backend.logsumexp(self, a)?
        };
        if keepdim {
            Ok(kept)
        } else {
            kept.squeeze(a as isize)
        }
    }
}
