//! index_select, gather, scatter_add, cat, stack and narrow_assign, with index tensors of
//! valid, negative and huge values.

use super::kinds::*;
use super::{has, op, out_tensor, same_dtype, FuzzBackend, Op};
use crate::machine::Ctx;
use tessera_core::{Backend, Result, Tensor};

/// The index values of argument `i` as an `i64` tensor whose rank is that of `x`: length along
/// `axis` (when it is an axis of `x`), 1 elsewhere, so that gather and scatter accept it.
fn index_like<B: FuzzBackend>(
    c: &Ctx<'_, B>,
    x: &Tensor<B>,
    i: usize,
    axis: isize,
) -> Result<Tensor<B>> {
    let values = c.indices(i);
    let n = values.len();
    let mut dims = vec![1usize; x.rank()];
    match x.shape().axis("index", axis) {
        Ok(a) => dims[a] = n,
        Err(_) if x.rank() > 0 => dims[0] = n,
        Err(_) => dims = vec![n],
    }
    if dims.iter().product::<usize>() != n {
        dims = vec![n];
    }
    Tensor::from_vec(values, dims, c.backend())
}

/// Work of an indexing op on `x` with `n` indices: about one output row per index.
fn rows_work<B: Backend>(x: &Tensor<B>, n: usize) -> usize {
    let row = x.numel() / x.dims().iter().copied().max().unwrap_or(1).max(1);
    row.saturating_mul(n.max(1)).saturating_add(x.numel())
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("Tensor::index_select", 5, &[T, AXIS, IDX], OUT_T, |c| {
            let x = c.t(0)?;
            let idx = Tensor::from_vec(c.indices(2), [c.indices(2).len()], c.backend());
            Ok(idx.and_then(|idx| x.index_select(c.axis(1), &idx)).into())
        })
        .work(|c| Ok(rows_work(&c.t(0)?, c.indices(2).len())))
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "gone")?;
            let axis = x.shape().axis("t", c.axis(1)).map_err(|e| e.to_string())?;
            let mut dims = x.dims().to_vec();
            dims[axis] = c.indices(2).len();
            has(out_tensor(out)?, &dims, x.dtype())
        }),
        op("Tensor::index_select(any)", 2, &[T, AXIS, T], OUT_T, |c| {
            Ok(c.t(0)?.index_select(c.axis(1), &c.t(2)?).into())
        })
        .work(|c| Ok(rows_work(&c.t(0)?, c.t(2)?.numel()))),
        op("Tensor::gather", 4, &[T, AXIS, IDX], OUT_T, |c| {
            let x = c.t(0)?;
            Ok(index_like(c, &x, 2, c.axis(1))
                .and_then(|idx| x.gather(c.axis(1), &idx))
                .into())
        })
        .expect(|c, out| same_dtype(c, 0, out)),
        op("Tensor::scatter_add", 4, &[T, AXIS, IDX], OUT_T, |c| {
            let x = c.t(0)?;
            let run = || -> Result<Tensor<B>> {
                let idx = index_like(c, &x, 2, c.axis(1))?;
                let src = Tensor::ones(idx.shape(), x.dtype(), c.backend())?;
                x.scatter_add(c.axis(1), &idx, &src)
            };
            Ok(run().into())
        })
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "gone")?;
            has(out_tensor(out)?, x.dims(), x.dtype())
        }),
        op(
            "Tensor::scatter_add(any)",
            2,
            &[T, AXIS, T, T],
            OUT_T,
            |c| Ok(c.t(0)?.scatter_add(c.axis(1), &c.t(2)?, &c.t(3)?).into()),
        ),
        op("Tensor::cat", 4, &[T, T, AXIS], OUT_T, |c| {
            let (a, b) = (c.t(0)?, c.t(1)?);
            Ok(Tensor::cat(&[&a, &b], c.axis(2)).into())
        })
        .expect(|c, out| {
            let (a, b) = (c.t(0).map_err(|_| "gone")?, c.t(1).map_err(|_| "gone")?);
            if out_tensor(out)?.numel() != a.numel() + b.numel() {
                return Err("cat changed the element count".into());
            }
            same_dtype(c, 0, out)
        }),
        op("Tensor::cat(empty list)", 1, &[AXIS], OUT_T, |c| {
            Ok(Tensor::<B>::cat(&[], c.axis(0)).into())
        }),
        op("Tensor::stack", 2, &[T, T, AXIS], OUT_T, |c| {
            let (a, b) = (c.t(0)?, c.t(1)?);
            Ok(Tensor::stack(&[&a, &b, &a], c.axis(2)).into())
        }),
        op(
            "Tensor::narrow_assign",
            3,
            &[T, AXIS, SIZE, T, B],
            OUT_T,
            |c| {
                Ok(c.t(0)?
                    .narrow_assign(c.axis(1), c.size(2), &c.t(3)?, c.flag(4))
                    .into())
            },
        )
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "gone")?;
            has(out_tensor(out)?, x.dims(), x.dtype())
        }),
    ]
}
