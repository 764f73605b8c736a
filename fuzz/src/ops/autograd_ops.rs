//! Autograd: variables from tensors, differentiable ops, backward passes and gradients, and
//! gradient-ready hooks (each runs once per pass, seeing the gradient a plain pass gives).

use super::kinds::*;
use super::{op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome, Skip, Value};
use std::sync::{Arc, Mutex};
use tessera_autograd::{no_grad, GradReadyHook, Var};
use tessera_core::{Tensor, UnaryOp};

/// A small graph over two leaves made from `t`, chosen by `shape`: a leaf used twice, through
/// a view, through a non-differentiable step, or not at all.
fn hooked_graph<B: FuzzBackend>(
    a: &Var<B>,
    b: &Var<B>,
    shape: usize,
) -> tessera_core::Result<Var<B>> {
    let y = match shape % 4 {
        0 => a.mul(b)?.add(a)?.tanh()?,
        1 => a
            .reshape([a.numel()])?
            .mul(&b.reshape([b.numel()])?)?
            .sin()?,
        2 => a.square()?.add(&b.sign()?)?,
        _ => a.exp()?.mul_scalar(0.5)?,
    };
    y.sum_all()
}

/// Which leaf's hook ran, and the gradient it saw.
type HookRuns<B> = Vec<(usize, Option<Tensor<B>>)>;

/// Hooks on two leaves: a pass with them gives the gradients a pass without gives, bit for
/// bit, and runs each hook once (for a leaf the output does not depend on: never); a hook that
/// fails fails the pass; a non-leaf takes no hook.
fn hooks<B: FuzzBackend>(c: &Ctx<'_, B>) -> Outcome<B> {
    let (t, shape, other) = match (c.t(0), c.v(2)) {
        (Ok(t), Ok(v)) => (t, c.size(1), v),
        _ => return Outcome::Err("no operands".into()),
    };
    if !t.dtype().is_float() || t.numel() > 1 << 12 {
        return Outcome::Err("not a float tensor of at most 4096 elements".into());
    }
    let leaves = || (Var::param(t.clone()), Var::param(t.clone()));
    let plain = {
        let (a, b) = leaves();
        match hooked_graph(&a, &b, shape).and_then(|y| y.backward()) {
            Ok(()) => [a.grad(), b.grad()],
            Err(e) => return Outcome::Err(e.to_string()),
        }
    };
    let (a, b) = leaves();
    let seen: Arc<Mutex<HookRuns<B>>> = Arc::default();
    for (i, leaf) in [&a, &b].into_iter().enumerate() {
        let log = seen.clone();
        let hook: GradReadyHook<B> = Arc::new(move |v: &Var<B>| {
            log.lock().unwrap().push((i, v.grad()));
            Ok(())
        });
        if let Err(e) = leaf.set_grad_ready_hook(Some(hook)) {
            return Outcome::Break(format!("a parameter refused a hook: {e}"));
        }
    }
    if let Err(e) = hooked_graph(&a, &b, shape).and_then(|y| y.backward()) {
        return Outcome::Break(format!(
            "a pass with hooks failed where one without passed: {e}"
        ));
    }
    let same = |x: &Option<Tensor<B>>, y: &Option<Tensor<B>>| match (x, y) {
        (None, None) => true,
        (Some(x), Some(y)) => {
            let bits = |t: &Tensor<B>| {
                t.to_vec_f64()
                    .map(|v| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>())
                    .ok()
            };
            bits(x) == bits(y)
        }
        _ => false,
    };
    let seen = seen.lock().unwrap().clone();
    let reached = [true, shape % 4 != 3];
    for i in 0..2 {
        let runs: Vec<_> = seen.iter().filter(|(j, _)| *j == i).collect();
        if runs.len() != reached[i] as usize {
            return Outcome::Break(format!("leaf {i}'s hook ran {} times", runs.len()));
        }
        let grad = [a.grad(), b.grad()][i].clone();
        if !same(&grad, &plain[i]) || runs.iter().any(|(_, g)| !same(g, &plain[i])) {
            return Outcome::Break(format!("leaf {i}'s gradient differs with a hook"));
        }
    }
    // A failing hook fails the pass.
    let fail: GradReadyHook<B> = Arc::new(|_| {
        Err(tessera_core::Error::InvalidArgument {
            op: "fuzz hook",
            msg: "refused".into(),
        })
    });
    if a.set_grad_ready_hook(Some(fail)).is_err() {
        return Outcome::Break("a parameter refused a second hook".into());
    }
    if hooked_graph(&a, &b, shape)
        .and_then(|y| y.backward())
        .is_ok()
    {
        return Outcome::Break("a pass whose hook failed succeeded".into());
    }
    // Any other variable: a leaf that requires grad takes one (removed again), others refuse.
    let takes = other.is_leaf() && other.requires_grad();
    let noop: GradReadyHook<B> = Arc::new(|_| Ok(()));
    match (other.set_grad_ready_hook(Some(noop)), takes) {
        (Ok(()), true) => match other.set_grad_ready_hook(None) {
            Ok(()) => Outcome::Ok(Vec::new()),
            Err(e) => Outcome::Break(format!("removing a hook failed: {e}")),
        },
        (Err(e), false) => Outcome::Err(e.to_string()),
        (Ok(()), false) => Outcome::Break("a non-leaf took a hook".into()),
        (Err(e), true) => Outcome::Break(format!("a parameter refused a hook: {e}")),
    }
}

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
        op("Var::matmul_bias", 3, &[V, V, V, B], OUT_V, |c| {
            let (a, b) = (c.v(0)?, c.v(1)?);
            // With the flag, a trainable bias of the right length, else any Var.
            let bias = if c.flag(3) {
                match super::math::bias_for(&b.value()) {
                    Ok(t) => Var::param(t),
                    Err(e) => return Ok(Outcome::Err(e.to_string())),
                }
            } else {
                c.v(2)?
            };
            Ok(a.matmul_bias(&b, &bias).into())
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
        op(
            "Var::set_grad_ready_hook: once per pass, plain gradients",
            2,
            &[T, SIZE, V],
            NONE,
            |c| Ok(hooks(c)),
        )
        .work(|c| Ok(c.t(0)?.numel().saturating_mul(64))),
        op("no_grad(Var::mul)", 1, &[V, V], OUT_V, |c| {
            let (a, b) = (c.v(0)?, c.v(1)?);
            Ok(no_grad(|| a.mul(&b)).into())
        }),
    ]
}
