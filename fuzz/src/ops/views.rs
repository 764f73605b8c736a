//! Views: reshape, permute, transpose, broadcast, narrow, slice, squeeze, unsqueeze, flatten,
//! as_strided. All are cheap (a layout), whatever the size, so their work is 0.

use super::kinds::*;
use super::{has, op, out_tensor, same_dtype, FuzzBackend, Op};
use crate::machine::Ctx;
use tessera_core::Shape;

fn free<B: FuzzBackend>(_: &Ctx<'_, B>) -> Result<usize, crate::machine::Skip> {
    Ok(0)
}

/// The entries of this family.
pub fn ops<B: FuzzBackend>() -> Vec<Op<B>> {
    vec![
        op("Tensor::reshape", 6, &[T, DIMS], OUT_T, |c| {
            Ok(c.t(0)?.reshape(c.dims(1)).into())
        })
        .work(|c| Ok(c.t(0)?.numel()))
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            has(out_tensor(out)?, &c.dims(1), x.dtype())
        }),
        op("Tensor::reshape_infer", 3, &[T, AXES], OUT_T, |c| {
            Ok(c.t(0)?.reshape_infer(&c.axes(1)).into())
        })
        .work(|c| Ok(c.t(0)?.numel()))
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            if out_tensor(out)?.numel() != x.numel() {
                return Err("reshape_infer changed the element count".into());
            }
            same_dtype(c, 0, out)
        }),
        op("Tensor::view", 3, &[T, DIMS], OUT_T, |c| {
            Ok(c.t(0)?.view(c.dims(1)).into())
        })
        .work(free)
        .expect(|c, out| same_dtype(c, 0, out)),
        op("Tensor::permute", 4, &[T, PERM], OUT_T, |c| {
            Ok(c.t(0)?.permute(&c.dims(1)).into())
        })
        .work(free)
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            let dims: Vec<usize> = c.dims(1).iter().map(|&p| x.dims()[p]).collect();
            has(out_tensor(out)?, &dims, x.dtype())
        }),
        op("Tensor::transpose", 4, &[T, AXIS, AXIS], OUT_T, |c| {
            Ok(c.t(0)?.transpose(c.axis(1), c.axis(2)).into())
        })
        .work(free)
        .expect(|c, out| same_dtype(c, 0, out)),
        op("Tensor::t", 2, &[T], OUT_T, |c| Ok(c.t(0)?.t().into())).work(free),
        op("Tensor::broadcast_to", 5, &[T, DIMS], OUT_T, |c| {
            Ok(c.t(0)?.broadcast_to(c.dims(1)).into())
        })
        .work(free)
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            has(out_tensor(out)?, &c.dims(1), x.dtype())
        }),
        op("Tensor::narrow", 6, &[T, AXIS, SIZE, SIZE], OUT_T, |c| {
            Ok(c.t(0)?.narrow(c.axis(1), c.size(2), c.size(3)).into())
        })
        .work(free)
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            let axis = x.shape().axis("t", c.axis(1)).map_err(|e| e.to_string())?;
            let mut dims = x.dims().to_vec();
            dims[axis] = c.size(3);
            has(out_tensor(out)?, &dims, x.dtype())
        }),
        op(
            "Tensor::slice",
            5,
            &[T, AXIS, SIZE, SIZE, SIZE],
            OUT_T,
            |c| {
                Ok(c.t(0)?
                    .slice(c.axis(1), c.size(2), c.size(3), c.size(4))
                    .into())
            },
        )
        .work(free)
        .expect(|c, out| same_dtype(c, 0, out)),
        op("Tensor::squeeze", 2, &[T, AXIS], OUT_T, |c| {
            Ok(c.t(0)?.squeeze(c.axis(1)).into())
        })
        .work(free),
        op("Tensor::squeeze_all", 2, &[T], OUT_T, |c| {
            Ok(c.t(0)?.squeeze_all().into())
        })
        .work(free)
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            let dims: Vec<usize> = x.dims().iter().copied().filter(|&d| d != 1).collect();
            has(out_tensor(out)?, &dims, x.dtype())
        }),
        op("Tensor::unsqueeze", 4, &[T, AXIS], OUT_T, |c| {
            Ok(c.t(0)?.unsqueeze(c.axis(1)).into())
        })
        .work(free)
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            let o = out_tensor(out)?;
            if o.rank() != x.rank() + 1 || o.numel() != x.numel() {
                return Err(format!("unsqueeze of {} gave {}", x.shape(), o.shape()));
            }
            Ok(())
        }),
        op("Tensor::flatten", 3, &[T, AXIS, AXIS], OUT_T, |c| {
            Ok(c.t(0)?.flatten(c.axis(1), c.axis(2)).into())
        })
        .work(|c| Ok(c.t(0)?.numel()))
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            if out_tensor(out)?.numel() != x.numel().max(usize::from(x.rank() == 0)) {
                return Err("flatten changed the element count".into());
            }
            Ok(())
        }),
        op(
            "Tensor::as_strided",
            4,
            &[T, DIMS, DIMS, SIZE],
            OUT_T,
            |c| {
                // Strides from a dims draw: huge values become negative isizes, which must be
                // rejected like every stride that leaves the storage.
                let strides: Vec<isize> = c.dims(2).iter().map(|&s| s as isize).collect();
                Ok(c.t(0)?.as_strided(c.dims(1), strides, c.size(3)).into())
            },
        )
        .work(free)
        .expect(|c, out| {
            let x = c.t(0).map_err(|_| "input vanished".to_string())?;
            has(out_tensor(out)?, Shape::new(c.dims(1)).dims(), x.dtype())
        }),
    ]
}
