//! Convolution and pooling and their public gradient entry points, called with consistent
//! arguments (what autograd passes) and with arbitrary ones (issue 11: channel counts, ranks,
//! strides of 0, `grad_out` shapes no forward pass produces, window positions outside the
//! window).

use super::kinds::*;
use super::{alloc_work, has, numel, op, out_tensor, FuzzBackend, Op};
use crate::machine::Outcome;
use tessera_core::tensor::{conv_output_dims, pool_output_dims};
use tessera_core::{Conv2dParams, Pool2dParams, Tensor};

/// Work of a convolution of `x_dims` with `w_dims`: outputs times taps, plus the inputs.
pub(super) fn conv_work(x_dims: &[usize], w_dims: &[usize], p: Conv2dParams) -> usize {
    match conv_output_dims(x_dims, w_dims, p) {
        Ok(out) => numel(&out)
            .saturating_mul(numel(&w_dims[1..]))
            .saturating_add(alloc_work(numel(x_dims))),
        Err(_) => 0,
    }
}

/// Work of a pooling of `x_dims`: outputs times window taps, plus the input.
pub(super) fn pool_work(x_dims: &[usize], p: Pool2dParams) -> usize {
    match pool_output_dims("work", x_dims, p) {
        Ok(out) => numel(&out)
            .saturating_mul(p.kernel.0.saturating_mul(p.kernel.1))
            .saturating_add(alloc_work(numel(x_dims))),
        Err(_) => alloc_work(numel(x_dims)),
    }
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("Tensor::conv2d", 5, &[T, T, B, CONV], OUT_T, |c| {
            let (x, w) = (c.t(0)?, c.t(1)?);
            let bias = if c.flag(2) && w.rank() > 0 {
                Some(Tensor::ones([w.dims()[0]], w.dtype(), c.backend()))
            } else {
                None
            };
            let run = || x.conv2d(&w, bias.transpose()?.as_ref(), c.conv(3));
            Ok(run().into())
        })
        .work(|c| Ok(conv_work(c.t(0)?.dims(), c.t(1)?.dims(), c.conv(3))))
        .expect(|c, out| {
            let (x, w) = (c.t(0).map_err(|_| "gone")?, c.t(1).map_err(|_| "gone")?);
            let dims =
                conv_output_dims(x.dims(), w.dims(), c.conv(3)).map_err(|e| e.to_string())?;
            has(out_tensor(out)?, &dims, x.dtype())
        }),
        op(
            "Tensor::conv2d_backward_input",
            4,
            &[T, T, DIMS, CONV],
            OUT_T,
            |c| {
                Ok(c.t(0)?
                    .conv2d_backward_input(&c.t(1)?, &c.dims(2), c.conv(3))
                    .into())
            },
        )
        .work(|c| {
            let (g, w) = (c.t(0)?, c.t(1)?);
            Ok(numel(g.dims())
                .saturating_mul(numel(w.dims()).max(1))
                .saturating_add(alloc_work(numel(&c.dims(2)))))
        })
        .expect(|c, out| {
            let g = c.t(0).map_err(|_| "gone")?;
            has(out_tensor(out)?, &c.dims(2), g.dtype())
        }),
        op(
            "Tensor::conv2d_backward_weight",
            4,
            &[T, T, DIMS, CONV],
            OUT_T,
            |c| {
                Ok(c.t(0)?
                    .conv2d_backward_weight(&c.t(1)?, &c.dims(2), c.conv(3))
                    .into())
            },
        )
        .work(|c| Ok(conv_work(c.t(1)?.dims(), &c.dims(2), c.conv(3))))
        .expect(|c, out| {
            let g = c.t(0).map_err(|_| "gone")?;
            has(out_tensor(out)?, &c.dims(2), g.dtype())
        }),
        op("conv2d then both gradients", 4, &[T, T, CONV], NONE, |c| {
            // What autograd does: the gradients of a forward pass, with its own shapes.
            let (x, w, p) = (c.t(0)?, c.t(1)?, c.conv(2));
            let y = match x.conv2d(&w, None, p) {
                Ok(y) => y,
                Err(e) => return Ok(Outcome::Err(e.to_string())),
            };
            let gx = y.conv2d_backward_input(&w, x.dims(), p);
            let gw = y.conv2d_backward_weight(&x, w.dims(), p);
            Ok(match (gx, gw) {
                (Ok(gx), Ok(gw)) if gx.dims() == x.dims() && gw.dims() == w.dims() => {
                    Outcome::Ok(Vec::new())
                }
                (Ok(gx), Ok(gw)) => Outcome::Break(format!(
                    "gradients of shapes {} and {} for input {} and weight {}",
                    gx.shape(),
                    gw.shape(),
                    x.shape(),
                    w.shape()
                )),
                (Err(e), _) | (_, Err(e)) => Outcome::Err(e.to_string()),
            })
        })
        .work(|c| Ok(conv_work(c.t(0)?.dims(), c.t(1)?.dims(), c.conv(2)).saturating_mul(3))),
        op(
            "Tensor::max_pool2d_with_indices",
            4,
            &[T, POOL],
            OUT_TT,
            |c| Ok(c.t(0)?.max_pool2d_with_indices(c.pool(1)).into()),
        )
        .work(|c| Ok(pool_work(c.t(0)?.dims(), c.pool(1))))
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "gone")?;
            let dims = pool_output_dims("t", x.dims(), c.pool(1)).map_err(|e| e.to_string())?;
            has(out_tensor(out)?, &dims, x.dtype())
        }),
        op(
            "Tensor::max_pool2d_backward",
            3,
            &[T, T, DIMS, POOL],
            OUT_T,
            |c| {
                Ok(c.t(0)?
                    .max_pool2d_backward(&c.t(1)?, &c.dims(2), c.pool(3))
                    .into())
            },
        )
        .work(|c| Ok(pool_work(&c.dims(2), c.pool(3)).saturating_add(c.t(0)?.numel())))
        .expect(|c, out| {
            let g = c.t(0).map_err(|_| "gone")?;
            has(out_tensor(out)?, &c.dims(2), g.dtype())
        }),
        op("Tensor::avg_pool2d", 3, &[T, POOL], OUT_T, |c| {
            Ok(c.t(0)?.avg_pool2d(c.pool(1)).into())
        })
        .work(|c| Ok(pool_work(c.t(0)?.dims(), c.pool(1)))),
        op(
            "Tensor::avg_pool2d_backward",
            3,
            &[T, DIMS, POOL],
            OUT_T,
            |c| Ok(c.t(0)?.avg_pool2d_backward(&c.dims(1), c.pool(2)).into()),
        )
        .work(|c| Ok(pool_work(&c.dims(1), c.pool(2)).saturating_add(c.t(0)?.numel())))
        .expect(|c, out| {
            let g = c.t(0).map_err(|_| "gone")?;
            has(out_tensor(out)?, &c.dims(1), g.dtype())
        }),
        op("pool2d then its gradients", 3, &[T, POOL, B], NONE, |c| {
            let (x, p) = (c.t(0)?, c.pool(1));
            let run = || -> tessera_core::Result<bool> {
                let (y, at) = x.max_pool2d_with_indices(p)?;
                let gx = y.max_pool2d_backward(&at, x.dims(), p)?;
                let ga = x.avg_pool2d(p)?.avg_pool2d_backward(x.dims(), p)?;
                Ok(gx.dims() == x.dims() && ga.dims() == x.dims())
            };
            Ok(match run() {
                Ok(true) => Outcome::Ok(Vec::new()),
                Ok(false) => Outcome::Break("pooling gradients of another shape".into()),
                Err(e) => Outcome::Err(e.to_string()),
            })
        })
        .work(|c| Ok(pool_work(c.t(0)?.dims(), c.pool(1)).saturating_mul(4))),
    ]
}
