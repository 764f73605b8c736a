//! Autograd: variables from tensors, differentiable ops, backward passes and gradients.

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Outcome, Skip, Value};
use tessera_autograd::{no_grad, Var};
use tessera_core::UnaryOp;

/// The documented shape of a variable output: that of variable argument 0.
fn like_var<B: FuzzBackend>(
    c: &crate::machine::Ctx<'_, B>,
    out: &[Value<B>],
) -> Result<(), String> {
    let x = c.v(0).map_err(|_| "gone")?;
    match out.first() {
        Some(Value::Var(v)) if v.dims() == x.dims() && v.dtype() == x.dtype() => Ok(()),
        Some(Value::Var(v)) => Err(format!(
            "{} {} for input {} {}",
            v.dtype(),
            v.shape(),
            x.dtype(),
            x.shape()
        )),
        _ => Err("expected a variable".into()),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("Var::param", 8, &[T], OUT_V, |c| {
            Ok(Ok::<_, String>(Var::param(c.t(0)?)).into())
        }),
        op("Var::constant", 2, &[T], OUT_V, |c| {
            Ok(Ok::<_, String>(Var::constant(c.t(0)?)).into())
        }),
        op("Var::unary", 6, &[V, SIZE], OUT_V, |c| {
            let v = c.v(0)?;
            Ok(match UnaryOp::ALL[c.size(1) % 14] {
                UnaryOp::Neg => v.neg(),
                UnaryOp::Abs => v.abs(),
                UnaryOp::Sign => v.sign(),
                UnaryOp::Square => v.square(),
                UnaryOp::Recip => v.recip(),
                UnaryOp::Sqrt => v.sqrt(),
                UnaryOp::Exp => v.exp(),
                UnaryOp::Log => v.log(),
                UnaryOp::Sin => v.sin(),
                UnaryOp::Cos => v.cos(),
                UnaryOp::Tanh => v.tanh(),
                UnaryOp::Sigmoid => v.sigmoid(),
                UnaryOp::Relu => v.relu(),
                _ => v.gelu(),
            }
            .into())
        })
        .expect(like_var),
        op("Var::binary", 6, &[V, V, SIZE], OUT_V, |c| {
            let (a, b) = (c.v(0)?, c.v(1)?);
            Ok(match c.size(2) % 6 {
                0 => a.add(&b),
                1 => a.sub(&b),
                2 => a.mul(&b),
                3 => a.div(&b),
                4 => a.maximum(&b),
                _ => a.pow(&b),
            }
            .into())
        }),
        op("Var::matmul", 4, &[V, V], OUT_V, |c| {
            Ok(c.v(0)?.matmul(&c.v(1)?).into())
        })
        .work(|c| {
            let (a, b) = (c.v(0)?, c.v(1)?);
            Ok(a.numel()
                .saturating_mul(b.dims().last().copied().unwrap_or(1).max(1)))
        }),
        op("Var::sum", 4, &[V, AXES, B], OUT_V, |c| {
            Ok(c.v(0)?.sum(&c.axes(1), c.flag(2)).into())
        }),
        op("Var::mean_all", 2, &[V], OUT_V, |c| {
            Ok(c.v(0)?.mean_all().into())
        }),
        op("Var::max", 2, &[V, AXES, B], OUT_V, |c| {
            Ok(c.v(0)?.max(&c.axes(1), c.flag(2)).into())
        }),
        op("Var::var", 1, &[V, AXES, SIZE, B], OUT_V, |c| {
            Ok(c.v(0)?.var(&c.axes(1), c.size(2), c.flag(3)).into())
        }),
        op("Var::logsumexp", 1, &[V, AXIS, B], OUT_V, |c| {
            Ok(c.v(0)?.logsumexp(c.axis(1), c.flag(2)).into())
        }),
        op("Var::reshape", 3, &[V, DIMS], OUT_V, |c| {
            Ok(c.v(0)?.reshape(c.dims(1)).into())
        }),
        op("Var::transpose", 2, &[V, AXIS, AXIS], OUT_V, |c| {
            Ok(c.v(0)?.transpose(c.axis(1), c.axis(2)).into())
        }),
        op("Var::narrow", 2, &[V, AXIS, SIZE, SIZE], OUT_V, |c| {
            Ok(c.v(0)?.narrow(c.axis(1), c.size(2), c.size(3)).into())
        }),
        op("Var::broadcast_to", 2, &[V, DIMS], OUT_V, |c| {
            Ok(c.v(0)?.broadcast_to(c.dims(1)).into())
        })
        .work(|_| Ok(0)),
        op("Var::softmax", 2, &[V, AXIS], OUT_V, |c| {
            Ok(c.v(0)?.softmax(c.axis(1)).into())
        })
        .expect(like_var),
        op("Var::log_softmax", 2, &[V, AXIS], OUT_V, |c| {
            Ok(c.v(0)?.log_softmax(c.axis(1)).into())
        }),
        op("Var::conv2d", 3, &[V, V, CONV], OUT_V, |c| {
            Ok(c.v(0)?.conv2d(&c.v(1)?, None, c.conv(2)).into())
        })
        .work(|c| {
            let (x, w) = (c.v(0)?, c.v(1)?);
            Ok(x.numel().saturating_mul(w.numel().max(1)))
        }),
        op("Var::max_pool2d", 2, &[V, POOL], OUT_V, |c| {
            Ok(c.v(0)?.max_pool2d(c.pool(1)).into())
        })
        .work(|c| {
            let p = c.pool(1);
            Ok(c.v(0)?
                .numel()
                .saturating_mul(p.kernel.0.saturating_mul(p.kernel.1)))
        }),
        op("Var::avg_pool2d", 2, &[V, POOL], OUT_V, |c| {
            Ok(c.v(0)?.avg_pool2d(c.pool(1)).into())
        })
        .work(|c| {
            let p = c.pool(1);
            Ok(c.v(0)?
                .numel()
                .saturating_mul(p.kernel.0.saturating_mul(p.kernel.1)))
        }),
        op("Var::index_select", 2, &[V, AXIS, T], OUT_V, |c| {
            Ok(c.v(0)?.index_select(c.axis(1), &c.t(2)?).into())
        }),
        op("Var::gather", 1, &[V, AXIS, T], OUT_V, |c| {
            Ok(c.v(0)?.gather(c.axis(1), &c.t(2)?).into())
        }),
        op("Var::cat", 2, &[V, V, AXIS], OUT_V, |c| {
            let (a, b) = (c.v(0)?, c.v(1)?);
            Ok(Var::cat(&[&a, &b], c.axis(2)).into())
        }),
        op("Var::where_select", 1, &[T, V, V], OUT_V, |c| {
            Ok(Var::where_select(&c.t(0)?, &c.v(1)?, &c.v(2)?).into())
        }),
        op("Var::clamp", 1, &[V, F, F], OUT_V, |c| {
            Ok(c.v(0)?.clamp(c.float(1), c.float(2)).into())
        }),
        op("Var::backward", 6, &[V, B], NONE, |c| {
            let v = c.v(0)?;
            Ok(if c.flag(1) {
                v.backward_retain()
            } else {
                v.backward()
            }
            .into())
        })
        .work(|c| Ok(c.v(0)?.numel().saturating_mul(64))),
        op("Var::backward_with", 2, &[V, T], NONE, |c| {
            Ok(c.v(0)?.backward_with(&c.t(1)?).into())
        }),
        op("Var::grad", 4, &[V], OUT_T, |c| {
            Ok(match c.v(0)?.grad() {
                Some(g) => Outcome::Ok(vec![Value::Tensor(g)]),
                None => return Err(Skip("no gradient yet")),
            })
        }),
        op("Var::set_value", 2, &[V, T], NONE, |c| {
            Ok(c.v(0)?.set_value(c.t(1)?).into())
        }),
        op("Var::detach", 1, &[V], OUT_V, |c| {
            Ok(Ok::<_, String>(c.v(0)?.detach()).into())
        }),
        op("no_grad(Var::mul)", 1, &[V, V], OUT_V, |c| {
            let (a, b) = (c.v(0)?, c.v(1)?);
            Ok(no_grad(|| a.mul(&b)).into())
        }),
    ]
}
