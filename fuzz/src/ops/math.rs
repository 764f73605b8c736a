//! Element-wise maps, broadcasting binary ops, comparisons, select, reductions, softmax and
//! matrix products.

use super::kinds::*;
use super::{has, like_input, op, out_tensor, same_dtype, FuzzBackend, Op};
use crate::machine::{Ctx, Skip};
use tessera_core::{BinaryOp, CmpOp, DType, ReduceOp, UnaryOp};

/// The output has the broadcast shape of tensor arguments 0 and 1 and `dtype`.
fn broadcast_of<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    dtype: DType,
    out: &[crate::machine::Value<B>],
) -> Result<(), String> {
    let (a, b) = (c.t(0).map_err(|_| "gone")?, c.t(1).map_err(|_| "gone")?);
    let shape = a
        .shape()
        .broadcast_with("t", b.shape())
        .map_err(|e| format!("Ok for shapes that do not broadcast: {e}"))?;
    has(out_tensor(out)?, shape.dims(), dtype)
}

/// Work of a binary op: the broadcast output's elements.
fn broadcast_work<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<usize, Skip> {
    let (a, b) = (c.t(0)?, c.t(1)?);
    Ok(match a.shape().broadcast_with("t", b.shape()) {
        Ok(s) => s.numel(),
        Err(_) => 0,
    })
}

/// Work of a matrix product: output elements times the inner dimension.
fn matmul_work<B: FuzzBackend>(c: &Ctx<'_, B>) -> Result<usize, Skip> {
    let (a, b) = (c.t(0)?, c.t(1)?);
    Ok(product_work(a.dims(), b.dims()).saturating_add(a.numel() + b.numel()))
}

/// Multiply-adds of `a · b` as `Tensor::matmul` broadcasts them: the batch dimensions of both
/// operands broadcast against each other (the larger of two aligned sizes), times `m n k`, where
/// a 1-D left operand has one row and a 1-D right operand one column. Mismatched shapes (an
/// error) are counted as if they broadcast.
pub(crate) fn product_work(a: &[usize], b: &[usize]) -> usize {
    let k = a.last().copied().unwrap_or(1).max(1);
    let m = if a.len() >= 2 { a[a.len() - 2] } else { 1 };
    let n = if b.len() >= 2 { b[b.len() - 1] } else { 1 };
    let (a_batch, b_batch) = (
        &a[..a.len().saturating_sub(2)],
        &b[..b.len().saturating_sub(2)],
    );
    let rank = a_batch.len().max(b_batch.len());
    let aligned =
        |dims: &[usize], i: usize| (i + dims.len()).checked_sub(rank).map_or(1, |j| dims[j]);
    let batch = (0..rank).fold(1usize, |acc, i| {
        acc.saturating_mul(aligned(a_batch, i).max(aligned(b_batch, i)))
    });
    batch.saturating_mul(m).saturating_mul(n).saturating_mul(k)
}

/// A bias that fits a product with `rhs` (`[n]` for `rhs: [.., k, n]`): the sum of its rows,
/// in its dtype; an error where `rhs` has no columns or is not a float tensor.
pub(super) fn bias_for<B: FuzzBackend>(
    rhs: &tessera_core::Tensor<B>,
) -> tessera_core::Result<tessera_core::Tensor<B>> {
    let n = rhs.dims().last().copied().unwrap_or(0).max(1);
    rhs.reshape([rhs.numel() / n, n])?.sum(&[0], false)
}

/// Work of a reduction of tensor argument 0 over the axes of argument `axes_arg`: the elements
/// of its view, a reduced axis of stride 0 counted once (repeated in closed form, see
/// docs/SOUNDNESS.md "Work bounds") — except where the view is first converted whole (Bool
/// sums go through `i64`; `widens`: 16-bit means widen to f32), which costs an allocation of
/// every element.
fn reduce_work<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    axes_arg: usize,
    widens: bool,
) -> Result<usize, Skip> {
    let x = c.t(0)?;
    if x.dtype() == DType::Bool || (widens && x.dtype().is_half()) {
        return Ok(super::alloc_work(x.numel()));
    }
    let axes = c.axes(axes_arg);
    let reduced = |a: usize| {
        axes.is_empty()
            || axes
                .iter()
                .any(|&r| x.shape().axis("reduce", r).is_ok_and(|r| r == a))
    };
    let strides = x.layout().strides();
    Ok(x.dims()
        .iter()
        .enumerate()
        .map(|(a, &d)| {
            if reduced(a) && strides[a] == 0 {
                d.min(1)
            } else {
                d
            }
        })
        .fold(1usize, usize::saturating_mul))
}

/// A reduction over a broadcast view (a reduced axis of stride 0) agrees with the same
/// reduction over the view made contiguous, when that is small enough to make: exactly for
/// max and min, to a relative `1e-3` of the magnitude for sums and products (the closed form
/// rounds differently from a walk).
fn closed_form_agrees<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    op: ReduceOp,
    axes: &[isize],
    keepdim: bool,
    got: &tessera_core::Tensor<B>,
) -> Result<(), String> {
    let x = c.t(0).map_err(|_| "gone")?;
    let has_broadcast_axis = x
        .layout()
        .strides()
        .iter()
        .zip(x.dims())
        .any(|(&s, &d)| s == 0 && d > 1);
    if !has_broadcast_axis || x.numel() > 4096 || !matches!(x.dtype(), DType::F32 | DType::F64) {
        return Ok(());
    }
    let Ok(walked) = x.contiguous().and_then(|y| y.reduce(op, axes, keepdim)) else {
        return Ok(());
    };
    let (a, b) = (
        got.to_vec_f64().map_err(|e| e.to_string())?,
        walked.to_vec_f64().map_err(|e| e.to_string())?,
    );
    for (g, w) in a.iter().zip(&b) {
        let close = match op {
            ReduceOp::Max | ReduceOp::Min => g == w || (g.is_nan() && w.is_nan()),
            _ => {
                g == w
                    || (g.is_nan() && w.is_nan())
                    || (!w.is_finite() && (g.is_nan() || !g.is_finite()))
                    || (g - w).abs() <= 1e-3 * w.abs().max(1e-30)
                    // An f32 product may underflow or overflow a step earlier or later.
                    || (x.dtype() == DType::F32 && (g.abs() < 1e-30 || w.abs() < 1e-30))
            }
        };
        if !close {
            return Err(format!(
                "{} over a broadcast view gave {g}, the contiguous copy {w}",
                op.name()
            ));
        }
    }
    Ok(())
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("Tensor::unary", 10, &[T, SIZE], OUT_T, |c| {
            let u = UnaryOp::ALL[c.size(1) % UnaryOp::ALL.len()];
            Ok(c.t(0)?.unary(u).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("Tensor::binary", 10, &[T, T, SIZE], OUT_T, |c| {
            let b = BinaryOp::ALL[c.size(2) % BinaryOp::ALL.len()];
            Ok(c.t(0)?.binary(b, &c.t(1)?).into())
        })
        .work(broadcast_work)
        .expect(|c, out| {
            let dtype = c.t(0).map_err(|_| "gone")?.dtype();
            broadcast_of(c, dtype, out)
        }),
        op("Tensor::add_scalar", 3, &[T, F], OUT_T, |c| {
            Ok(c.t(0)?.add_scalar(c.float(1)).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("Tensor::powf", 2, &[T, F], OUT_T, |c| {
            Ok(c.t(0)?.powf(c.float(1)).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("Tensor::compare", 5, &[T, T, SIZE], OUT_T, |c| {
            let cmp = CmpOp::ALL[c.size(2) % CmpOp::ALL.len()];
            Ok(c.t(0)?.compare(cmp, &c.t(1)?).into())
        })
        .work(broadcast_work)
        .expect(|c, out| broadcast_of(c, DType::Bool, out)),
        op("Tensor::where_select", 4, &[T, T, T], OUT_T, |c| {
            Ok(c.t(0)?.where_select(&c.t(1)?, &c.t(2)?).into())
        })
        .expect(|c, out| same_dtype(c, 1, out)),
        op("Tensor::clamp", 2, &[T, F, F], OUT_T, |c| {
            Ok(c.t(0)?.clamp(c.float(1), c.float(2)).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("Tensor::leaky_relu", 2, &[T, F], OUT_T, |c| {
            Ok(c.t(0)?.leaky_relu(c.float(1)).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("Tensor::reduce", 8, &[T, SIZE, AXES, B], OUT_T, |c| {
            let r = ReduceOp::ALL[c.size(1) % ReduceOp::ALL.len()];
            Ok(c.t(0)?.reduce(r, &c.axes(2), c.flag(3)).into())
        })
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "gone")?;
            let o = out_tensor(out)?;
            let expected = if x.dtype() == DType::Bool {
                DType::I64
            } else {
                x.dtype()
            };
            if o.dtype() != expected {
                return Err(format!("reduce of {} gave {}", x.dtype(), o.dtype()));
            }
            if c.flag(3) && o.rank() != x.rank() {
                return Err("keepdim changed the rank".into());
            }
            let r = ReduceOp::ALL[c.size(1) % ReduceOp::ALL.len()];
            closed_form_agrees(c, r, &c.axes(2), c.flag(3), o)
        })
        .work(|c| reduce_work(c, 2, false)),
        op("Tensor::mean", 3, &[T, AXES, B], OUT_T, |c| {
            Ok(c.t(0)?.mean(&c.axes(1), c.flag(2)).into())
        })
        .expect(|c, out| same_dtype(c, 0, out))
        .work(|c| reduce_work(c, 1, true)),
        op("Tensor::var", 3, &[T, AXES, SIZE, B], OUT_T, |c| {
            Ok(c.t(0)?.var(&c.axes(1), c.size(2), c.flag(3)).into())
        })
        .expect(|c, out| same_dtype(c, 0, out)),
        op("Tensor::argmax", 4, &[T, AXIS, B], OUT_T, |c| {
            Ok(c.t(0)?.argmax(c.axis(1), c.flag(2)).into())
        })
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "gone")?;
            let o = out_tensor(out)?;
            let axis = x.shape().axis("t", c.axis(1)).map_err(|e| e.to_string())?;
            let size = x.dims()[axis] as f64;
            if o.dtype() != DType::I64 {
                return Err(format!("argmax gave {}", o.dtype()));
            }
            if o.numel() <= 4096 {
                let v = o.to_vec_f64().map_err(|e| e.to_string())?;
                if let Some(bad) = v.iter().find(|&&i| i < 0.0 || i >= size) {
                    return Err(format!("argmax index {bad} outside an axis of {size}"));
                }
            }
            Ok(())
        }),
        op("Tensor::argmin", 2, &[T, AXIS, B], OUT_T, |c| {
            Ok(c.t(0)?.argmin(c.axis(1), c.flag(2)).into())
        }),
        op("Tensor::softmax", 4, &[T, AXIS], OUT_T, |c| {
            Ok(c.t(0)?.softmax(c.axis(1)).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("composite::in_f32(softmax)", 2, &[T, AXIS], OUT_T, |c| {
            // The shared "16-bit in f32" helper: None (nothing to widen) runs the plain op.
            let (x, axis) = (c.t(0)?, c.axis(1));
            let widened =
                tessera_core::composite::in_f32([Some(&x)], |[x]| x.unwrap().softmax(axis));
            Ok(widened.unwrap_or_else(|| x.softmax(axis)).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("Tensor::log_softmax", 3, &[T, AXIS], OUT_T, |c| {
            Ok(c.t(0)?.log_softmax(c.axis(1)).into())
        })
        .expect(|c, out| like_input(c, 0, out)),
        op("Tensor::logsumexp", 3, &[T, AXIS, B], OUT_T, |c| {
            Ok(c.t(0)?.logsumexp(c.axis(1), c.flag(2)).into())
        })
        .expect(|c, out| same_dtype(c, 0, out)),
        op("Tensor::matmul", 8, &[T, T], OUT_T, |c| {
            Ok(c.t(0)?.matmul(&c.t(1)?).into())
        })
        .work(matmul_work)
        .expect(|c, out| same_dtype(c, 0, out)),
        op("Tensor::matmul_bias", 4, &[T, T, T, B], OUT_T, |c| {
            let (a, b) = (c.t(0)?, c.t(1)?);
            let bias = if c.flag(3) { bias_for(&b) } else { Ok(c.t(2)?) };
            Ok(bias.and_then(|bias| a.matmul_bias(&b, &bias)).into())
        })
        .work(matmul_work)
        .expect(|c, out| same_dtype(c, 0, out)),
        op("&a + &b", 2, &[T, T], OUT_T, |c| {
            Ok((&c.t(0)? + &c.t(1)?).into())
        })
        .work(broadcast_work),
        op("-&a", 1, &[T], OUT_T, |c| Ok((-&c.t(0)?).into())),
    ]
}

#[cfg(test)]
mod tests {
    use super::product_work;

    #[test]
    fn product_work_counts_each_batch_once() {
        // [3, 4, 5] · [3, 5, 6]: three 4x5 · 5x6 products.
        assert_eq!(product_work(&[3, 4, 5], &[3, 5, 6]), 3 * 4 * 6 * 5);
        assert_eq!(product_work(&[4, 5], &[5, 6]), 4 * 6 * 5);
        // Batch dimensions broadcast: [2, 1] against [3] is [2, 3].
        assert_eq!(product_work(&[2, 1, 4, 5], &[3, 5, 6]), 2 * 3 * 4 * 6 * 5);
        assert_eq!(product_work(&[4, 5], &[7, 5, 6]), 7 * 4 * 6 * 5);
        // Vectors: one row on the left, one column on the right.
        assert_eq!(product_work(&[5], &[5, 6]), 6 * 5);
        assert_eq!(product_work(&[4, 5], &[5]), 4 * 5);
        assert_eq!(product_work(&[5], &[5]), 5);
        assert_eq!(product_work(&[], &[]), 1);
    }
}
