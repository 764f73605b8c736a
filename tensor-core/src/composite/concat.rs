//! Concatenation by writing each input into its region of a fresh output.

use crate::tensor::concat_shape;
use crate::{Backend, Result, Tensor};

/// Joins `tensors` along `axis` (checked again here, as [`Tensor::cat`] does).
pub fn concat<B: Backend>(tensors: &[&Tensor<B>], axis: usize) -> Result<Tensor<B>> {
    let dims = concat_shape(tensors, axis)?;
    let first = tensors[0];
    let mut out = Tensor::zeros(dims, first.dtype(), first.backend())?;
    let mut start = 0;
    for t in tensors {
        let len = t.dims()[axis];
        let region = out.layout().narrow(axis as isize, start, len)?;
        out.assign_into(&region, t, false)?;
        start += len;
    }
    Ok(out)
}
