//! Direct calls of `Backend` methods, which are public too: storages with layouts that may not
//! fit them (built unchecked with `Layout::contiguous`), axes out of range, absurd element
//! counts, and the composites (convolution and pooling gradients, concat, softmax) called
//! without `Tensor`'s checks in front. The backend must answer with typed errors on its own.

use super::kinds::*;
use super::math::bias_for;
use super::{alloc_work, op, FuzzBackend, Op};
use crate::machine::{Ctx, Outcome, Skip};
use tessera_core::backend::AdamUpdate;
use tessera_core::direct;
use tessera_core::{
    ArgReduceOp, BackendStorage, BinaryOp, DType, Distribution, Layout, ReduceOp, Tensor, UnaryOp,
};

/// The layout of the operand whose four arguments start at `i` (tensor, dims, strides,
/// offset): the checked `Layout::strided` when it accepts them, else `Layout::contiguous` of
/// the dims, unchecked, which may reach far past the storage.
fn layout_at<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> Result<(Tensor<B>, Layout), Skip> {
    let t = c.t(i)?;
    let dims = c.dims(i + 1);
    let strides: Vec<isize> = c.dims(i + 2).iter().map(|&s| s as isize).collect();
    let layout = match Layout::strided(dims.clone(), strides, c.size(i + 3), t.storage().len()) {
        Ok(l) => l,
        Err(_) => Layout::contiguous(dims),
    };
    Ok((t, layout))
}

/// Work of a call reading the operand at `i` and allocating as many elements: those of its
/// layout ([`read_work`]), except that 2^32 or more cost nothing ([`alloc_work`]: the
/// allocation fails at once).
fn layout_work<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> Result<usize, Skip> {
    read_work(c, i).map(alloc_work)
}

/// Work of a call that reads every element of the operand at `i` without allocating as many
/// (a reduction, a product): all the elements of its layout, however many, since a stride-0
/// view of 2^62 elements is read 2^62 times and no allocation fails early to stop it; 0 for an
/// unchecked layout that does not fit (rejected at once).
fn read_work<B: FuzzBackend>(c: &Ctx<'_, B>, i: usize) -> Result<usize, Skip> {
    let (t, l) = layout_at(c, i)?;
    Ok(if l.check_fits("work", t.storage().len()).is_ok() {
        l.numel()
    } else {
        0
    })
}

/// A storage result, checked to hold the documented `len` elements of `dtype`.
fn checked<B: FuzzBackend, S: BackendStorage>(
    r: tessera_core::Result<S>,
    len: impl Fn() -> usize,
    dtype: DType,
) -> Outcome<B> {
    match r {
        Err(e) => Outcome::Err(e.to_string()),
        Ok(s) if s.len() != len() || s.dtype() != dtype => Outcome::Break(format!(
            "a storage of {} {} elements where {} {dtype} are documented",
            s.len(),
            s.dtype(),
            len()
        )),
        Ok(_) => Outcome::Ok(Vec::new()),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op(
            "backend.full",
            3,
            &[SIZE, DT, F],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (n, dtype) = (c.size(0), c.dtype(1));
                Ok(checked(c.backend().full(n, dtype, c.float(2)), || n, dtype))
            },
        )
        .work(|c| Ok(alloc_work(c.size(0)))),
        op(
            "backend.random",
            2,
            &[SIZE, DT, SEED, SEED],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (n, dtype) = (c.size(0), c.dtype(1));
                let dist = Distribution::Uniform {
                    low: 0.0,
                    high: 1.0,
                };
                let r = c.backend().random(dist, n, dtype, c.seed(2), c.seed(3));
                Ok(checked(r, || n, dtype))
            },
        )
        .work(|c| Ok(alloc_work(c.size(0)))),
        op(
            "backend.copy_strided",
            4,
            &[T, DIMS, DIMS, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                let r = direct::copy_strided(c.backend(), t.storage(), &l);
                Ok(checked(r, || l.numel(), t.dtype()))
            },
        )
        .work(|c| layout_work(c, 0)),
        op(
            "backend.download",
            3,
            &[T, DIMS, DIMS, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                Ok(match direct::download(c.backend(), t.storage(), &l) {
                    Ok(h) if h.len() != l.numel() || h.dtype() != t.dtype() => {
                        Outcome::Break(format!(
                            "downloaded {} elements for a layout of {}",
                            h.len(),
                            l.numel()
                        ))
                    }
                    Ok(_) => Outcome::Ok(Vec::new()),
                    Err(e) => Outcome::Err(e.to_string()),
                })
            },
        )
        .work(|c| layout_work(c, 0)),
        op(
            "backend.unary",
            4,
            &[T, DIMS, DIMS, SIZE, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                let u = UnaryOp::ALL[c.size(4) % UnaryOp::ALL.len()];
                let r = direct::unary(c.backend(), u, t.storage(), &l);
                Ok(checked(r, || l.numel(), t.dtype()))
            },
        )
        .work(|c| layout_work(c, 0)),
        op(
            "backend.cast",
            2,
            &[T, DIMS, DIMS, SIZE, DT],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                let r = direct::cast(c.backend(), t.storage(), &l, c.dtype(4));
                Ok(checked(r, || l.numel(), c.dtype(4)))
            },
        )
        .work(|c| layout_work(c, 0)),
        op(
            "backend.binary",
            4,
            &[T, DIMS, DIMS, SIZE, T, DIMS, DIMS, SIZE, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (a, la) = layout_at(c, 0)?;
                let (b, lb) = layout_at(c, 4)?;
                let op = BinaryOp::ALL[c.size(8) % BinaryOp::ALL.len()];
                let r = direct::binary(c.backend(), op, (a.storage(), &la), (b.storage(), &lb));
                Ok(checked(r, || la.numel(), a.dtype()))
            },
        )
        .work(|c| Ok(layout_work(c, 0)?.saturating_add(layout_work(c, 4)?))),
        op(
            "backend.reduce",
            4,
            &[T, DIMS, DIMS, SIZE, PERM, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                let axes = c.dims(4);
                let r = ReduceOp::ALL[c.size(5) % ReduceOp::ALL.len()];
                let out = direct::reduce(c.backend(), r, t.storage(), &l, &axes);
                let kept = || {
                    l.dims()
                        .iter()
                        .enumerate()
                        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
                        .product()
                };
                Ok(checked(out, kept, t.dtype()))
            },
        )
        .work(|c| read_work(c, 0)),
        op(
            "backend.arg_reduce",
            3,
            &[T, DIMS, DIMS, SIZE, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                let axis = c.size(4);
                let out =
                    direct::arg_reduce(c.backend(), ArgReduceOp::ArgMax, t.storage(), &l, axis);
                let len = || {
                    let mut dims = l.dims().to_vec();
                    if let Some(d) = dims.get_mut(axis) {
                        *d = 1;
                    }
                    super::numel(&dims)
                };
                Ok(checked(out, len, DType::I64))
            },
        )
        .work(|c| read_work(c, 0)),
        op(
            "backend.matmul",
            4,
            &[T, DIMS, DIMS, SIZE, T, DIMS, DIMS, SIZE],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (a, la) = layout_at(c, 0)?;
                let (b, lb) = layout_at(c, 4)?;
                let r = direct::matmul(c.backend(), (a.storage(), &la), (b.storage(), &lb));
                let len = || {
                    let r = la.rank();
                    let mut d = la.dims()[..r.saturating_sub(1)].to_vec();
                    d.push(lb.dims().last().copied().unwrap_or(0));
                    d.iter().product()
                };
                Ok(checked(r, len, a.dtype()))
            },
        )
        .work(|c| {
            let (w0, w1) = (read_work(c, 0)?, read_work(c, 4)?);
            Ok(w0.saturating_mul(w1.max(1)).min(usize::MAX / 2))
        }),
        op(
            "backend.index_select",
            3,
            &[T, DIMS, DIMS, SIZE, SIZE, IDX],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                let values = c.indices(5);
                let n = values.len();
                let idx = match Tensor::from_vec(values, [n], c.backend()) {
                    Ok(i) => i,
                    Err(e) => return Ok(Outcome::Err(e.to_string())),
                };
                let axis = c.size(4);
                let r = direct::index_select(
                    c.backend(),
                    (t.storage(), &l),
                    axis,
                    (idx.storage(), idx.layout()),
                );
                let len = || l.numel() / l.dims().get(axis).copied().unwrap_or(1).max(1) * n;
                Ok(checked(r, len, t.dtype()))
            },
        )
        .work(|c| layout_work(c, 0)),
        op(
            "backend.gather",
            2,
            &[T, DIMS, DIMS, SIZE, SIZE, T],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (t, l) = layout_at(c, 0)?;
                let idx = c.t(5)?;
                let r = direct::gather(
                    c.backend(),
                    (t.storage(), &l),
                    c.size(4),
                    (idx.storage(), idx.layout()),
                );
                Ok(checked(r, || idx.numel(), t.dtype()))
            },
        )
        .work(|c| Ok(layout_work(c, 0)?.saturating_add(c.t(5)?.numel()))),
        op(
            "backend.assign",
            2,
            &[SIZE, DIMS, DIMS, SIZE, T],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let src = c.t(4)?;
                let mut dst = match c.backend().full(c.size(0), src.dtype(), 0.0) {
                    Ok(s) => s,
                    Err(e) => return Ok(Outcome::Err(e.to_string())),
                };
                let dims = c.dims(1);
                let strides: Vec<isize> = c.dims(2).iter().map(|&s| s as isize).collect();
                let dl = Layout::strided(dims.clone(), strides, c.size(3), dst.len())
                    .unwrap_or_else(|_| Layout::contiguous(dims));
                let r = direct::assign(
                    c.backend(),
                    (&mut dst, &dl),
                    (src.storage(), src.layout()),
                    tessera_core::AssignMode::Accumulate,
                );
                Ok(r.into())
            },
        )
        .work(|c| Ok(alloc_work(c.size(0)).saturating_add(c.t(4)?.numel()))),
        op(
            "backend.conv2d_backward_input",
            3,
            &[T, T, DIMS, CONV],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (g, w) = (c.t(0)?, c.t(1)?);
                Ok(c.backend()
                    .conv2d_backward_input(&g, &w, &c.dims(2), c.conv(3))
                    .into())
            },
        )
        .work(|c| {
            Ok(c.t(0)?
                .numel()
                .saturating_mul(c.t(1)?.numel().max(1))
                .saturating_add(alloc_work(super::numel(&c.dims(2)))))
        }),
        op(
            "backend.conv2d_backward_weight",
            2,
            &[T, T, DIMS, CONV],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (x, g) = (c.t(0)?, c.t(1)?);
                Ok(c.backend()
                    .conv2d_backward_weight(&x, &g, &c.dims(2), c.conv(3))
                    .into())
            },
        )
        .work(|c| {
            Ok(c.t(1)?
                .numel()
                .saturating_mul(alloc_work(super::numel(&c.dims(2))).max(1))
                .saturating_add(c.t(0)?.numel()))
        }),
        op(
            "backend.max_pool2d_backward",
            2,
            &[T, T, DIMS, POOL],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (g, at) = (c.t(0)?, c.t(1)?);
                Ok(c.backend()
                    .max_pool2d_backward(&g, &at, &c.dims(2), c.pool(3))
                    .into())
            },
        )
        .work(|c| Ok(alloc_work(super::numel(&c.dims(2))).saturating_add(c.t(0)?.numel() * 4))),
        op(
            "backend.avg_pool2d_backward",
            2,
            &[T, DIMS, POOL],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let g = c.t(0)?;
                Ok(c.backend()
                    .avg_pool2d_backward(&g, &c.dims(1), c.pool(2))
                    .into())
            },
        )
        .work(|c| Ok(alloc_work(super::numel(&c.dims(1))).saturating_add(c.t(0)?.numel() * 4))),
        op(
            "backend.concat",
            2,
            &[T, T, SIZE],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (a, b) = (c.t(0)?, c.t(1)?);
                Ok(c.backend().concat(&[&a, &b], c.size(2)).into())
            },
        ),
        op(
            "backend.concat(empty list)",
            1,
            &[SIZE],
            OUT_T,
            |c: &mut Ctx<'_, B>| Ok(c.backend().concat(&[], c.size(0)).into()),
        ),
        op(
            "backend.softmax",
            2,
            &[T, SIZE],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let x = c.t(0)?;
                Ok(c.backend().softmax(&x, c.size(1)).into())
            },
        ),
        op(
            "backend.logsumexp",
            1,
            &[T, SIZE],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let x = c.t(0)?;
                Ok(c.backend().logsumexp(&x, c.size(1)).into())
            },
        ),
        op(
            "backend.relu_backward",
            2,
            &[T, T],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (x, g) = (c.t(0)?, c.t(1)?);
                Ok(c.backend().relu_backward(&x, &g).into())
            },
        ),
        op(
            "backend.gelu_backward",
            2,
            &[T, T],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (x, g) = (c.t(0)?, c.t(1)?);
                Ok(c.backend().gelu_backward(&x, &g).into())
            },
        ),
        op(
            "backend.matmul_bias",
            2,
            &[T, T, T, B],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (a, b) = (c.t(0)?, c.t(1)?);
                // With the flag, a bias of the right length, else any tensor.
                let bias = if c.flag(3) { bias_for(&b) } else { Ok(c.t(2)?) };
                Ok(bias
                    .and_then(|bias| c.backend().matmul_bias(&a, &b, &bias))
                    .into())
            },
        )
        .work(|c| {
            let (a, b) = (c.t(0)?, c.t(1)?);
            Ok(crate::ops::math::product_work(a.dims(), b.dims())
                .saturating_add(a.numel() + b.numel()))
        }),
        op(
            "backend.cross_entropy",
            2,
            &[T, T, F],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (x, t) = (c.t(0)?, c.t(1)?);
                Ok(c.backend().cross_entropy(&x, &t, c.float(2)).into())
            },
        ),
        op(
            "backend.cross_entropy_backward",
            2,
            &[T, T, T, F],
            OUT_T,
            |c: &mut Ctx<'_, B>| {
                let (x, t, g) = (c.t(0)?, c.t(1)?, c.t(2)?);
                Ok(c.backend()
                    .cross_entropy_backward(&x, &t, &g, c.float(3))
                    .into())
            },
        ),
        op(
            "backend.layer_norm",
            2,
            &[T, T, T, B, B, F],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (x, w, b) = (c.t(0)?, c.t(1)?, c.t(2)?);
                let (w, b) = (c.flag(3).then_some(&w), c.flag(4).then_some(&b));
                Ok(match c.backend().layer_norm(&x, w, b, c.float(5)) {
                    Ok(out)
                        if out.y.dims() != x.dims()
                            || out.mean.numel() * x.dims().last().copied().unwrap_or(0)
                                != x.numel() =>
                    {
                        Outcome::Break(format!(
                            "layer_norm of {} returned y {} and mean {}",
                            x.shape(),
                            out.y.shape(),
                            out.mean.shape()
                        ))
                    }
                    Ok(_) => Outcome::Ok(Vec::new()),
                    Err(e) => Outcome::Err(e.to_string()),
                })
            },
        ),
        op(
            "backend.layer_norm_backward",
            2,
            &[T, T, T, T, T, B, B],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (g, x, w, mean, rstd) = (c.t(0)?, c.t(1)?, c.t(2)?, c.t(3)?, c.t(4)?);
                let w = c.flag(5).then_some(&w);
                let with_bias = c.flag(6);
                Ok(
                    match c
                        .backend()
                        .layer_norm_backward(&g, &x, w, (&mean, &rstd), with_bias)
                    {
                        Ok(out) if out.x.dims() != x.dims() || out.bias.is_some() != with_bias => {
                            Outcome::Break(format!(
                                "layer_norm_backward of {} returned dx {} (bias gradient: {})",
                                x.shape(),
                                out.x.shape(),
                                out.bias.is_some()
                            ))
                        }
                        Ok(_) => Outcome::Ok(Vec::new()),
                        Err(e) => Outcome::Err(e.to_string()),
                    },
                )
            },
        ),
        op(
            "backend.adam_update",
            2,
            &[T, T, T, T, B, F],
            NONE,
            |c: &mut Ctx<'_, B>| {
                let (p, g, m, v) = (c.t(0)?, c.t(1)?, c.t(2)?, c.t(3)?);
                let u = AdamUpdate {
                    beta1: 0.9,
                    beta2: 0.999,
                    step_size: c.float(5),
                    bias_correction2_sqrt: 0.5,
                    eps: 1e-8,
                    coupled_decay: 0.0,
                    decoupled_factor: 1.0,
                };
                let max = c.flag(4).then(|| v.clone());
                Ok(
                    match c.backend().adam_update(&p, &g, &m, &v, max.as_ref(), u) {
                        Ok(out) if out.param.dims() != p.dims() => {
                            Outcome::Break(format!("adam_update returned {}", out.param.shape()))
                        }
                        Ok(_) => Outcome::Ok(Vec::new()),
                        Err(e) => Outcome::Err(e.to_string()),
                    },
                )
            },
        ),
    ]
}
