//! Reductions over axes, statistics and the softmax family.

use super::{check_output, Tensor};
use crate::dispatch::{self, RowOp};
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
            // Converted without widening broadcast axes (they stay views of stride 0, which
            // the reduction below repeats in closed form).
            let stored = self.one_copy_of_axes(&(0..self.rank()).collect::<Vec<_>>())?;
            return stored
                .to_dtype(DType::I64)?
                .broadcast_to(self.dims().to_vec())?
                .reduce(op, axes, keepdim);
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
        let kept = self.reduce_kept(op, &axes)?;
        if keepdim {
            Ok(kept)
        } else {
            kept.reshape(self.reduced_shape(&axes, false))
        }
    }

    /// The reduction over `axes` (resolved) with the reduced axes kept as size 1.
    ///
    /// A reduced axis of stride 0 (a broadcast axis: every position holds the same values) is
    /// not walked: the reduction runs over one position of it and the result is repeated in
    /// closed form, `n` copies of a partial result `r` being `r` for max and min, `r · n` for a
    /// sum (double-and-add: exact for `i64`, which wraps, and at most one rounding per set bit
    /// of `n` for floats) and `r^n` for a product (square-and-multiply). So the sum of
    /// `ones([1]).broadcast_to([1 << 40])` costs 40 additions, not 2^40.
    fn reduce_kept(&self, op: ReduceOp, axes: &[usize]) -> Result<Self> {
        let broadcast: Vec<usize> = axes
            .iter()
            .copied()
            .filter(|&a| self.dims()[a] > 1 && self.layout.strides()[a] == 0)
            .collect();
        let copies: usize = broadcast.iter().map(|&a| self.dims()[a]).product();
        if copies <= 1 {
            let storage = dispatch::reduce(&self.backend, op, self.operand(op.name())?, axes)?;
            return Ok(Self::from_output(
                &self.backend,
                storage,
                self.reduced_shape(axes, true),
            ));
        }
        let one_copy = self.one_copy_of_axes(&broadcast)?;
        match op {
            ReduceOp::Max | ReduceOp::Min => one_copy.reduce_kept(op, axes),
            // 16-bit sums and products are computed in f32 and rounded once, as the backend's
            // own 16-bit reductions are (the narrowed copy is small: no broadcast axis is
            // widened).
            ReduceOp::Sum => one_copy.in_compute_dtype(|x| {
                repeat_op(&x.reduce_kept(op, axes)?, copies, |a, b| a.add(b))
            }),
            ReduceOp::Prod => one_copy.in_compute_dtype(|x| {
                repeat_op(&x.reduce_kept(op, axes)?, copies, |a, b| a.mul(b))
            }),
        }
    }

    /// This view with every axis of `axes` that is broadcast (stride 0, size above 1) narrowed
    /// to its first position: the values it stores, once.
    fn one_copy_of_axes(&self, axes: &[usize]) -> Result<Self> {
        let mut one_copy = self.clone();
        for &a in axes {
            if self.dims()[a] > 1 && self.layout.strides()[a] == 0 {
                one_copy = one_copy.narrow(a as isize, 0, 1)?;
            }
        }
        Ok(one_copy)
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
        // The mean over a broadcast axis is the mean over one of its copies (exactly): reduced
        // broadcast axes are narrowed first, so that a 16-bit view is not widened whole.
        let x = self.one_copy_of_axes(&resolved)?;
        let count: usize = resolved.iter().map(|&a| x.dims()[a]).product();
        x.in_compute_dtype(|x| x.sum(axes, keepdim)?.div_scalar(count as f64))
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
        let storage = dispatch::arg_reduce(&self.backend, op, self.operand(op.name())?, a)?;
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
        dispatch::softmax_family(RowOp::Softmax, self, a)
    }

    /// Log-softmax along `axis`. An empty axis gives an empty result of the same shape.
    pub fn log_softmax(&self, axis: isize) -> Result<Self> {
        self.check_float("log_softmax")?;
        let a = self.shape().axis("log_softmax", axis)?;
        if self.dims()[a] == 0 {
            return Ok(self.clone());
        }
        check_output("log_softmax", self.shape(), self.dtype())?;
        dispatch::softmax_family(RowOp::LogSoftmax, self, a)
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
            dispatch::softmax_family(RowOp::LogSumExp, self, a)?
        };
        if keepdim {
            Ok(kept)
        } else {
            kept.squeeze(a as isize)
        }
    }
}

/// `x ∘ x ∘ ... ∘ x` (`n >= 1` operands) for an associative `op`, in `O(log n)` applications:
/// the binary method (double-and-add for `+`, square-and-multiply for `*`).
fn repeat_op<B: Backend>(
    x: &Tensor<B>,
    mut n: usize,
    op: impl Fn(&Tensor<B>, &Tensor<B>) -> Result<Tensor<B>>,
) -> Result<Tensor<B>> {
    let mut acc: Option<Tensor<B>> = None;
    let mut power = x.clone();
    loop {
        if n & 1 == 1 {
            acc = Some(match acc {
                None => power.clone(),
                Some(a) => op(&a, &power)?,
            });
        }
        n >>= 1;
        if n == 0 {
            break;
        }
        power = op(&power, &power)?;
    }
    // n >= 1, so some bit was set.
    acc.ok_or_else(|| Error::InvalidArgument {
        op: "reduce",
        msg: "repeated zero times".into(),
    })
}
